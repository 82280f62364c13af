#include "sim/run/trace_stats.h"

#include <map>
#include <variant>

#include "probes/insertion_pass.h"
#include "sim/run/json_members.h"

namespace probelab::sim {

using nlohmann::json;

json op_cycles(const std::vector<const PerfLedger*>& ledgers, const std::vector<const graph::Graph*>& graphs,
               const chip::Trace* trace, const chip::ChipClock& clock) {
  struct Acc {
    std::uint64_t tasks = 0, cycles = 0, probe_tasks = 0, probe_ps = 0, collective_ps = 0;
  };
  std::map<std::pair<std::uint32_t, std::uint32_t>, Acc> acc;  // (rank, op id)
  if (trace) {
    for (const chip::Trace::Event& e : trace->events()) {
      if (e.phase != 'X' || e.category != "task" || e.pid >= graphs.size() || !graphs[e.pid]) continue;
      const std::uint64_t* op_id = nullptr;
      for (const auto& [k, v] : e.args)
        if (k == "op_id") op_id = std::get_if<std::uint64_t>(&v);
      if (!op_id) continue;
      Acc& a = acc[{e.pid, static_cast<std::uint32_t>(*op_id)}];
      if (e.name == "capture" || e.name == "breakpoint") {
        ++a.probe_tasks;
        a.probe_ps += e.dur_ps;
      } else if (e.name == "collective") {
        ++a.tasks;
        a.collective_ps += e.dur_ps;
      }
    }
  }
  json out = json::array();
  for (std::uint32_t r = 0; r < graphs.size(); ++r) {
    if (!graphs[r]) continue;
    for (std::uint32_t id : graphs[r]->topo_order()) {
      const graph::Op& op = graphs[r]->op(id);
      if (probes::is_probe_op(op)) continue;
      auto it = acc.find({r, id});
      Acc a = it == acc.end() ? Acc{} : it->second;
      if (r < ledgers.size() && ledgers[r]) {  // compute ops: their kernel records
        a.tasks += ledgers[r]->op(id).kernels;
        a.cycles += ledgers[r]->op(id).cycles;
      }
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
