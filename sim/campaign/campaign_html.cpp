#include "sim/campaign/campaign_html.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/campaign/campaign_outcome.h"
#include "sim/campaign/campaign_stats.h"
#include "sim/html/html_doc.h"

namespace probelab::sim {

using nlohmann::json;
namespace h = probelab::html;

namespace {

constexpr std::size_t kMaxOps = 200;

const char* outcome_color(std::string_view o) {
  if (o == "top1") return "#1e7b34";
  if (o == "top3") return "#5fb570";
  if (o == "mislocalized") return "#f0a030";
  if (o == "detected") return "#3b82c4";
  if (o == "masked") return "#9aa5b1";
  if (o == "sdc") return "#b42318";
  if (o == "crash") return "#6b21a8";
  if (o == "hang") return "#a855f7";
  return "#d5dbe1";
}

struct Rate {
  std::uint64_t k = 0, n = 0;
  bool valid = false;
  double rate = 0, lo = 0, hi = 0;
};

Rate share(std::uint64_t k, std::uint64_t n) {
  Rate r{k, n, n > 0};
  if (n > 0) {
    const Interval ci = wilson_interval(k, n);
    r.rate = static_cast<double>(k) / static_cast<double>(n);
    r.lo = ci.lo;
    r.hi = ci.hi;
  }
  return r;
}

/// A rate of summary.json: {k, n, rate, ci95}.
Rate from_json(const json& j) {
  Rate r;
  if (!j.is_object()) return r;
  r.k = j.value("k", std::uint64_t{0});
  r.n = j.value("n", std::uint64_t{0});
  if (j.contains("rate") && j["rate"].is_number() && j.contains("ci95") && j["ci95"].is_array() && j["ci95"].size() == 2) {
    r.valid = true;
    r.rate = j["rate"].get<double>();
    r.lo = j["ci95"][0].get<double>();
    r.hi = j["ci95"][1].get<double>();
  }
  return r;
}

std::string pct(double v) { return fmt::format("{:.1f}%", 100 * v); }

std::string brief(const Rate& r) {
  if (!r.valid) return fmt::format("n = {}", r.n);
  return fmt::format("{} [{}, {}]  {}/{}", pct(r.rate), pct(r.lo), pct(r.hi), r.k, r.n);
}

std::string describe(const Rate& r) {
  if (!r.valid) return fmt::format("n = {}: no rate", r.n);
  return fmt::format("{} [{}, {}] ({} of {}, 95% Wilson interval)", pct(r.rate), pct(r.lo), pct(r.hi), r.k, r.n);
}

/// A compact bar with its interval as a whisker (HTML, for table cells).
std::string mini(const Rate& r, const char* color) {
  if (!r.valid) return "<span class=\"note\">-</span>";
  return fmt::format(
      "<span class=\"ci\" title=\"{}\"><span class=\"ci-b\" style=\"width:{:.1f}%;background:{}\"></span>"
      "<span class=\"ci-w\" style=\"left:{:.1f}%;width:{:.1f}%\"></span></span> <span class=\"mono\">{}</span>",
      h::escape(describe(r)), 100 * r.rate, color, 100 * r.lo, std::max(0.2, 100 * (r.hi - r.lo)), pct(r.rate));
}

/// Horizontal bars with interval whiskers, one row per (label, rate), as SVG.
std::string bars_svg(const std::vector<std::tuple<std::string, Rate, const char*>>& rows) {
  const int label_w = 170, plot_w = 420, row_h = 22, text_w = 240;
  const int height = static_cast<int>(rows.size()) * row_h + 26;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\">\n",
      label_w + plot_w + text_w, height);
  for (int t = 0; t <= 4; ++t) {
    const int x = label_w + plot_w * t / 4;
    out += fmt::format("<line x1=\"{0}\" y1=\"4\" x2=\"{0}\" y2=\"{1}\" stroke=\"#d9e2ec\"/><text x=\"{0}\" y=\"{2}\" "
                       "font-size=\"10\" fill=\"#616e7c\" text-anchor=\"middle\">{3}%</text>\n",
                       x, height - 18, height - 6, 25 * t);
  }
  int y = 6;
  for (const auto& [label, r, color] : rows) {
    out += fmt::format("<g><title>{}: {}</title><text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\" "
                       "fill=\"#1f2933\">{}</text>",
                       h::escape(label), h::escape(describe(r)), label_w - 8, y + 13, h::escape(label));
    if (r.valid) {
      const double x0 = label_w, w = plot_w * r.rate, lo = label_w + plot_w * r.lo, hi = label_w + plot_w * r.hi;
      out += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"12\" fill=\"{}\"/>"
          "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#1f2933\" stroke-width=\"1.5\"/>"
          "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#1f2933\"/>"
          "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#1f2933\"/>",
          x0, y + 3, std::max(0.5, w), color, lo, y + 9, hi, y + 9, lo, y + 4, lo, y + 14, hi, y + 4, hi, y + 14);
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#1f2933\">{}</text></g>\n",
                       label_w + plot_w + 10, y + 13, h::escape(brief(r)));
    y += row_h;
  }
  return out + "</svg>\n";
}

const std::vector<std::pair<const char*, const char*>>& scores() {
  static const std::vector<std::pair<const char*, const char*>> k = {
      {"coverage", "coverage"},
      {"probe_coverage", "probe coverage"},
      {"top1", "localization top-1"},
      {"top3", "localization top-3"},
      {"source_top1", "NaN/Inf source top-1"},
      {"cause_correct", "cause class correct"},
      {"element_exact", "latched element exact"},
      {"sdc_rate", "SDC rate"},
      {"tolerated_rate", "tolerated (within SDC tolerance)"},
      {"masked_rate", "masked rate"},
      {"unrecoverable_rate", "crash/hang rate"},
      {"not_fired_rate", "never fired"}};
  return k;
}

std::uint64_t trials_of(const json& m) { return m.value("trials", std::uint64_t{0}); }

std::string overall(const json& s) {
  const json& m = s.contains("overall") ? s["overall"] : json::object();
  const std::uint64_t n = trials_of(m);
  std::vector<std::tuple<std::string, Rate, const char*>> outcomes, rates;
  for (Outcome o : all_outcomes()) {
    const std::string name(outcome_name(o));
    const std::uint64_t k = m.contains("outcomes") ? m["outcomes"].value(name, std::uint64_t{0}) : 0;
    outcomes.emplace_back(name, share(k, n), outcome_color(name));
  }
  for (const auto& [key, label] : scores()) rates.emplace_back(label, from_json(m.value(key, json())), "#3b82c4");
  std::string out = "<h3>Outcomes (share of all trials)</h3>\n" + bars_svg(outcomes);
  out += "<h3>Scores</h3>\n" + bars_svg(rates);
  const json& l = m.value("latency_cycles", json());
  if (l.is_object() && l.value("n", 0) > 0)
    out += h::note(fmt::format("detection latency: p50 {} p90 {} p99 {} max {} device cycles (n = {})", h::num(l["p50"]),
                               h::num(l["p90"]), h::num(l["p99"]), h::num(l["max"]), h::num(l["n"])));
  return out;
}

std::string groups(const json& s, const char* key, const char* what, std::size_t max_rows) {
  const json& g = s.contains(key) && s[key].is_object() ? s[key] : json::object();
  if (g.empty()) return h::note("no trials");
  // Outcome columns that occur anywhere, in outcome order.
  std::vector<std::string> cols;
  for (Outcome o : all_outcomes()) {
    const std::string name(outcome_name(o));
    for (const auto& [k, m] : g.items())
      if (m.contains("outcomes") && m["outcomes"].value(name, std::uint64_t{0}) > 0) {
        cols.push_back(name);
        break;
      }
  }
  std::vector<std::pair<std::string, const json*>> rows;
  for (const auto& [k, m] : g.items()) rows.emplace_back(k, &m);
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return trials_of(*a.second) > trials_of(*b.second); });
  std::vector<std::string> head = {what, "trials"};
  for (const auto& c : cols) head.push_back(c);
  for (const char* sc : {"coverage", "top-1", "top-3", "source top-1", "cause", "SDC rate"}) head.emplace_back(sc);
  h::Table t(head, "groups");
  for (std::size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    const json& m = *rows[i].second;
    const std::uint64_t n = trials_of(m);
    std::vector<std::string> cells = {"<span class=\"mono\">" + h::escape(rows[i].first) + "</span>", std::to_string(n)};
    for (const auto& c : cols) cells.push_back(mini(share(m["outcomes"].value(c, std::uint64_t{0}), n), outcome_color(c)));
    for (const char* sc : {"coverage", "top1", "top3", "source_top1", "cause_correct", "sdc_rate"})
      cells.push_back(mini(from_json(m.value(sc, json())), std::string(sc) == "sdc_rate" ? "#b42318" : "#3b82c4"));
    t.row(std::move(cells));
  }
  std::string out = h::note("each cell: the share (bar) and its 95% Wilson interval (whisker); hover for k of n") + t.render();
  if (rows.size() > max_rows)
    out += h::note(fmt::format("{} more not shown (summary.json has all {})", rows.size() - max_rows, rows.size()));
  return out;
}

std::string summary_section(const json& s) {
  const json& golden = s.value("golden", json::object());
  const json& clean = s.value("clean_runs", json());
  return h::kv_grid({
      {"scenario", "<b>" + h::text(s.value("scenario", json())) + "</b>"},
      {"seed \u00b7 sampling", h::num(s.value("seed", json())) + " \u00b7 " + h::text(s.value("sampling", json()))},
      {"trials", fmt::format("{} of {} {}", h::num(s.value("trials_done", json())), h::num(s.value("trials_requested", json())),
                             s.value("complete", false) ? h::badge("complete", "ok") : h::badge("incomplete", "warn"))},
      {"fault-free runs", fmt::format("{} ({})", h::num(golden.value("runs", json())),
                                      golden.value("deterministic", false) ? "bit-identical" : "nondeterministic: envelope")},
      {"golden runs flagged", h::escape(describe(from_json(golden.value("flagged", json()))))},
      {"clean runs", clean.is_object() ? fmt::format("{} runs, {} distinct{}", h::num(clean.value("runs", json())),
                                                     h::num(clean.value("distinct", json())),
                                                     clean.value("failed", 0) > 0
                                                         ? fmt::format(", {} failed", h::num(clean["failed"]))
                                                         : std::string())
                                       : std::string("none")},
      {"false positives (distinct clean runs)",
       h::escape(describe(from_json(clean.is_object() ? clean.value("false_positive_rate", json()) : json())))},
  });
}


}  // namespace

const std::vector<std::string>& campaign_html_sections() {
  static const std::vector<std::string> k = {"summary", "overall", "by-kind", "by-op"};
  return k;
}

std::string campaign_summary_html(const json& s) {
  const std::string name = s.contains("scenario") && s["scenario"].is_string() ? s["scenario"].get<std::string>() : "?";
  h::Page page("probelab campaign: " + name);
  page.section("summary", "Summary", summary_section(s));
  page.section("overall", "Outcomes and scores", overall(s));
  page.section("by-kind", "Per injector kind", groups(s, "by_kind", "kind", kMaxOps));
  page.section("by-op", "Per op", groups(s, "by_op", "op", kMaxOps));
  const std::string header =
      fmt::format("<h1>probelab campaign \u00b7 {} {}</h1>\n<p>schema {}</p>\n", h::escape(name),
                  s.value("complete", false) ? h::badge("complete", "ok") : h::badge("incomplete", "warn"),
                  h::text(s.value("schema", json())));
  return page.render(header);
}

}  // namespace probelab::sim
