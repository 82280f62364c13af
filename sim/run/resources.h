// What a run needs before it starts: HBM per chip and host memory of the simulating process,
// estimated from the prepared workload. A run whose estimate cannot fit (the chip's hbm_bytes,
// or the host memory available to the simulations running at once) is refused as bad input
// with the figures, before anything runs, instead of failing or swapping minutes later.
#pragma once

#include <cstdint>
#include <string>

#include "sim/scenario/prepared_run.h"

namespace probelab::sim {

struct ResourceEstimate {
  /// HBM of one chip: every tensor of the executed graph as the executor lays it out (each in
  /// its own 512-byte aligned block of its physical size), the capture buffers, stream rings.
  std::uint64_t hbm_bytes_per_rank = 0;
  /// Peak memory of one simulating process: the touched HBM of every rank (the backing store
  /// holds real bytes), host copies of inputs and results, the comparison store, a resumed run's
  /// checkpoint values (PreparedRun::resume_values), a fixed base.
  std::uint64_t host_bytes = 0;
  std::string str() const;  // "HBM 1.2 GiB per chip, host ~2.5 GiB"
};

ResourceEstimate estimate_resources(const PreparedRun& run);

/// Memory this machine can give the simulations now (MemAvailable of /proc/meminfo), 0 when
/// unknown.
std::uint64_t available_host_memory();

/// Throws ScenarioError naming the scenario when the HBM estimate exceeds chip.hbm_bytes or
/// `jobs` simulations at once would exceed `host_limit` bytes (0: available_host_memory(); no
/// host check when that is unknown).
void check_resources(const PreparedRun& run, int jobs, std::uint64_t host_limit);

/// "1.5 GiB", "640 KiB", "12 bytes".
std::string format_bytes(std::uint64_t bytes);

}  // namespace probelab::sim
