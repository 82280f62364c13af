#include "sim/run/trace_stats.h"

#include <cmath>
#include <map>

#include "probes/insertion_pass.h"

namespace probelab::sim {

using nlohmann::json;

json op_cycles(const std::vector<const std::vector<chip::OpRecord>*>& records, const std::vector<const graph::Graph*>& graphs,
               const chip::Trace* trace, const chip::ChipClock& clock) {
  struct Acc {
    std::uint64_t tasks = 0, cycles = 0, probe_tasks = 0, probe_ps = 0, collective_ps = 0;
  };
  std::map<std::pair<std::uint32_t, std::uint32_t>, Acc> acc;  // (rank, op id)
  for (std::uint32_t r = 0; r < records.size(); ++r) {
    if (!records[r]) continue;
    for (const auto& rec : *records[r]) {
      Acc& a = acc[{r, rec.op_id}];
      ++a.tasks;
      a.cycles += rec.cycles;
    }
  }
  if (trace) {
    const json doc = json::parse(trace->to_json_string());
    for (const auto& e : doc.at("traceEvents")) {
      if (e.value("ph", "") != "X" || e.value("cat", "") != "task" || !e.contains("args")) continue;
      const auto pid = e.value("pid", 0u);
      if (pid >= graphs.size() || !e["args"].contains("op_id")) continue;
      const auto ps = static_cast<std::uint64_t>(std::llround(e.value("dur", 0.0) * 1e6));
      const std::string name = e.value("name", "");
      Acc& a = acc[{pid, e["args"]["op_id"].get<std::uint32_t>()}];
      if (name == "capture" || name == "breakpoint") {
        ++a.probe_tasks;
        a.probe_ps += ps;
      } else if (name == "collective") {
        ++a.tasks;
        a.collective_ps += ps;
      }
    }
  }
  json out = json::array();
  for (std::uint32_t r = 0; r < graphs.size(); ++r) {
    for (std::uint32_t id : graphs[r]->topo_order()) {
      const graph::Op& op = graphs[r]->op(id);
      if (probes::is_probe_op(op)) continue;
      auto it = acc.find({r, id});
      const Acc a = it == acc.end() ? Acc{} : it->second;
      out.push_back({{"op", op.name},
                     {"type", op.type},
                     {"rank", r},
                     {"tasks", a.tasks},
                     {"cycles", a.cycles + clock.ps_to_cycles(a.collective_ps)},
                     {"probe_tasks", a.probe_tasks},
                     {"probe_cycles", clock.ps_to_cycles(a.probe_ps)}});
    }
  }
  return out;
}

}  // namespace probelab::sim
