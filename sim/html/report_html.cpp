#include "sim/html/report_html.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/html/heatmap.h"
#include "sim/html/html_doc.h"
#include "sim/html/report_sections.h"

namespace probelab::html {

using nlohmann::json;

namespace sections {

const json& field(const json& r, const char* key) {
  static const json null;
  return r.is_object() && r.contains(key) ? r[key] : null;
}

namespace {

std::string cycles_line(const json& c) {
  if (!c.is_object()) return "-";
  std::string s = num(field(c, "total"));
  if (field(c, "baseline").is_number()) s += " (without probes " + num(field(c, "baseline")) + ")";
  const json& per_rank = field(c, "per_rank");
  if (per_rank.is_array() && per_rank.size() > 1) {
    std::uint64_t lo = UINT64_MAX, hi = 0;
    for (const auto& v : per_rank)
      if (v.is_number()) {
        lo = std::min(lo, v.get<std::uint64_t>());
        hi = std::max(hi, v.get<std::uint64_t>());
      }
    if (hi) s += fmt::format("; per rank {} to {} over {} ranks", lo, hi, per_rank.size());
  }
  return s;
}

}  // namespace

std::string summary(const json& r) {
  const json& sc = field(r, "scenario");
  const json& chip = field(r, "chip");
  const json& prec = field(r, "precision");
  std::string out;
  if (field(r, "status") == "hang") {
    out += fmt::format("<div class=\"error\"><b>The job hung</b> (report.json <code>hang</code>): {}", text(field(r, "error"), 4000));
    for (const auto& e : field(field(r, "hang"), "explanation")) out += "<br>why: " + text(e, 1000);
    out += "</div>\n";
  } else if (field(r, "status") != "ok")
    out += fmt::format("<div class=\"error\"><b>The simulation failed{}:</b> {}</div>\n",
                       field(r, "bad_input") == true ? " (bad input)" : "", text(field(r, "error"), 4000));
  std::vector<std::pair<std::string, std::string>> kv = {
      {"result", field(r, "passed") == true ? badge("PASSED", "ok") : badge("FAILED", "fail")},
      {"status", text(field(r, "status"))},
      {"scenario", "<b>" + text(field(sc, "name")) + "</b> (" + text(field(sc, "file")) + ")"},
      {"model", text(field(sc, "model")) + " \u00b7 " + text(field(sc, "mode"))},
      {"ranks \u00b7 steps \u00b7 seed",
       fmt::format("{} \u00b7 {} \u00b7 {}", num(field(sc, "ranks")), num(field(sc, "steps")), num(field(r, "seed")))},
      {"chip", text(field(chip, "preset")) +
                   (field(chip, "overrides").is_object() && !field(chip, "overrides").empty()
                        ? " with " + text(field(chip, "overrides"))
                        : std::string())},
      {"precision", text(prec)},
      {"device cycles", cycles_line(field(r, "cycles"))},
      {"tasks", text(field(r, "tasks"))},
  };
  const json& an = field(r, "anomalies");
  if (an.is_array()) {
    std::size_t latched = 0;
    for (const auto& a : an) latched += field(a, "kind") != "condition" ? 1 : 0;
    kv.emplace_back("anomalies", fmt::format("{} latched, {} conditions held", latched, an.size() - latched));
  }
  const json& diag = field(r, "diagnosis");
  if (diag.is_array() && !diag.empty())
    kv.emplace_back("top suspect", "<b>" + text(field(diag[0], "op")) + "</b> (" + text(field(diag[0], "cause")) + ")");
  if (field(sc, "description").is_string() && !field(sc, "description").get<std::string>().empty())
    kv.emplace_back("description", text(field(sc, "description"), 2000));
  return out + kv_grid(kv);
}

std::string expectations(const json& r) {
  const json& ex = field(r, "expectations");
  if (!ex.is_array() || ex.empty()) return note("the scenario states no expectations");
  Table t({"#", "kind", "line", "result", "expected", "actual"});
  for (const auto& e : ex) {
    const bool ok = field(e, "passed") == true;
    t.row({num(field(e, "index")), text(field(e, "kind")), num(field(e, "line")),
           ok ? badge("held", "ok") : badge("FAILED", "fail"), text(field(e, "expected"), 400),
           text(field(e, "actual"), 400)},
          ok ? "" : "fail");
  }
  return t.render();
}

}  // namespace sections

const std::vector<std::string>& report_sections() {
  static const std::vector<std::string> k = {"summary",    "expectations", "anomalies", "diagnosis",
                                             "propagation", "divergence",  "comparison", "capture",
                                             "cycles",      "injections",  "details"};
  return k;
}

std::string report_html(const json& r) {
  namespace s = sections;
  const json& sc = s::field(r, "scenario");
  const json& name = s::field(sc, "name");
  Page page("probelab report: " + (name.is_string() ? name.get<std::string>() : std::string("?")));
  page.section("summary", "Summary", s::summary(r));
  page.section("expectations", "Expectations", s::expectations(r));
  page.section("anomalies", "Anomalies", s::anomalies(r));
  page.section("diagnosis", "Diagnosis", s::diagnosis(r));
  page.section("propagation", "Propagation", s::propagation(r));
  page.section("divergence", "Cross-rank divergence", s::divergence(r));
  page.section("comparison", "Reference comparison", s::comparison(r));
  page.section("capture", "Capture", s::capture(r));
  page.section("cycles", "Cycles per op", s::cycles(r));
  page.section("injections", "Injections", s::injections(r));
  page.section("details", "Details", s::details(r));
  const std::string header = fmt::format(
      "<h1>probelab report \u00b7 {} {}</h1>\n<p>{} \u00b7 schema {}</p>\n", text(s::field(sc, "name")),
      s::field(r, "passed") == true ? badge("PASSED", "ok") : badge("FAILED", "fail"), text(s::field(sc, "file")),
      text(s::field(r, "schema")));
  return page.render(header, {}, heatmap_script());
}

}  // namespace probelab::html
