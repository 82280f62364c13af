// Heatmap data: each divergent rank's own difference, the reference rank marked, the worst over
// steps, reference-comparison metrics in executed op order, and the size budget.
#include <gtest/gtest.h>

#include "sim/html/heatmap.h"
#include "tests/sim/html/html_test_util.h"

namespace probelab::html {
namespace {

using nlohmann::json;

const json& view(const json& d, const std::string& label) {
  for (const auto& v : d["views"])
    if (v["label"] == label) return v;
  throw std::runtime_error("no view " + label);
}

TEST(Heatmap, DivergenceCellsArePerRankWithTheReferenceMarked) {
  const json d = divergence_heatmap(test::small_report());
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["rows"], json({"rank 0", "rank 1", "rank 2", "rank 3"}));
  EXPECT_EQ(d["cols"], json({"fc1/grad/allreduce"}));
  const json& worst = view(d, "worst over steps");
  EXPECT_EQ(worst["values"]["max_abs_diff"], json({nullptr, 0.02, 0, 0.005}));
  EXPECT_EQ(worst["flags"], json({2, 1, 0, 1}));
  const json& s0 = view(d, "step 0");
  EXPECT_EQ(s0["values"]["max_abs_diff"], json({nullptr, 0.01, 0, 0.005}));
  const json& s1 = view(d, "step 1");
  EXPECT_EQ(s1["values"]["max_abs_diff"], json({nullptr, 0.02, 0, 0}));
  EXPECT_EQ(s1["flags"], json({2, 1, 0, 0}));
}

TEST(Heatmap, DivergenceWithoutPerRankValuesAndWithHashesOnly) {
  json r = test::small_report();
  for (auto& d : r["consistency"]["divergences"]) d.erase("rank_diffs");
  r["consistency"]["divergences"][1]["max_abs_diff"] = "nan";  // hash basis: bits differ
  const json d = divergence_heatmap(r);
  EXPECT_EQ(view(d, "step 0")["values"]["max_abs_diff"], json({nullptr, 0.01, 0, 0.01}));
  EXPECT_EQ(view(d, "step 1")["values"]["max_abs_diff"][1], "nan");
  EXPECT_EQ(view(d, "worst over steps")["values"]["max_abs_diff"][1], "nan");  // unknown size beats 0.01
}

TEST(Heatmap, NoConsistencyCheckGivesNoDataAndAgreementGivesANote) {
  json r = test::small_report();
  r["consistency"]["checked"] = false;
  EXPECT_TRUE(divergence_heatmap(r).is_null());
  r = test::small_report();
  r["consistency"]["divergences"] = json::array();
  const json d = divergence_heatmap(r);
  EXPECT_TRUE(d["cols"].empty());
  EXPECT_NE(d["note"].get<std::string>().find("every rank agreed"), std::string::npos);
  EXPECT_NE(heatmap_block("x", d).find("every rank agreed"), std::string::npos);
}

TEST(Heatmap, ComparisonMetricsInExecutedOrderWithFailuresFlagged) {
  json r = test::small_report();
  r["comparisons"].push_back({{"op", "extra"}, {"step", 0}, {"rank", 2}, {"passed", true}, {"metrics", {{"cosine", 1.0}}}});
  const json d = comparison_heatmap(r);
  EXPECT_EQ(d["rows"], json({"rank 0", "rank 2"}));
  EXPECT_EQ(d["cols"], json({"fc1", "fc2", "extra"}));  // executed order, then the rest
  std::vector<std::string> metrics;
  for (const auto& m : d["metrics"]) metrics.push_back(m["key"]);
  EXPECT_EQ(metrics, (std::vector<std::string>{"max_rel_err", "max_abs_err", "cosine_distance", "rmse"}));
  const json& worst = view(d, "worst over steps");
  EXPECT_EQ(worst["values"]["max_abs_err"], json({0.002, 0.002, nullptr, nullptr, nullptr, nullptr}));
  EXPECT_EQ(worst["values"]["cosine_distance"][1], 0.1);
  EXPECT_EQ(worst["values"]["cosine_distance"][5], 0);
  EXPECT_EQ(worst["flags"], json({0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(view(d, "step 0")["flags"], json({0, 0, 0, 0, 0, 0}));
  r["comparisons"] = json::array();
  EXPECT_TRUE(comparison_heatmap(r).is_null());
}

TEST(Heatmap, BudgetDropsPerStepViewsThenMetrics) {
  const json r = test::large_report(8, 10, 4);
  const json full = comparison_heatmap(r);
  EXPECT_EQ(full["views"].size(), 5u);
  const json some = comparison_heatmap(r, 8 * 10 * 4 * 3);
  EXPECT_EQ(some["views"].size(), 3u);
  EXPECT_NE(some["note"].get<std::string>().find("2 per-step views left out"), std::string::npos);
  const json one = comparison_heatmap(r, 100);
  EXPECT_EQ(one["metrics"].size(), 1u);
  EXPECT_EQ(one["views"].size(), 1u);
  EXPECT_EQ(one["views"][0]["values"]["max_rel_err"].size(), 80u);
}

}  // namespace
}  // namespace probelab::html
