// Device cycles per executed op, from each rank's PerfLedger (perf_ledger.h): compute ops from
// the AI cores' op records, collectives and probe tasks (capture, breakpoint) from the stream
// engines' task records. The same with or without a trace (before, collectives and probe tasks
// were read from the trace's stream spans and counted 0 cycles under --no-trace).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/clock.h"
#include "graph/graph.h"
#include "sim/run/perf_ledger.h"

namespace probelab::sim {

/// [{op, type, rank, tasks, cycles, probe_tasks, probe_cycles}] in (rank, executed order);
/// graphs[r] is rank r's executed graph (op ids as submitted; null: a rank simulated elsewhere),
/// ledgers[r] its ledger (null: nothing ran there). Collective and probe cycles are the sums of
/// their tasks' times in picoseconds, converted once.
nlohmann::json op_cycles(const std::vector<const PerfLedger*>& ledgers,
                         const std::vector<const graph::Graph*>& graphs, const chip::ChipClock& clock);

}  // namespace probelab::sim
