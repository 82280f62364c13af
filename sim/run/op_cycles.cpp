#include "sim/run/op_cycles.h"

#include "probes/insertion_pass.h"
#include "sim/run/json_members.h"

namespace probelab::sim {

using nlohmann::json;

json op_cycles(const std::vector<const PerfLedger*>& ledgers, const std::vector<const graph::Graph*>& graphs,
               const chip::ChipClock& clock) {
  json out = json::array();
  for (std::uint32_t r = 0; r < graphs.size(); ++r) {
    if (!graphs[r]) continue;
    for (std::uint32_t id : graphs[r]->topo_order()) {
      const graph::Op& op = graphs[r]->op(id);
      if (probes::is_probe_op(op)) continue;
      static const PerfLedger::OpTotals none;
      const PerfLedger::OpTotals& a = r < ledgers.size() && ledgers[r] ? ledgers[r]->op(id) : none;
      JsonMembers m;
      m.put("cycles", a.cycles + clock.ps_to_cycles(a.collective_ps))
          .put("op", op.name)
          .put("probe_cycles", clock.ps_to_cycles(a.probe_ps))
          .put("probe_tasks", a.probe_tasks)
          .put("rank", r)
          .put("tasks", a.tasks)
          .put("type", op.type);
      out.push_back(m.done());
    }
  }
  return out;
}

}  // namespace probelab::sim
