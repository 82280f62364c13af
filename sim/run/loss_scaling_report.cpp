#include "sim/run/loss_scaling_report.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "sim/run/probe_results.h"

namespace probelab::sim {

using nlohmann::json;

json loss_scale_json(const ExecutorResult& er, bool enabled) {
  if (!enabled) return nullptr;
  json steps = json::array();
  for (const auto& s : er.loss_scale) {
    json j = probes::to_json(s);
    j["status"] = float_status_names(s.status);
    steps.push_back(std::move(j));
  }
  return {{"steps", steps}, {"param_digest", fmt::format("{:016x}", er.param_digest)}};
}

json loss_scaling_section(const json& per_rank, const LossScalingSpec& spec) {
  json steps = json::array(), digests = json::array();
  std::set<std::string> distinct;
  std::map<std::uint32_t, std::set<bool>> skipped;  // step -> decisions seen
  for (const auto& r : per_rank) {
    for (const auto& s : r.at("steps")) {
      skipped[s.at("step").get<std::uint32_t>()].insert(s.at("skipped").get<bool>());
      steps.push_back(s);
    }
    digests.push_back(r.at("param_digest"));
    distinct.insert(r.at("param_digest").get<std::string>());
  }
  bool decisions_agree = true;
  for (const auto& [step, d] : skipped) decisions_agree = decisions_agree && d.size() == 1;
  return {{"scale_op", spec.scale_op},       {"guard", spec.guard},      {"all_reduce", spec.all_reduce},
          {"steps", steps},                  {"param_digests", digests}, {"ranks_agree", distinct.size() <= 1},
          {"decisions_agree", decisions_agree}};
}

}  // namespace probelab::sim
