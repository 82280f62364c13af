// Drawing of the propagation graph (sim/html/propagation_graph.h): lanes by rank, columns by
// causal depth, cubic edges with arrowheads, a <title> per node with everything known about it.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/html/html_doc.h"
#include "sim/html/propagation_graph.h"

namespace probelab::html {

namespace {

constexpr int kNodeW = 170, kNodeH = 38, kGapX = 46, kGapY = 12, kLanePad = 10, kLabelW = 96;

struct Style {
  const char* fill;
  const char* text;
};

Style style_of(const std::string& role) {
  if (role == "source") return {"#d64545", "#ffffff"};
  if (role == "carrier") return {"#8e44ad", "#ffffff"};
  if (role == "propagation") return {"#f0a030", "#1f2933"};
  if (role == "path") return {"#e4e7eb", "#1f2933"};
  return {"#52606d", "#ffffff"};
}

/// The last n - 1 bytes after an ellipsis (the end of an op path says most), cut at a UTF-8
/// character boundary.
std::string clip(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  std::size_t from = s.size() - (n - 1);
  while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
  return fmt::format("\u2026{}", s.substr(from));
}

std::string where(const GraphNode& n) {
  std::string s;
  if (n.step >= 0) s += fmt::format("step {}", n.step);
  if (n.ranks.size() > 1)
    s += fmt::format("{}{} ranks", s.empty() ? "" : " \u00b7 ", n.ranks.size());
  else if (n.rank >= 0)
    s += fmt::format("{}rank {}", s.empty() ? "" : " \u00b7 ", n.rank);
  return s;
}

/// "0-36, 38-63" from sorted ranks.
std::string ranges(const std::vector<std::int64_t>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ", ",
                       j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return out;
}

std::string lane_label(std::int64_t rank, const std::vector<std::int64_t>& merged, int x, int y) {
  if (merged.size() < 2)
    return fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#616e7c\">{}</text>", x, y,
                       rank >= 0 ? fmt::format("rank {}", rank) : "rank ?");
  const std::string all = ranges(merged);
  return fmt::format("<text x=\"{0}\" y=\"{1}\" font-size=\"12\" fill=\"#616e7c\"><title>ranks {2}</title>"
                     "<tspan x=\"{0}\" dy=\"-7\">{3} ranks</tspan><tspan x=\"{0}\" dy=\"14\">{4}</tspan></text>",
                     x, y, escape(all), merged.size(), escape(all.size() <= 14 ? all : all.substr(0, 13) + "\u2026"));
}

}  // namespace

std::string propagation_svg(const PropagationGraph& g) {
  if (g.nodes.empty()) return note("no exception anomalies: nothing propagated");
  // Lanes: one per rank (unknown rank first), slots per (lane, depth).
  std::map<std::int64_t, std::map<std::size_t, std::vector<std::size_t>>> lanes;
  std::size_t max_depth = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    lanes[g.nodes[i].rank][g.nodes[i].depth].push_back(i);
    max_depth = std::max(max_depth, g.nodes[i].depth);
  }
  std::vector<int> x(g.nodes.size()), y(g.nodes.size());
  std::vector<bool> placed(g.nodes.size(), false);
  std::vector<std::vector<std::size_t>> preds(g.nodes.size());
  for (const auto& e : g.edges) preds[e.to].push_back(e.from);
  // Within a column, nodes in the order of their placed predecessors' heights (fewer crossings).
  auto order_by_preds = [&](std::vector<std::size_t> ids) {
    auto key = [&](std::size_t i) {
      double sum = 0;
      int n = 0;
      for (std::size_t p : preds[i]) {
        if (!placed[p]) continue;
        sum += y[p];
        ++n;
      }
      return n ? sum / n : 1e18;
    };
    std::stable_sort(ids.begin(), ids.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    return ids;
  };
  std::string lane_svg;
  int top = 0, band = 0;
  for (const auto& [rank, by_depth] : lanes) {
    std::size_t rows = 1;
    std::vector<std::int64_t> merged;
    for (const auto& [d, column] : by_depth) {
      const std::vector<std::size_t> ids = order_by_preds(column);
      if (!ids.empty() && !g.nodes[ids.front()].ranks.empty()) merged = g.nodes[ids.front()].ranks;
      rows = std::max(rows, ids.size());
      for (std::size_t k = 0; k < ids.size(); ++k) {
        x[ids[k]] = kLabelW + static_cast<int>(d) * (kNodeW + kGapX) + 10;
        y[ids[k]] = top + kLanePad + static_cast<int>(k) * (kNodeH + kGapY);
        placed[ids[k]] = true;
      }
    }
    const int h = 2 * kLanePad + static_cast<int>(rows) * (kNodeH + kGapY) - kGapY;
    lane_svg += fmt::format("<rect x=\"0\" y=\"{}\" width=\"100%\" height=\"{}\" fill=\"{}\"/>{}\n", top, h,
                            band++ % 2 ? "#ffffff" : "#f5f7fa", lane_label(rank, merged, 8, top + h / 2 + 4));
    top += h;
  }
  const int width = kLabelW + static_cast<int>(max_depth + 1) * (kNodeW + kGapX) + 10;
  std::string out = fmt::format(
      "<div class=\"scroll\"><svg class=\"propagation\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"propagation graph\">\n"
      "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
      "orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#52606d\"/></marker></defs>\n",
      width, top);
  out += lane_svg;
  for (const auto& e : g.edges) {
    const int x1 = x[e.from] + kNodeW, y1 = y[e.from] + kNodeH / 2, x2 = x[e.to], y2 = y[e.to] + kNodeH / 2;
    const int dx = std::max(20, std::abs(x2 - x1) / 2);
    out += fmt::format(
        "<path d=\"M{} {} C{} {}, {} {}, {} {}\" fill=\"none\" stroke=\"#52606d\" stroke-width=\"1.4\" "
        "marker-end=\"url(#arrow)\"/>\n",
        x1, y1, x1 + dx, y1, x2 - dx, y2, x2 - 2, y2);
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    const Style st = style_of(n.role);
    std::string title = fmt::format("{} ({})", n.op, n.role);
    if (!where(n).empty()) title += fmt::format("\n{}", where(n));
    if (n.ranks.size() > 1) title += fmt::format("\nranks {}", ranges(n.ranks));
    if (!n.kinds.empty()) title += fmt::format("\nlatched: {}", fmt::join(n.kinds, ", "));
    if (!n.folded.empty()) title += fmt::format("\nops: {}", fmt::join(n.folded, " -> "));
    std::string line2 = where(n);
    if (!n.kinds.empty()) line2 = fmt::format("{}{}{}", line2, line2.empty() ? "" : " \u00b7 ", fmt::join(n.kinds, ", "));
    if (!n.folded.empty()) line2 = fmt::format("{} \u2192 {}", clip(n.folded.front(), 14), clip(n.folded.back(), 14));
    out += fmt::format(
        "<g class=\"node {}\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\" fill=\"{}\" "
        "stroke=\"#1f2933\" stroke-opacity=\"0.35\"/><text x=\"{}\" y=\"{}\" font-size=\"12\" font-weight=\"600\" "
        "fill=\"{}\">{}</text><text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{}\">{}</text></g>\n",
        escape(n.role), escape(title), x[i], y[i], kNodeW, kNodeH, st.fill, x[i] + 8, y[i] + 15, st.text,
        escape(clip(n.op, 24)), x[i] + 8, y[i] + 30, st.text, escape(clip(line2, 30)));
  }
  out += "</svg></div>\n";
  out += "<div class=\"legend\">";
  for (const char* r : {"source", "carrier", "propagation", "path"})
    out += fmt::format("<span><i style=\"background:{}\"></i>{}</span>", style_of(r).fill,
                       std::string(r) == "path" ? "on the path, latched nothing" : r);
  out += "</div>\n";
  if (g.omitted) out += note(fmt::format("{} more nodes not drawn (see anomalies in report.json)", g.omitted));
  return out;
}

}  // namespace probelab::html
