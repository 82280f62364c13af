// Rewind: the re-execution a rewind action asks for (rewind.h).
#include "sim/run/rewind.h"

#include <fmt/format.h>

#include <fstream>

#include "sim/html/report_html.h"
#include "sim/run/checkpoint_store.h"
#include "sim/run/report.h"
#include "sim/run/runner.h"

namespace probelab::sim {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The probe config as a mapping (a file reference is read, relative to the scenario).
YAML::Node probes_map(const Scenario& s) {
  if (s.probes.IsScalar()) {
    fs::path f = s.probes.as<std::string>();
    if (f.is_relative() && fs::exists(s.file.parent_path() / f)) f = s.file.parent_path() / f;
    return YAML::LoadFile(f.string());
  }
  return YAML::Clone(s.probes);
}

}  // namespace

std::optional<RewindPlan> plan_rewind(const Scenario& s, const json& result, const fs::path& stage_dir) {
  if (!result.contains("rewind_request") || !result["rewind_request"].is_object()) return std::nullopt;
  const json& rq = result["rewind_request"];
  RewindPlan plan;
  plan.request = rq;
  const auto step = rq.at("step").get<std::uint32_t>();
  // The last checkpoint at or before the anomaly's step (every rank has the same steps).
  const fs::path ckpt = stage_dir / "checkpoints";
  for (std::uint32_t k : checkpoint_steps(ckpt, 0))
    if (k <= step) plan.from_step = k;
  plan.from_checkpoint = plan.from_step > 0;
  plan.to_step = rq.value("then", "stop") == "continue" ? static_cast<std::uint32_t>(s.steps - 1) : step;

  Scenario p = s;
  p.name = "rewind";
  p.rewind_pass = true;
  limit_steps(p, static_cast<int>(plan.to_step) + 1);
  p.checkpoint_every = 0;
  p.expectations.clear();
  p.variants.clear();
  p.campaign.reset();
  if (plan.from_checkpoint) p.resume = Scenario::Resume{plan.from_step, ckpt};
  YAML::Node probes = probes_map(s);
  YAML::Node wp;
  wp["name"] = "rewind";
  if (rq.value("scope", "implicated") == "all") wp["match"].push_back("*");
  else
    for (const auto& op : rq.at("ops")) wp["match"].push_back(op.get<std::string>());
  wp["mode"] = rq.value("capture", "full_dump") == "full_dump" ? "full" : "statistics";
  wp["data_mode"].push_back("input");
  wp["data_mode"].push_back("output");
  wp["steps"].push_back(fmt::format("{}-{}", plan.from_step, step));
  YAML::Node wps = probes["watch_points"];
  if (wps.IsScalar()) {
    const std::string one = wps.as<std::string>();
    probes["watch_points"] = YAML::Node(YAML::NodeType::Sequence);
    probes["watch_points"].push_back(one);
  }
  probes["watch_points"].push_back(wp);
  p.probes = probes;
  p.probes_source.reset();
  plan.scenario = std::move(p);
  return plan;
}

json run_rewind(const RewindPlan& plan, const json& pass1, const fs::path& stage_dir, const RunOptions& opts,
                const std::function<void(const std::string&)>& progress) {
  json link = {{"requested", plan.request},
               {"pass", "rewind"},
               {"from_step", plan.from_step},
               {"from_checkpoint", plan.from_checkpoint},
               {"to_step", plan.to_step},
               {"capture", plan.request.value("capture", "full_dump")}};
  json ops = json::array();
  if (plan.request.value("scope", "implicated") == "all") ops.push_back("*");
  else ops = plan.request.value("ops", json::array());
  link["ops"] = ops;
  RunOptions ro;
  ro.out_root = stage_dir;
  ro.load = opts.load;
  ro.jobs = 1;
  ro.baseline = false;
  ro.trace = opts.trace;
  ro.trace_formats = opts.trace_formats;
  ro.trace_steps = opts.trace_steps;
  ro.timeout_s = opts.timeout_s;
  ro.host_memory_limit = opts.host_memory_limit;
  json rep;
  try {
    Runner runner(ro);
    runner.add(plan.scenario);
    rep = runner.run(progress).at(0).report;
  } catch (const std::exception& e) {
    link["status"] = "error";
    link["error"] = e.what();
    return link;
  }
  link["status"] = rep.value("status", "error");
  if (rep.contains("error")) link["error"] = rep["error"];
  link["cycles"] = rep["cycles"].value("total", json(nullptr));

  // The same trigger again, at the same op (conditions) or rule, and step.
  const json& rq = plan.request;
  const auto step = rq.at("step").get<std::uint32_t>();
  bool again = false;
  if (rq.value("by", "") == "condition") {
    for (const auto& a : rep.value("anomalies", json::array()))
      again = again || (a.value("kind", "") == "condition" && a.value("op", "") == rq.value("op", "") &&
                        a.value("step", 0u) == step && a.value("condition", "") == rq.value("expression", ""));
  } else {
    for (const auto& r : rep.value("rules_fired", json::array()))
      again = again || (r.value("rule", "") == rq.value("expression", "") && r.value("step", 0u) == step);
  }
  link["reproduced"] = again;
  // Losses of the steps both passes ran, bit for bit.
  std::size_t compared = 0;
  bool same = true;
  const json& l1 = pass1.contains("losses") ? pass1["losses"] : json(nullptr);
  const json& l2 = rep.contains("losses") ? rep["losses"] : json(nullptr);
  if (l1.is_array() && l2.is_array())
    for (std::size_t r = 0; r < l1.size() && r < l2.size(); ++r)
      for (std::size_t k = 0; k < l2[r].size(); ++k) {
        const std::size_t s = plan.from_step + k;
        if (s >= l1[r].size()) break;
        ++compared;
        same = same && l1[r][s] == l2[r][k];
      }
  link["losses_compared"] = compared;
  link["losses_identical"] = same;
  std::size_t entries = 0;
  for (int r = 0; r < plan.scenario.ranks; ++r) {
    const json m = read_json_or_null(stage_dir / "rewind" / "dump" / fmt::format("rank{}", r) / "dump.json");
    if (m.is_object() && m.contains("entries")) entries += m["entries"].size();
  }
  link["dump_entries"] = entries;

  // Pass 2 names the run it re-executes.
  rep["rewind_of"] = {{"run", ".."}, {"requested", plan.request}, {"from_step", plan.from_step}};
  const fs::path dir = stage_dir / "rewind";
  write_text_atomic(dir / "summary.txt", summary_text(rep));
  write_text_atomic(dir / "report.html", html::report_html(rep));
  write_text_atomic(dir / "report.json", rep.dump(2) + "\n");
  return link;
}

}  // namespace probelab::sim
