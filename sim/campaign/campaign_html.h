// summary.html: a campaign's summary.json (sim/campaign/campaign_stats.h) as one self-contained
// page, written beside it. Sections (stable ids):
//   summary   scenario, seed, sampling, trials, fault-free runs and the false-positive rate
//   overall   one bar per outcome (share of trials, 95% Wilson interval) and the scores
//             (coverage, localization top-1/top-3, SDC, ...) with their intervals; latency
//   by-kind   per injector kind: each outcome's share and the scores, each with its interval
//   by-op     the same per op (the 200 ops with most trials; summary.json has all)
// Rendered from summary.json alone: the same summary gives the same bytes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::sim {

std::string campaign_summary_html(const nlohmann::json& summary);

/// The section ids of campaign_summary_html(), in page order.
const std::vector<std::string>& campaign_html_sections();

}  // namespace probelab::sim
