#include "sim/html/heatmap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/html/html_doc.h"

namespace probelab::html {

using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A report number: finite, or "nan" / "inf" / "-inf" as report.json writes them.
std::optional<double> number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "nan") return kNaN;
    if (s == "inf") return kInf;
    if (s == "-inf") return -kInf;
  }
  return std::nullopt;
}

/// Severity order for "worst": inf > nan (differs, size unknown) > larger finite values.
double worse(double a, double b) {
  auto rank = [](double v) { return std::isinf(v) ? 2 : std::isnan(v) ? 1 : 0; };
  if (rank(a) != rank(b)) return rank(a) > rank(b) ? a : b;
  if (std::isnan(a)) return a;
  return std::max(a, b);
}

const json& member(const json& o, const char* key) {
  static const json null;
  return o.is_object() && o.contains(key) ? o[key] : null;
}

json cell(const std::optional<double>& v) {
  if (!v) return nullptr;
  if (std::isnan(*v)) return "nan";
  if (std::isinf(*v)) return "inf";
  if (*v == 0) return 0;
  return std::stod(fmt::format("{:.3g}", std::fabs(*v)));
}

/// A metric: key in the cells, label, and the span of the colour scale (log) it starts from; the
/// scale widens to the data, so small errors look small rather than filling the ramp.
struct Metric {
  std::string key, label;
  double lo = 1e-6, hi = 1.0;
};

/// Cells of one view: metric -> values, plus flags; row-major.
struct View {
  std::string label;
  std::map<std::string, std::vector<std::optional<double>>> values;
  std::vector<int> flags;
};

class Grid {
 public:
  Grid(std::vector<std::string> rows, std::vector<std::string> cols, std::vector<std::string> metrics)
      : rows_(std::move(rows)), cols_(std::move(cols)), metrics_(std::move(metrics)) {}

  View& view(const std::string& key, const std::string& label) {
    auto [it, fresh] = views_.try_emplace(key);
    if (fresh) {
      order_.push_back(key);
      it->second.label = label;
      for (const auto& m : metrics_) it->second.values[m].assign(rows_.size() * cols_.size(), std::nullopt);
      it->second.flags.assign(rows_.size() * cols_.size(), 0);
    }
    return it->second;
  }
  static void put(View& v, const std::string& metric, std::size_t at, double value) {
    auto& slot = v.values[metric][at];
    slot = slot ? worse(*slot, value) : value;
  }
  std::size_t index(std::size_t row, std::size_t col) const { return row * cols_.size() + col; }

  /// The data JSON; `worst` first, then the others in insertion order while within `budget`.
  json to_json(const std::string& row_title, const std::string& col_title,
               const std::vector<Metric>& known, std::size_t budget,
               std::string note) const {
    json j;
    j["rows"] = rows_;
    j["cols"] = cols_;
    j["row_title"] = row_title;
    j["col_title"] = col_title;
    std::vector<std::string> metrics = metrics_;
    const std::size_t cells = rows_.size() * cols_.size();
    if (cells * metrics.size() > budget && metrics.size() > 1) {
      note += fmt::format("{}only {} is drawn ({} cells per metric)", note.empty() ? "" : "; ", metrics.front(), cells);
      metrics.resize(1);
    }
    std::size_t views = order_.size();
    while (views > 1 && views * cells * metrics.size() > budget) --views;
    if (views < order_.size())
      note += fmt::format("{}{} per-step views left out to keep the page small ({} cells each)", note.empty() ? "" : "; ",
                          order_.size() - views, cells * metrics.size());
    json ms = json::array();
    for (const auto& m : metrics) {
      Metric info{m, m};
      for (const auto& k : known)
        if (k.key == m) info = k;
      ms.push_back({{"key", m}, {"label", info.label}, {"range", {info.lo, info.hi}}});
    }
    j["metrics"] = ms;
    json vs = json::array();
    for (std::size_t i = 0; i < views; ++i) {
      const View& v = views_.at(order_[i]);
      json values = json::object();
      for (const auto& m : metrics) {
        json arr = json::array();
        for (const auto& c : v.values.at(m)) arr.push_back(cell(c));
        values[m] = std::move(arr);
      }
      vs.push_back({{"label", v.label}, {"values", std::move(values)}, {"flags", v.flags}});
    }
    j["views"] = vs;
    j["note"] = note;
    return j;
  }

 private:
  std::vector<std::string> rows_, cols_, metrics_;
  std::map<std::string, View> views_;
  std::vector<std::string> order_;
};

template <class T>
std::size_t index_of(std::map<T, std::size_t>& m, std::vector<std::string>& labels, const T& key, std::string label) {
  auto [it, fresh] = m.emplace(key, labels.size());
  if (fresh) labels.push_back(std::move(label));
  return it->second;
}

std::string step_key(std::int64_t step) { return fmt::format("step{:012}", step); }

std::vector<std::int64_t> int_list(const json& v) {
  std::vector<std::int64_t> out;
  if (v.is_array())
    for (const auto& e : v)
      if (e.is_number_integer()) out.push_back(e.get<std::int64_t>());
  return out;
}

}  // namespace

json divergence_heatmap(const json& report, std::size_t budget) {
  const json& c = member(report, "consistency");
  if (!c.is_object() || !c.value("checked", false)) return nullptr;
  std::vector<std::int64_t> ranks = int_list(member(c, "ranks"));
  std::sort(ranks.begin(), ranks.end());
  const std::int64_t ref = c.value("reference_rank", std::int64_t{0});
  static const json kNone = json::array();
  const json& divs = member(c, "divergences").is_array() ? member(c, "divergences") : kNone;
  std::map<std::int64_t, std::size_t> row_of;
  std::vector<std::string> rows, cols;
  for (auto r : ranks) index_of(row_of, rows, r, fmt::format("rank {}", r));
  std::map<std::string, std::size_t> col_of;
  for (const auto& d : divs) {
    const std::string edge = d.value("edge", std::string("out0"));
    const std::string op = d.value("op", std::string("?"));
    const std::string key = edge == "out0" ? op : op + " " + edge;
    index_of(col_of, cols, key, key);
    for (auto r : int_list(member(d, "ranks"))) index_of(row_of, rows, r, fmt::format("rank {}", r));
  }
  Grid g(rows, cols, {"max_abs_diff"});
  View& worst = g.view("", "worst over steps");
  auto mark_reference = [&](View& v) {
    if (auto it = row_of.find(ref); it != row_of.end())
      for (std::size_t col = 0; col < cols.size(); ++col) v.flags[g.index(it->second, col)] = 2;
  };
  mark_reference(worst);
  for (const auto& d : divs) {
    const std::string edge = d.value("edge", std::string("out0"));
    const std::string op = d.value("op", std::string("?"));
    const std::size_t col = col_of.at(edge == "out0" ? op : op + " " + edge);
    const std::int64_t step = d.value("step", std::int64_t{0});
    View& sv = g.view(step_key(step), fmt::format("step {}", step));
    mark_reference(sv);
    const auto divergent = int_list(member(d, "ranks"));
    const json& per_rank = member(d, "rank_diffs");
    const double all = number(member(d, "max_abs_diff")).value_or(kNaN);
    for (const auto& [r, row] : row_of) {
      const auto it = std::find(divergent.begin(), divergent.end(), r);
      if (r == ref && it == divergent.end()) continue;  // the reference cell, unless it is the odd one out
      const std::size_t at = g.index(row, col);
      double v = 0;
      if (it != divergent.end()) {
        const auto i = static_cast<std::size_t>(it - divergent.begin());
        v = per_rank.is_array() && i < per_rank.size() ? number(per_rank[i]).value_or(all) : all;
        worst.flags[at] = sv.flags[at] = 1;
      }
      Grid::put(worst, "max_abs_diff", at, v);
      Grid::put(sv, "max_abs_diff", at, v);
    }
  }
  std::string note;
  if (cols.empty())
    note = fmt::format("every rank agreed with reference rank {} ({} comparisons)", ref,
                       c.value("comparisons", std::uint64_t{0}));
  json j = g.to_json("rank", "op", {{"max_abs_diff", "max |x - x_ref|", 1e-6, 1.0}}, budget, note);
  j["flag_label"] = "divergent";
  return j;
}

json comparison_heatmap(const json& report, std::size_t budget) {
  const json& cmp = member(report, "comparisons");
  if (!cmp.is_array() || cmp.empty()) return nullptr;
  static const std::vector<Metric> kMetrics = {
      {"max_rel_err", "max relative error", 1e-5, 1.0},   {"max_abs_err", "max absolute error", 1e-5, 1.0},
      {"cosine_distance", "1 - cosine", 1e-8, 1.0},       {"rmse", "RMSE", 1e-5, 1.0},
      {"mean_rel_err", "mean relative error", 1e-5, 1.0}, {"max_ulp", "max ULP distance", 1.0, 1e4}};
  std::vector<std::int64_t> ranks;
  for (const auto& c : cmp) ranks.push_back(c.value("rank", std::int64_t{0}));
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::map<std::int64_t, std::size_t> row_of;
  std::vector<std::string> rows, cols;
  for (auto r : ranks) index_of(row_of, rows, r, fmt::format("rank {}", r));
  // Columns in executed order (report.ops), then ops only the comparisons name.
  std::map<std::string, bool> compared;
  for (const auto& c : cmp) compared[c.value("op", std::string("?"))] = true;
  std::map<std::string, std::size_t> col_of;
  if (report.contains("ops") && report["ops"].is_array())
    for (const auto& o : report["ops"]) {
      const std::string op = o.value("op", std::string());
      if (compared.count(op)) index_of(col_of, cols, op, op);
    }
  for (const auto& c : cmp) {
    const std::string op = c.value("op", std::string("?"));
    index_of(col_of, cols, op, op);
  }
  std::vector<std::string> metrics;
  for (const auto& [k, l, lo, hi] : kMetrics) {
    bool any = false;
    for (const auto& c : cmp) {
      const json& m = member(c, "metrics");
      any = any || (m.is_object() && (m.contains(k) || (k == "cosine_distance" && m.contains("cosine"))));
    }
    if (any) metrics.push_back(k);
  }
  if (metrics.empty()) metrics.push_back("max_rel_err");
  Grid g(rows, cols, metrics);
  View& worst = g.view("", "worst over steps");
  for (const auto& c : cmp) {
    const std::size_t at = g.index(row_of.at(c.value("rank", std::int64_t{0})), col_of.at(c.value("op", std::string("?"))));
    const std::int64_t step = c.value("step", std::int64_t{0});
    View& sv = g.view(step_key(step), fmt::format("step {}", step));
    const json& m = member(c, "metrics");
    for (const auto& k : metrics) {
      std::optional<double> v;
      if (k == "cosine_distance") {
        if (auto cos = number(member(m, "cosine"))) v = std::isnan(*cos) ? *cos : std::max(0.0, 1.0 - *cos);
      } else {
        v = number(member(m, k.c_str()));
      }
      if (!v) continue;
      Grid::put(worst, k, at, *v);
      Grid::put(sv, k, at, *v);
    }
    if (!c.value("passed", true)) worst.flags[at] = sv.flags[at] = 1;
  }
  json j = g.to_json("rank", "op", kMetrics, budget, {});
  j["flag_label"] = "failed comparison";
  return j;
}

std::string heatmap_block(std::string_view id, const json& data) {
  if (data.is_null()) return {};
  if (!data.contains("cols") || data["cols"].empty())
    return note(escape(data.value("note", std::string("nothing to draw"))));
  std::string out = fmt::format(
      "<div class=\"heatmap\" data-heatmap=\"{0}-data\">\n"
      "<div class=\"hm-controls\"><label>metric <select class=\"hm-metric\"></select></label> "
      "<label>view <select class=\"hm-view\"></select></label> "
      "<span class=\"hm-readout\">hover a cell for its value</span></div>\n"
      "<div class=\"scroll\"><canvas class=\"hm-canvas\" width=\"10\" height=\"10\"></canvas></div>\n"
      "<div class=\"hm-legend\"></div>\n</div>\n",
      escape(id));
  if (!data.value("note", std::string()).empty()) out += note(escape(data["note"].get<std::string>()));
  out += fmt::format("<script type=\"application/json\" id=\"{}-data\">{}</script>\n", escape(id), script_json(data));
  return out;
}

}  // namespace probelab::html
