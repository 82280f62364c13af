#include "probes/report.h"

namespace probelab::probes {

nlohmann::json to_json(const RewindRequest& r) {
  return {{"step", r.step},
          {"rank", r.rank},
          {"by", r.by},
          {"expression", r.expression},
          {"watch_point", r.watch_point},
          {"op", r.op},
          {"tensor", r.tensor},
          {"capture", r.full ? "full_dump" : "stats_dump"},
          {"scope", r.all_ops ? "all" : "implicated"},
          {"then", r.then_continue ? "continue" : "stop"},
          {"ops", r.ops}};
}

nlohmann::json RuntimeReport::to_json() const {
  nlohmann::json j;
  j["rank"] = rank;
  auto arr = [](const auto& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : v) a.push_back(probes::to_json(x));
    return a;
  };
  j["anomalies"] = arr(anomalies);
  j["triggers"] = arr(triggers);
  j["rules_fired"] = arr(rules_fired);
  j["breakpoints"] = nlohmann::json::array();
  for (const auto& b : breakpoints)
    j["breakpoints"].push_back({{"op", b.op},
                                {"op_id", b.op_id},
                                {"task_id", b.task_id},
                                {"stream", b.stream},
                                {"step", b.step},
                                {"condition", b.condition},
                                {"condition_held", b.condition_held},
                                {"halt_cycle", b.halt_cycle},
                                {"resume_cycle", b.resume_cycle},
                                {"dumped", b.dumped},
                                {"missing", b.missing}});
  j["steps"] = nlohmann::json::array();
  for (const auto& s : steps)
    j["steps"].push_back({{"step", s.step}, {"float_status", s.float_status}, {"records", s.records}, {"anomalies", s.anomalies}});
  j["capture"] = probes::to_json(capture);
  j["counters"] = counters;
  j["dumps"] = {{"files", dump_files}, {"bytes", dump_bytes}, {"raw_bytes", dump_raw_bytes}, {"entries", dump_entries}};
  j["comparisons"] = arr(comparisons);
  j["first_divergence"] = first_divergence ? probes::to_json(*first_divergence) : nlohmann::json(nullptr);
  j["diagnosis"] = arr(diagnosis);
  j["integrity"] = arr(integrity);
  j["replays"] = nlohmann::json::array();
  for (const auto& r : replays)
    j["replays"].push_back({{"op_id", r.op_id}, {"step", r.step}, {"kind", anomaly_kind_name(r.kind)},
                            {"reproduced", r.reproduced}, {"detail", r.detail}});
  j["stop_requested"] = stop_requested;
  j["rewinds"] = arr(rewinds);
  j["warnings"] = warnings;
  return j;
}

}  // namespace probelab::probes
