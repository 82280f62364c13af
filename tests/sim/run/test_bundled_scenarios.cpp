// The bundled scenario suite (scenarios/*.yaml) through the probelab executable, one test per
// scenario: every expectation holds (exit code 0), and the integration facts each scenario exists
// for are checked on its report.json directly, independently of the scenario's own expectations.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/scenario_suite.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

json run_scenario(const std::string& file, const TempDir& dir) {
  return test::run_scenario_report(test::source_root() / "scenarios" / (file + ".yaml"), dir);
}

const json* find_anomaly(const json& r, const std::string& kind, const std::string& op) {
  for (const auto& a : r["anomalies"])
    if (a["kind"] == kind && a["op"] == op) return &a;
  return nullptr;
}

class Bundled : public ::testing::TestWithParam<std::string> {};

TEST_P(Bundled, PassesAndShowsWhatItIsFor) {
  TempDir dir;
  const std::string name = GetParam();
  const json r = run_scenario(name, dir);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["status"], "ok");
  EXPECT_TRUE(r["passed"].get<bool>());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  EXPECT_EQ(r["capture"].value("unaccounted", -1), 0) << "every capture record is drained or counted dropped";
  // Probes only add work: the steps are never faster with them (step 0 starts after the uploads
  // in both runs, so the baseline's steps do not carry the weight upload).
  if (r["capture"]["overhead_percent"].is_number()) {
    EXPECT_GE(r["capture"]["overhead_percent"].get<double>(), 0.0) << r["capture"].dump();
  }

  if (name.starts_with("03_")) {  // NaN reported at its op, element and step; downstream = propagation
    const json* src = find_anomaly(r, "invalid", "attn/softmax");
    ASSERT_NE(src, nullptr) << r["anomalies"].dump();
    EXPECT_EQ((*src)["element"], 17);
    EXPECT_EQ((*src)["step"], 2);
    EXPECT_EQ((*src)["role"], "source");
    for (const auto& a : r["anomalies"]) {
      if (a["kind"] == "nan_input") {
        EXPECT_EQ(a["role"], "propagation") << a.dump();
      }
    }
    EXPECT_EQ(r["diagnosis"][0]["op"], "attn/softmax");
    ASSERT_EQ(r["injections"].size(), 1u);
    EXPECT_TRUE(r["injections"][0]["fired"].get<bool>());
  } else if (name.starts_with("04_")) {  // the accumulating op gets the overflow
    const json* ov = find_anomaly(r, "overflow", "down_proj");
    ASSERT_NE(ov, nullptr);
    // The sticky status at the ISR: the overflow, and the Inf the next op read (inf_input), which
    // the ISR no longer clears behind the status's other readers.
    EXPECT_EQ((*ov)["float_status"][0], "overflow") << ov->dump();
    ASSERT_FALSE(r["float_status"].empty());  // the sticky register read at the end of step 0
    EXPECT_EQ(r["float_status"][0]["step"], 0);
    EXPECT_EQ(r["float_status"][0]["flags"], json::array({"overflow", "inf_input"}));
    EXPECT_EQ(r["diagnosis"][0]["cause"], "fp16_accumulation_overflow");
    EXPECT_FALSE(r["rules_fired"].empty());
  } else if (name.starts_with("02_")) {  // divergence localized to a collective and a step
    const json& c = r["consistency"];
    EXPECT_FALSE(c["consistent"].get<bool>());
    EXPECT_TRUE(c["first_divergence"]["op"].get<std::string>().ends_with("/allreduce"));
    EXPECT_EQ(c["first_divergence"]["step"], 0);
    EXPECT_GT(c["first_divergence"]["max_abs_diff"].get<double>(), 1e-3);
  } else if (name.starts_with("02b_")) {
    EXPECT_TRUE(r["consistency"]["consistent"].get<bool>());
  } else if (name.starts_with("05_")) {
    bool blamed = false;
    for (const auto& c : r["comparisons"])
      if (c["op"] == "fc1/norm+relu" && !c["passed"].get<bool>()) {
        EXPECT_EQ(c["inner_culprit"], "fc1/norm");
        for (const auto& i : c["inner"])
          EXPECT_TRUE(i["basis"] == "partial_dump" || i["basis"] == "device_output") << i.dump();
        blamed = true;
      }
    EXPECT_TRUE(blamed);
  } else if (name.starts_with("06_")) {  // ping-pong beats a single buffer; nothing dropped
    double pp = -1, single = -1;
    for (const auto& v : r["variants"]) {
      EXPECT_EQ(v["capture"]["dropped"], 0);
      if (v["name"] == "full_0.1_ping_pong") pp = v["capture"]["overhead_percent"].get<double>();
      if (v["name"] == "full_0.1_single") single = v["capture"]["overhead_percent"].get<double>();
    }
    EXPECT_GE(pp, 0.0);
    EXPECT_GT(single, pp);
  } else if (name.starts_with("11_")) {  // 64 ranks, 8 servers: the inter-server stage, server 3's ranks
    const json& f = r["consistency"]["first_divergence"];
    EXPECT_TRUE(f["op"].get<std::string>().ends_with("/inter")) << f.dump();
    EXPECT_EQ(f["step"], 0);
    ASSERT_FALSE(f["ranks"].empty()) << f.dump();
    for (const auto& rank : f["ranks"]) EXPECT_EQ(rank.get<int>() / 8, 3) << f.dump();
  } else if (name.starts_with("14_")) {  // one bucket's inter-server stage, rank 29 alone, step 2
    const json& f = r["consistency"]["first_divergence"];
    EXPECT_EQ(f["op"], "gradient_bucket1/allreduce/inter") << f.dump();
    EXPECT_EQ(f["step"], 2);
    EXPECT_EQ(f["ranks"], json::array({29})) << f.dump();
    EXPECT_EQ(r["diagnosis"][0]["cause"], "collective_order");
  } else if (name.starts_with("12_")) {  // the LSTM on the chip is the source, everything after it propagation
    const json* src = find_anomaly(r, "invalid", "/encoder/lstm/LSTM");
    ASSERT_NE(src, nullptr) << r["anomalies"].dump();
    EXPECT_EQ((*src)["element"], 5000);
    EXPECT_EQ((*src)["step"], 1);
    EXPECT_EQ((*src)["role"], "source");
    for (const auto& a : r["anomalies"])
      if (a["op"] != "/encoder/lstm/LSTM") {
        EXPECT_EQ(a["role"], "propagation") << a.dump();
      }
    bool lstm = false, gru = false;
    for (const auto& o : r["ops"]) {
      lstm = lstm || o["type"] == "LSTM";
      gru = gru || o["type"] == "GRU";
    }
    EXPECT_TRUE(lstm && gru) << "both recurrent ops ran on the chip";
  } else if (name.starts_with("07_")) {
    EXPECT_TRUE(r["anomalies"].empty());
    EXPECT_GT(r["comparisons"].size(), 100u);
  }
}

INSTANTIATE_TEST_SUITE_P(Suite, Bundled, ::testing::ValuesIn(test::yaml_stems(test::source_root() / "scenarios")),
                         test::scenario_test_name);

}  // namespace
}  // namespace probelab::sim
