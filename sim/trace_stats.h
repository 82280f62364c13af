// Device time per executed op, from the stream tracks of the recorded trace (every task the
// stream engine runs is a span carrying its op id): kernel/collective tasks of an op and the
// probe tasks (capture, breakpoint) observing it, per rank.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/clock.h"
#include "chip_model/trace.h"
#include "graph/graph.h"

namespace probelab::sim {

/// [{op, type, rank, tasks, cycles, probe_tasks, probe_cycles}] in (rank, executed order);
/// graphs[r] is rank r's executed graph (op ids as submitted).
nlohmann::json op_cycles(const chip::Trace& trace, const std::vector<const graph::Graph*>& graphs,
                         const chip::ChipClock& clock);

}  // namespace probelab::sim
