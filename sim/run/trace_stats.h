// Device cycles per executed op: compute ops from the AI cores' op records (chip::OpRecord, as
// folded per rank by perf_ledger.h),
// collectives and probe tasks (capture, breakpoint) from the stream tracks of the trace when one
// was recorded (every task the stream engine runs is a span carrying its op id).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/clock.h"
#include "chip_model/trace.h"
#include "graph/graph.h"
#include "sim/run/perf_ledger.h"

namespace probelab::sim {

/// [{op, type, rank, tasks, cycles, probe_tasks, probe_cycles}] in (rank, executed order);
/// graphs[r] is rank r's executed graph (op ids as submitted; null: a rank simulated elsewhere),
/// ledgers[r] its ledger
/// (may be null), `trace` may be null (then collectives and probe tasks count 0 cycles).
nlohmann::json op_cycles(const std::vector<const PerfLedger*>& ledgers,
                         const std::vector<const graph::Graph*>& graphs, const chip::Trace* trace,
                         const chip::ChipClock& clock);

}  // namespace probelab::sim
