// What the probes found: anomalies, diagnosis, propagation graph, cross-rank divergence and the
// reference comparison (sections of report.html, sim/html/report_html.h).
#include <algorithm>

#include <fmt/format.h>

#include "sim/html/heatmap.h"
#include "sim/html/html_doc.h"
#include "sim/html/propagation_graph.h"
#include "sim/html/report_sections.h"

namespace probelab::html::sections {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxRows = 300;

std::string anomaly_cell(const std::string& key, const json& v) {
  if (key == "role" && v.is_string()) return badge(v.get<std::string>(), v.get<std::string>());
  if ((key == "propagation_path" || key == "call_stack") && v.is_array()) {
    const char* sep = key == "call_stack" ? " / " : " \u2192 ";
    std::vector<std::string> items;
    for (const auto& e : v) {
      if (e.is_object() && e.contains("op"))  // {op, step, rank}: op@step (rank r)
        items.push_back(fmt::format("{}{}{}", e["op"].is_string() ? e["op"].get<std::string>() : e["op"].dump(),
                                    e.contains("step") ? fmt::format("@{}", e["step"].dump()) : std::string(),
                                    e.contains("rank") ? fmt::format(" (rank {})", e["rank"].dump()) : std::string()));
      else
        items.push_back(e.is_string() ? e.get<std::string>() : e.dump());
    }
    const std::string all = fmt::format("{}", fmt::join(items, sep));
    if (items.size() <= 3) return escape(all);
    // Long paths: the ends and how many between; the whole path on hover.
    return fmt::format("<span title=\"{}\">{}{}{} \u2026{} more\u2026{}{}</span>", escape(all), escape(items.front()), sep,
                       escape(items[1]), items.size() - 3, sep, escape(items.back()));
  }
  if (v.is_number()) return "<span class=\"mono\">" + num(v) + "</span>";
  return text(v);
}

std::string anomaly_row(const json& a) { return a.is_object() ? a.value("role", std::string()) : std::string(); }

std::string plain_cell(const std::string&, const json& v) { return text(v, 200); }

}  // namespace

std::string anomalies(const json& r) {
  const json& all = field(r, "anomalies");
  if (!all.is_array()) return note("no anomaly data (the run did not finish)");
  json latched = json::array(), conditions = json::array();
  for (const auto& a : all) (field(a, "kind") == "condition" ? conditions : latched).push_back(a);
  std::string out = fmt::format("<h3>Exception latches ({})</h3>\n", latched.size());
  out += latched.empty() ? note("no overflow, underflow, invalid or NaN-input exception was latched")
                         : json_table(latched,
                                      {"role", "kind", "op", "op_type", "tensor", "element", "coordinate", "step", "rank",
                                       "cycle", "latency_cycles", "source_op", "propagation_path", "float_status",
                                       "call_stack", "fused_from"},
                                      kMaxRows, anomaly_cell, anomaly_row);
  out += fmt::format("<h3>Conditions that held ({})</h3>\n", conditions.size());
  out += conditions.empty() ? note("no watch-point condition held")
                            : json_table(conditions,
                                         {"op", "tensor", "step", "rank", "condition", "watch_point", "actions", "origin"},
                                         kMaxRows, plain_cell, nullptr, {"kind"});
  return out;
}

std::string diagnosis(const json& r) {
  const json& d = field(r, "diagnosis");
  if (!d.is_array() || d.empty()) return note("no root-cause candidate: nothing was flagged");
  static const std::vector<std::string> kShown = {"op", "cause", "score", "evidence", "suggestion"};
  std::string out;
  std::size_t k = 0;
  for (const auto& c : d) {
    ++k;
    const double score = field(c, "score").is_number() ? std::clamp(field(c, "score").get<double>(), 0.0, 1.0) : 0.0;
    out += fmt::format(
        "<div class=\"cand\"><h3>{}. {} <span class=\"badge {}\">{}</span> <span class=\"score\" title=\"score {}\">"
        "<span style=\"width:{}%\"></span></span> <span class=\"note\">score {}</span></h3>\n",
        k, text(field(c, "op")), k == 1 ? "source" : "", text(field(c, "cause")), num(field(c, "score")),
        static_cast<int>(score * 100 + 0.5), num(field(c, "score")));
    std::vector<std::pair<std::string, std::string>> kv;
    if (c.is_object())
      for (const auto& [key, v] : c.items())
        if (std::find(kShown.begin(), kShown.end(), key) == kShown.end() && !v.is_null() && v != "")
          kv.emplace_back(key, text(v, 300));
    if (!kv.empty()) out += kv_grid(kv);
    const json& ev = field(c, "evidence");
    if (ev.is_array() && !ev.empty()) {
      out += "<b>evidence</b><ul>";
      std::size_t i = 0;
      for (const auto& e : ev) {
        if (i++ == 20) break;
        out += "<li>" + text(e, 600) + "</li>";
      }
      out += "</ul>";
      if (ev.size() > 20) out += note(fmt::format("{} more items of evidence in report.json", ev.size() - 20));
    }
    if (field(c, "suggestion").is_string() && !field(c, "suggestion").get<std::string>().empty())
      out += "<p><b>suggestion:</b> " + text(field(c, "suggestion"), 1000) + "</p>";
    out += "</div>\n";
  }
  return out;
}

std::string propagation(const json& r) { return propagation_svg(build_propagation_graph(field(r, "anomalies"))); }

std::string divergence(const json& r) {
  const json& c = field(r, "consistency");
  if (!c.is_object() || field(c, "checked") != true)
    return note(fmt::format("no cross-rank consistency check in this run ({} rank(s); enable "
                            "<code>probes.consistency</code> with ranks &gt; 1)",
                            num(field(field(r, "scenario"), "ranks"))));
  std::vector<std::pair<std::string, std::string>> kv = {
      {"consistent", field(c, "consistent") == true ? badge("yes", "ok") : badge("no", "fail")},
      {"reference rank", num(field(c, "reference_rank"))},
      {"ranks", num(json(field(c, "ranks").is_array() ? field(c, "ranks").size() : 0))},
      {"comparisons", num(field(c, "comparisons"))},
      {"divergent edges", num(json(field(c, "divergences").is_array() ? field(c, "divergences").size() : 0))},
  };
  if (const json& f = field(c, "first_divergence"); f.is_object())
    kv.emplace_back("first divergence",
                    fmt::format("<b>{}</b> {} at step {} (tensor {}): {} rank(s) differ, max |diff| {} ({})",
                                text(field(f, "op")), text(field(f, "edge")), num(field(f, "step")),
                                text(field(f, "tensor")), field(f, "ranks").is_array() ? field(f, "ranks").size() : 0,
                                num(field(f, "max_abs_diff")), text(field(f, "basis"))));
  if (field(c, "per_step").is_array() && !field(c, "per_step").empty()) {
    std::string steps;
    for (const auto& p : field(c, "per_step"))
      steps += fmt::format("{}step {}: {}", steps.empty() ? "" : ", ", num(field(p, "step")), num(field(p, "max_abs_diff")));
    kv.emplace_back("first divergent edge over steps", steps + (field(c, "growing") == true ? " (growing)" : ""));
  }
  if (field(c, "missing").is_array() && !field(c, "missing").empty())
    kv.emplace_back("missing samples", text(field(c, "missing"), 300));
  return kv_grid(kv) + heatmap_block("divergence-map", divergence_heatmap(r));
}

std::string comparison(const json& r) {
  const json& cmp = field(r, "comparisons");
  std::string out;
  const json& skipped = field(r, "comparisons_skipped");
  std::string skipped_text;
  if (skipped.is_array())
    for (const auto& s : skipped)
      skipped_text += fmt::format("{}{} ({})", skipped_text.empty() ? "" : ", ", text(field(s, "reason")), num(field(s, "count")));
  if (!cmp.is_array() || cmp.empty())
    return note("no reference comparison in this run (enable <code>probes.compare</code>)") +
           (skipped_text.empty() ? std::string() : note("skipped: " + skipped_text));
  json failed = json::array();
  for (const auto& c : cmp)
    if (field(c, "passed") == false) failed.push_back(c);
  out += kv_grid({{"comparisons", fmt::format("{} ({} failed)", cmp.size(), failed.size())},
                  {"first failing op", text(field(r, "first_failing_op"))},
                  {"skipped", skipped_text.empty() ? "none" : skipped_text}});
  out += heatmap_block("comparison-map", comparison_heatmap(r));
  out += fmt::format("<h3>Failing comparisons ({})</h3>\n", failed.size());
  if (failed.empty()) return out + note("every compared op met the pass criteria");
  json rows = json::array();
  for (const auto& c : failed) {
    json row = c;
    if (c.contains("metrics") && c["metrics"].is_object())
      for (const auto& [k, v] : c["metrics"].items()) row[k] = v;
    row.erase("metrics");
    rows.push_back(std::move(row));
  }
  return out + json_table(rows,
                          {"op", "op_type", "step", "rank", "tensor", "cosine", "max_abs_err", "max_rel_err", "rmse",
                           "max_ulp", "reasons", "inner_culprit", "inner"},
                          kMaxRows, plain_cell, nullptr, {"passed"});
}

}  // namespace probelab::html::sections
