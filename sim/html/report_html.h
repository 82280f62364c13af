// report.html: the human view of report.json (sim/run/report.h), one self-contained page (inline
// CSS, SVG and script; nothing fetched) rendered from the report JSON alone, so it is as
// deterministic as the report. Sections, each with a stable id:
//   summary       scenario, chip, precision, cycles, status (an error box when the run failed)
//   expectations  each expectation with pass/fail, expected and actual
//   anomalies     exception latches (role, kind, op, element, step, rank, cycle, latency, path)
//                 and the probe conditions that held
//   diagnosis     ranked candidates with their evidence and suggestion
//   propagation   the propagation graph: source -> propagation -> carriers, across steps and ranks
//   divergence    rank x op heatmap of cross-rank divergence from the reference rank
//   comparison    rank x op heatmap of reference-comparison error, failing comparisons
//   capture       capture statistics (records, drained, dropped, stall cycles, overhead), variants
//   cycles        per-op cycle breakdown (kernel vs probe cycles), by op type, per step and rank
//   injections    injected faults with their proof
//   details       float status, breakpoints, rules fired, losses, warnings
// Fields the renderer does not know are still shown (tables list every key a row has).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::html {

/// The page for one report.
std::string report_html(const nlohmann::json& report);

/// The section ids of report_html(), in page order.
const std::vector<std::string>& report_sections();

}  // namespace probelab::html
