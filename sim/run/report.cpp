#include "sim/run/report.h"

#include <algorithm>

#include <fmt/format.h>

#include "graph/dtype.h"
#include "sim/run/hang_report.h"
#include "sim/run/quant_report.h"
#include "sim/scenario/source_root.h"

namespace probelab::sim {

using nlohmann::json;

namespace {

std::string display_path(const std::filesystem::path& p) {
  std::error_code ec;
  const auto root = std::filesystem::weakly_canonical(find_source_root(), ec);
  const auto abs = std::filesystem::weakly_canonical(p, ec);
  auto rel = abs.lexically_relative(root);
  if (!ec && !rel.empty() && rel.native().rfind("..", 0) != 0) return rel.generic_string();
  return p.filename().generic_string();
}

json chip_json(const PreparedRun& run) {
  json params = json::object();
  for (const auto& info : chip::chip_params()) params[info.name] = chip::get_param(run.chip, info.name);
  json overrides = json::object();
  for (const auto& [k, v] : run.scenario.chip.overrides) overrides[k] = v;
  return {{"preset", run.chip.preset}, {"overrides", overrides}, {"params", params}};
}

std::uint64_t total_cycles(const json& r) {
  return r.contains("cycles") ? r["cycles"].value("total", std::uint64_t{0}) : 0;
}

/// Steps every rank of a run ran (a stop or rewind action ends a run early).
std::size_t steps_run(const json& r) {
  if (!r.contains("cycles") || !r["cycles"].contains("per_step")) return 0;
  std::size_t n = SIZE_MAX;
  for (const auto& rank : r["cycles"]["per_step"]) n = std::min(n, rank.size());
  return n == SIZE_MAX ? 0 : n;
}

/// Cycles of the first `steps` steps themselves: per rank the sum of its step times, the slowest rank.
std::uint64_t step_cycles(const json& r, std::size_t steps = SIZE_MAX) {
  std::uint64_t worst = 0;
  if (!r.contains("cycles") || !r["cycles"].contains("per_step")) return 0;
  for (const auto& rank : r["cycles"]["per_step"]) {
    std::uint64_t sum = 0;
    for (std::size_t k = 0; k < rank.size() && k < steps; ++k) sum += rank[k].get<std::uint64_t>();
    worst = std::max(worst, sum);
  }
  return worst;
}

json capture_section(const json& result, const json& baseline) {
  json cap = result.contains("capture") ? result["capture"] : json::object();
  // A run that stopped early (stop, rewind) is compared over the steps it ran.
  const bool base_ok = baseline.is_object() && baseline.value("status", "") == "ok";
  const std::size_t common = base_ok ? std::min(steps_run(result), steps_run(baseline)) : SIZE_MAX;
  const std::uint64_t with = step_cycles(result, common);
  cap["cycles_with_probes"] = with;
  if (base_ok) {
    const std::uint64_t without = step_cycles(baseline, common);
    cap["cycles_without_probes"] = without;
    cap["overhead_percent"] = overhead_percent(with, without);
    cap["total_overhead_percent"] = overhead_percent(total_cycles(result), total_cycles(baseline));
  } else {
    cap["cycles_without_probes"] = nullptr;
    cap["overhead_percent"] = nullptr;
    cap["total_overhead_percent"] = nullptr;
  }
  return cap;
}

}  // namespace

json overhead_percent(std::uint64_t with, std::uint64_t without) {
  if (without == 0) return nullptr;
  return (static_cast<double>(with) - static_cast<double>(without)) / static_cast<double>(without) * 100.0;
}

json build_report(const PreparedRun& run, json result, const json& baseline, const std::vector<VariantOutcome>& variants) {
  const Scenario& s = run.scenario;
  json r;
  r["schema"] = kReportSchema;
  r["status"] = result.value("status", "error");
  if (result.contains("error")) r["error"] = result["error"];
  if (result.value("bad_input", false)) r["bad_input"] = true;
  r["scenario"] = {{"name", s.name},
                   {"description", s.description},
                   {"file", display_path(s.file)},
                   {"model", s.model.ref},
                   {"mode", std::string(run_mode_name(s.mode))},
                   {"ranks", s.ranks},
                   {"steps", s.steps}};
  r["seed"] = s.seed;
  r["chip"] = chip_json(run);
  r["precision"] = {{"compute", std::string(graph::dtype_name(s.precision.compute))},
                    {"master_weights", s.precision.master_fp32 ? "fp32" : "none"},
                    {"accumulation", s.precision.accumulation},
                    {"overflow_mode", s.precision.overflow_mode}};
  json saturated = json::array();
  for (const auto& [tensor, n] : run.workload.saturated_constants)
    saturated.push_back({{"tensor", tensor}, {"elements", n}});
  r["precision"]["saturated_constants"] = std::move(saturated);
  // The preparation's warnings, then the simulation's that none of them already says (the
  // insertion pass names a watch point that selects nothing, which a preparation warning that
  // the config selects nothing names too); then each variant's, naming it: its preparation
  // warnings the scenario does not give, and its simulation's that neither the list so far nor
  // its own preparation already says.
  json warnings = json::array();
  for (const auto& w : run.warnings) warnings.push_back(w);
  if (result.contains("warnings") && result["warnings"].is_array())
    for (const auto& w : result["warnings"])
      if (!w.is_string() || !run.already_warned(w.get<std::string>())) warnings.push_back(w);
  for (const auto& v : variants) {
    for (const auto& w : variant_warnings(run, *v.run)) warnings.push_back(w);
    if (!v.result.contains("warnings") || !v.result["warnings"].is_array()) continue;
    for (const auto& w : v.result["warnings"]) {
      if (!w.is_string() || v.run->already_warned(w.get<std::string>())) continue;
      if (std::find(warnings.begin(), warnings.end(), w) != warnings.end()) continue;
      warnings.push_back(variant_warning(v.run->variant, w.get<std::string>()));
    }
  }
  r["warnings"] = warnings;
  r["probe_config"] = run.probes ? probe_config_json(*run.probes) : json(nullptr);
  json cycles = result.contains("cycles") ? result["cycles"] : json::object();
  cycles["baseline"] = baseline.is_object() && baseline.value("status", "") == "ok" ? json(total_cycles(baseline))
                                                                                   : json(nullptr);
  r["cycles"] = cycles;
  r["capture"] = run.probes ? capture_section(result, baseline) : json(nullptr);
  json vs = json::array();
  for (const auto& v : variants) {
    json sets = json::object();
    for (const auto& variant : s.variants)
      if (variant.name == v.run->variant)
        for (const auto& [k, val] : variant.sets) sets[k] = val;
    json entry = {{"name", v.run->variant},
                  {"sets", sets},
                  {"status", v.result.value("status", "error")},
                  {"cycles", total_cycles(v.result)}};
    if (v.result.contains("error")) entry["error"] = v.result["error"];
    entry["capture"] = v.run->probes ? capture_section(v.result, v.baseline) : json(nullptr);
    entry["quantization"] = v.result.contains("quantization") ? v.result["quantization"] : json(nullptr);
    entry["losses"] = v.result.contains("losses") ? v.result["losses"] : json(nullptr);
    vs.push_back(std::move(entry));
  }
  r["variants"] = vs;
  // The simulation's sections, moved (a long run's perf and anomalies are most of its result).
  for (const char* key : {"ops", "tasks", "anomalies", "float_status", "breakpoints", "rules_fired", "injections", "comparisons",
                          "comparisons_skipped", "first_failing_op", "consistency", "diagnosis", "replays", "fingerprints",
                          "losses", "loss_scaling", "checkpoints", "perf", "quantization"}) {
    r[key] = result.contains(key) ? std::move(result[key]) : json(nullptr);
  }
  if (result.contains("hang")) r["hang"] = std::move(result["hang"]);  // only when the job hung
  return r;
}

json probe_config_json(const probes::ProbeConfig& cfg) {
  json mapping = json::array();
  for (const auto& m : cfg.mapping) mapping.push_back({{"from", m.from}, {"to", m.to}, {"note", m.note}});
  return {{"format", cfg.format}, {"source", display_path(cfg.source)}, {"mapping", mapping}};
}

std::string mapping_text(const json& mapping, std::string_view indent, std::size_t width) {
  std::string out;
  for (const auto& m : mapping)
    out += fmt::format("{}{:<{}} -> {}{}\n", indent, m.value("from", ""), width,
                       m.value("to", "").empty() ? "(nothing)" : m.value("to", ""),
                       m.value("note", "").empty() ? "" : "  # " + m.value("note", ""));
  return out;
}

void add_expectations(json& report, const Scenario& s) {
  json list = json::array();
  // A job that hung passes only where a hang expectation holds; its other expectations are
  // evaluated on what it did before (the steps completed, the anomalies found).
  const std::string status = report.value("status", "");
  bool all = status == "ok" || (status == "hang" && std::any_of(s.expectations.begin(), s.expectations.end(),
                                                                   [](const Expectation& e) { return e.kind == "hang"; }));
  for (std::size_t i = 0; i < s.expectations.size(); ++i) {
    const Expectation& e = s.expectations[i];
    ExpectationResult res = evaluate(e, report);
    if (status != "ok" && status != "hang") {
      res.passed = false;
      res.actual = "the simulation failed: " + report.value("error", std::string("unknown error"));
    }
    all = all && res.passed;
    list.push_back({{"index", i},
                    {"kind", e.kind},
                    {"line", e.line},
                    {"passed", res.passed},
                    {"expected", res.expected},
                    {"actual", res.actual}});
  }
  report["expectations"] = list;
  report["passed"] = all;
}

std::string summary_text(const json& r) {
  std::string out;
  const json& sc = r["scenario"];
  out += fmt::format("scenario {} ({}): {}\n", sc.value("name", "?"), sc.value("file", "?"),
                     r.value("passed", false) ? "PASSED" : "FAILED");
  if (!sc.value("description", "").empty()) out += "  " + sc.value("description", "") + "\n";
  out += fmt::format("  model {} ({}), ranks {}, steps {}, seed {}, chip {}\n", sc.value("model", "?"),
                     sc.value("mode", "?"), sc.value("ranks", 0), sc.value("steps", 0), r.value("seed", 0),
                     r["chip"].value("preset", "?"));
  if (r.value("status", "") == "hang") out += hang_text(r["hang"]);
  else if (r.value("status", "") != "ok") out += "  simulation error: " + r.value("error", std::string("?")) + "\n";
  if (r.contains("cycles") && r["cycles"].is_object())
    out += fmt::format("  cycles: {}{}\n", r["cycles"].value("total", std::uint64_t{0}),
                       r["cycles"]["baseline"].is_number()
                           ? fmt::format(" (without probes {})", r["cycles"]["baseline"].get<std::uint64_t>())
                           : std::string());
  if (r["capture"].is_object()) {
    const json& c = r["capture"];
    out += fmt::format("  capture: {} records, {} dropped, {} corrupt, {} bytes, {} stall cycles, overhead {}\n",
                       c.value("records", std::uint64_t{0}), c.value("dropped", std::uint64_t{0}),
                       c.value("corrupt", std::uint64_t{0}),
                       c.value("bytes", std::uint64_t{0}), c.value("stall_cycles", std::uint64_t{0}),
                       c["overhead_percent"].is_number() ? fmt::format("{:.3f}%", c["overhead_percent"].get<double>())
                                                         : std::string("n/a"));
  }
  for (const auto& v : r["variants"]) {
    const json& c = v["capture"];
    out += fmt::format("  variant {}: {} cycles{}\n", v.value("name", "?"), v.value("cycles", std::uint64_t{0}),
                       c.is_object() && c["overhead_percent"].is_number()
                           ? fmt::format(", capture overhead {:.3f}%, dropped {}", c["overhead_percent"].get<double>(),
                                         c.value("dropped", std::uint64_t{0}))
                           : std::string());
  }
  if (r.contains("probe_config") && r["probe_config"].is_object() && r["probe_config"].value("format", "") == "msprobe") {
    out += fmt::format("  probes: msprobe config.json {}, translated:\n", r["probe_config"].value("source", "?"));
    out += mapping_text(r["probe_config"]["mapping"], "    ", 0);
  }
  if (r.contains("quantization")) out += quant_summary(r["quantization"]);
  if (r.contains("rewind") && r["rewind"].is_object()) {
    const json& w = r["rewind"];
    const json& q = w["requested"];
    out += fmt::format("  rewind: {} '{}'{} at step {} -> re-executed steps {}..{} {} with {} of {}: {}{}{} ({}/)\n",
                       q.value("by", "?"), q.value("expression", "?"),
                       q.value("op", "").empty() ? std::string() : " on " + q.value("op", ""), q.value("step", 0),
                       w.value("from_step", 0), w.value("to_step", 0),
                       w.value("from_checkpoint", false) ? fmt::format("from the step-{} checkpoint", w.value("from_step", 0))
                                                         : std::string("from the start"),
                       w.value("capture", "?"),
                       w["ops"].size() == 1 && w["ops"][0] == "*" ? std::string("every op")
                                                                  : fmt::format("{} ops", w["ops"].size()),
                       w.value("status", "?") != "ok" ? "failed: " + w.value("error", std::string("?"))
                       : w.value("reproduced", false) ? "reproduced"
                                                      : "NOT reproduced",
                       w.value("losses_compared", 0) ? fmt::format(", {} losses {}", w.value("losses_compared", 0),
                                                                   w.value("losses_identical", false) ? "identical" : "DIFFER")
                                                     : std::string(),
                       fmt::format(", {} dump entries", w.value("dump_entries", 0)), w.value("pass", "rewind"));
  }
  if (r.contains("rewind_of") && r["rewind_of"].is_object())
    out += fmt::format("  re-execution asked by a rewind at step {} of the run in {}\n",
                       r["rewind_of"]["requested"].value("step", 0), r["rewind_of"].value("run", ".."));
  const json& an = r["anomalies"];
  if (an.is_array()) out += fmt::format("  anomalies: {}\n", an.size());
  if (an.is_array())
    for (std::size_t i = 0; i < an.size() && i < 8; ++i) {
      const json& a = an[i];
      out += fmt::format("    {} at {} step {} rank {}{}{}\n", a.value("kind", "?"), a.value("op", "?"),
                         a.value("step", 0), a.value("rank", 0),
                         a.contains("element") ? fmt::format(" element {}", a["element"].dump()) : std::string(),
                         a.contains("core_kind") ? fmt::format(" ({} {})", a.value("core_kind", "?"), a.value("core", 0))
                                                 : std::string());
    }
  if (r["diagnosis"].is_array() && !r["diagnosis"].empty()) {
    out += "  diagnosis:\n";
    int k = 1;
    for (const auto& d : r["diagnosis"])
      out += fmt::format("    {}. {} ({}){}\n", k++, d.value("op", "?"), d.value("cause", "?"),
                         d.value("suggestion", "").empty() ? std::string() : " — " + d.value("suggestion", ""));
  }
  if (r["warnings"].is_array() && !r["warnings"].empty()) {
    out += fmt::format("  warnings: {}\n", r["warnings"].size());
    for (const auto& w : r["warnings"]) out += "    " + (w.is_string() ? w.get<std::string>() : w.dump()) + "\n";
  }
  if (r.contains("expectations")) {
    out += "  expectations:\n";
    for (const auto& e : r["expectations"]) {
      out += fmt::format("    [{}] {} (line {}): {}\n", e.value("passed", false) ? "ok" : "FAIL", e.value("kind", "?"),
                         e.value("line", 0), e.value("expected", ""));
      if (!e.value("passed", false)) out += fmt::format("         actual: {}\n", e.value("actual", ""));
    }
  }
  return out;
}

}  // namespace probelab::sim
