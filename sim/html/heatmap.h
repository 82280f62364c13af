// Rank x layer heatmaps of a report: cross-rank divergence (consistency.divergences: each
// divergent rank's difference from the reference rank, per op edge) and reference-comparison
// error (comparisons: one metric per rank and op). The cells travel as compact JSON beside a
// <canvas>; heatmap_script() draws them (log colour scale, hover read-out, metric and step
// selectors), so a page stays small for 64+ ranks: one number per cell and view, 3 significant
// digits. Views: "worst over steps" always, one per step while the page stays under a budget.
//
// Data: {rows: [labels], cols: [labels], row_title, col_title,
//        metrics: [{key, label, range: [lo, hi]}], views: [{label, values: {metric: [cell..]}, flags: [..]}],
//        note}
// cells are row-major (row * cols + col); a cell is a number, "nan" / "inf" (non-finite,
// e.g. bits differ with unknown size) or null (no data); flags: 0 plain, 1 failed / divergent,
// 2 reference rank.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace probelab::html {

/// Cell values (over all views and metrics) beyond which per-step views are left out.
inline constexpr std::size_t kHeatmapCellBudget = 40000;

/// Heatmap data of cross-rank divergence; null when the report has no consistency check.
nlohmann::json divergence_heatmap(const nlohmann::json& report, std::size_t budget = kHeatmapCellBudget);
/// Heatmap data of reference-comparison error; null when the report has no comparisons.
nlohmann::json comparison_heatmap(const nlohmann::json& report, std::size_t budget = kHeatmapCellBudget);

/// A heatmap's container (canvas, selectors, read-out) and its data element; `data` as built above.
std::string heatmap_block(std::string_view id, const nlohmann::json& data);

/// The script that draws every heatmap block of a page.
std::string_view heatmap_script();

}  // namespace probelab::html
