// Device cycles per executed op: compute ops from the AI cores' op records (chip::OpRecord),
// collectives and probe tasks (capture, breakpoint) from the stream tracks of the trace when one
// was recorded (every task the stream engine runs is a span carrying its op id).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/ai_core.h"
#include "chip_model/clock.h"
#include "chip_model/trace.h"
#include "graph/graph.h"

namespace probelab::sim {

/// [{op, type, rank, tasks, cycles, probe_tasks, probe_cycles}] in (rank, executed order);
/// graphs[r] is rank r's executed graph (op ids as submitted; null: a rank simulated elsewhere),
/// records[r] its AiCore's records
/// (may be null), `trace` may be null (then collectives and probe tasks count 0 cycles).
nlohmann::json op_cycles(const std::vector<const std::vector<chip::OpRecord>*>& records,
                         const std::vector<const graph::Graph*>& graphs, const chip::Trace* trace,
                         const chip::ChipClock& clock);

}  // namespace probelab::sim
