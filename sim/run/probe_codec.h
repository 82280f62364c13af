// The probe runtime's per-rank results as bytes, so that the partitions of a distributed run can
// send them to the process that writes the report: each rank's RuntimeReport and the samples of
// its sync probes, in MessagePack (exact doubles, NaN and Inf included). The cross-rank
// consistency check and the job's diagnosis then run on the same inputs as in one process.
//
// Every field of the structs involved is listed in probe_codec.cpp; a field added to one of them
// and not listed there is lost on the way: tests/sim/run/test_probe_codec.cpp round-trips the
// statistics (every field set), the MPI identity tests whole reports, one with a divergence
// measured across processes.
#pragma once

#include <cstdint>
#include <vector>

#include "probes/consistency.h"
#include "probes/report.h"

namespace probelab::sim {

struct ProbeRankResults {
  std::vector<probes::RuntimeReport> reports;  // one per rank, ascending
  std::vector<probes::SyncSample> samples;
};

std::vector<std::uint8_t> encode_probe_results(const ProbeRankResults& r);
/// Throws std::runtime_error on malformed bytes.
ProbeRankResults decode_probe_results(const std::vector<std::uint8_t>& bytes);

}  // namespace probelab::sim
