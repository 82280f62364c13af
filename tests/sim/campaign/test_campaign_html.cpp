// summary.html from summary.json: every section, outcome bars with their Wilson intervals, per
// kind and per op, the same bytes twice, and the per-op table capped for large campaigns.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "sim/campaign/campaign_html.h"
#include "sim/campaign/campaign_outcome.h"
#include "sim/campaign/campaign_stats.h"

namespace probelab::sim {
namespace {

using nlohmann::json;

json group(std::uint64_t top1, std::uint64_t masked, std::uint64_t sdc) {
  const std::uint64_t n = top1 + masked + sdc;
  json outcomes = json::object();
  for (Outcome o : all_outcomes()) outcomes[std::string(outcome_name(o))] = 0;
  outcomes["top1"] = top1;
  outcomes["masked"] = masked;
  outcomes["sdc"] = sdc;
  return {{"trials", n}, {"outcomes", outcomes}, {"coverage", rate_json(top1, top1 + sdc)},
          {"probe_coverage", rate_json(top1, top1 + sdc)}, {"top1", rate_json(top1, top1)}, {"top3", rate_json(top1, top1)},
          {"sdc_rate", rate_json(sdc, n)}, {"masked_rate", rate_json(masked, n)}, {"unrecoverable_rate", rate_json(0, n)},
          {"latency_cycles", {{"n", top1}, {"p50", 5670}, {"p90", 5850}, {"p99", 5850}, {"max", 7119}}}};
}

json summary(std::size_t ops) {
  json s = {{"schema", "probelab.campaign/1"}, {"scenario", "hand_made"}, {"seed", 1}, {"sampling", "per_kind"},
            {"trials_requested", 400}, {"trials_done", 400}, {"complete", true},
            {"golden", {{"runs", 2}, {"deterministic", true}, {"false_positive_rate", rate_json(0, 2)}}}};
  s["overall"] = group(265, 119, 16);
  s["by_kind"] = {{"bitflip", group(65, 119, 16)}, {"nan", group(200, 0, 0)}};
  s["by_op"] = json::object();
  for (std::size_t i = 0; i < ops; ++i) s["by_op"][fmt::format("op{:03}", i)] = group(1 + i % 7, i % 3, i % 2);
  return s;
}

TEST(CampaignHtml, SectionsAndWilsonIntervals) {
  const json s = summary(12);
  const std::string html = campaign_summary_html(s);
  EXPECT_EQ(html, campaign_summary_html(s));
  for (const auto& id : campaign_html_sections())
    EXPECT_NE(html.find("<section id=\"" + id + "\">"), std::string::npos) << id;
  const Interval top1 = wilson_interval(265, 400), sdc = wilson_interval(16, 400);
  EXPECT_NE(html.find(fmt::format("66.2% [{:.1f}%, {:.1f}%]", 100 * top1.lo, 100 * top1.hi)), std::string::npos);
  EXPECT_NE(html.find(fmt::format("4.0% [{:.1f}%, {:.1f}%]", 100 * sdc.lo, 100 * sdc.hi)), std::string::npos);
  EXPECT_NE(html.find("265 of 400, 95% Wilson interval"), std::string::npos);
  // Per kind: bitflip's SDC share of its 200 trials, with its own interval in the hover text.
  const Interval k = wilson_interval(16, 200);
  EXPECT_NE(html.find(fmt::format("8.0% [{:.1f}%, {:.1f}%] (16 of 200", 100 * k.lo, 100 * k.hi)), std::string::npos);
  EXPECT_NE(html.find(">op011<"), std::string::npos);
  EXPECT_EQ(html.find("http"), html.find("http://www.w3.org/2000/svg"));
}

TEST(CampaignHtml, DiagnosisScoresAndCleanRuns) {
  json s = summary(3);
  s["overall"]["source_top1"] = rate_json(197, 200);
  s["overall"]["cause_correct"] = rate_json(183, 200);
  s["overall"]["element_exact"] = rate_json(150, 151);
  s["overall"]["not_fired_rate"] = rate_json(1, 400);
  s["by_kind"]["nan"]["source_top1"] = rate_json(170, 200);
  s["golden"] = {{"runs", 1}, {"deterministic", true}, {"flagged", rate_json(0, 1)}};
  s["clean_runs"] = {{"runs", 400}, {"distinct", 331}, {"failed", 2}, {"false_positive_rate", rate_json(3, 331)}};
  const std::string html = campaign_summary_html(s);
  for (const char* label : {"NaN/Inf source top-1", "cause class correct", "latched element exact", "never fired"})
    EXPECT_NE(html.find(label), std::string::npos) << label;
  const Interval src = wilson_interval(197, 200), fp = wilson_interval(3, 331), kind = wilson_interval(170, 200);
  EXPECT_NE(html.find(fmt::format("98.5% [{:.1f}%, {:.1f}%]", 100 * src.lo, 100 * src.hi)), std::string::npos);
  EXPECT_NE(html.find("400 runs, 331 distinct, 2 failed"), std::string::npos);
  EXPECT_NE(html.find(fmt::format("0.9% [{:.1f}%, {:.1f}%]", 100 * fp.lo, 100 * fp.hi)), std::string::npos);
  EXPECT_NE(html.find(fmt::format("85.0% [{:.1f}%, {:.1f}%] (170 of 200", 100 * kind.lo, 100 * kind.hi)), std::string::npos);
}

TEST(CampaignHtml, ManyOpsAreCapped) {
  const std::string html = campaign_summary_html(summary(260));
  EXPECT_NE(html.find("60 more not shown (summary.json has all 260)"), std::string::npos);
  EXPECT_LT(html.size(), 700u * 1024) << html.size();
}

TEST(CampaignHtml, AnEmptyOrPartialSummaryRenders) {
  EXPECT_NO_THROW(campaign_summary_html(json::object()));
  json s = summary(0);
  s["complete"] = false;
  s["trials_done"] = 0;
  s["overall"] = group(0, 0, 0);
  const std::string html = campaign_summary_html(s);
  EXPECT_NE(html.find("incomplete"), std::string::npos);
  EXPECT_NE(html.find("n = 0"), std::string::npos);
}

}  // namespace
}  // namespace probelab::sim
