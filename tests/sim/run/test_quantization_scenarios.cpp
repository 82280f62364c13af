// The quantization scenarios (scenarios/quantization/*.yaml) through `probelab run`: each passes,
// and the facts each exists for are checked on report.json directly. The FP8 delayed-scaling
// scenario: the spike step saturates (latched on mlp/fc2's input, raised by the quantization,
// diagnosed as quantization_overflow) whatever the history length; afterwards the 16-step history
// flushes fc2's activations for exactly the 16 steps its window holds the spike, the 1-step
// history for one step only; nothing else saturates.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/scenario_suite.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

const json* layer(const json& q, const std::string& op) {
  for (const auto& l : q["layers"])
    if (l["op"] == op) return &l;
  return nullptr;
}

class QuantizationScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizationScenario, PassesAndShowsWhatItIsFor) {
  TempDir dir;
  const std::string name = GetParam();
  const json r = test::run_scenario_report(test::source_root() / "scenarios" / "quantization" / (name + ".yaml"), dir);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["status"], "ok");
  EXPECT_TRUE(r["passed"].get<bool>());
  ASSERT_TRUE(r["quantization"].is_object());
  if (name != "fp8_delayed_scaling_spike") return;

  // One anomaly: the spike step's saturation, on fc2's input, raised by the quantization.
  ASSERT_EQ(r["anomalies"].size(), 1u) << r["anomalies"].dump();
  const json& a = r["anomalies"][0];
  EXPECT_EQ(a["kind"], "overflow");
  EXPECT_EQ(a["op"], "mlp/fc2");
  EXPECT_EQ(a["step"], 4);
  EXPECT_EQ(a["value"], 20000.0);
  EXPECT_NE(a.dump().find("quantize"), std::string::npos) << a.dump();
  EXPECT_EQ(r["diagnosis"][0]["cause"], "quantization_overflow");

  // Per step: the 16-step window holds the spike for steps 5..20, the 1-step window for step 5.
  for (const auto& [q, last_crushed] : {std::pair{&r["quantization"], 20}, std::pair{&r["variants"][0]["quantization"], 5}}) {
    const json* fc2 = layer(*q, "mlp/fc2");
    ASSERT_NE(fc2, nullptr);
    const json& a2 = (*fc2)["activations"];
    EXPECT_EQ(a2["scaling"], "delayed");
    for (const auto& s : a2["per_step"]) {
      const int k = s["step"];
      EXPECT_EQ(s["saturated"].get<int>(), k == 4 ? 1 : 0) << k;
      const double usual = a2["per_step"][2]["scale"].get<double>();
      if (k >= 5 && k <= last_crushed) {  // the scale in use is the spike's while the window holds it
        EXPECT_GT(s["underflow"].get<int>(), 100) << k;  // of 1024 codes
        EXPECT_GT(s["scale"].get<double>(), 20.0 * usual) << k;
      }
      if (k > last_crushed) {
        EXPECT_LT(s["underflow"].get<int>(), 5) << k;
      }
    }
  }
  EXPECT_EQ(r["quantization"]["first_saturation"]["op"], "mlp/fc2");
  EXPECT_EQ(r["quantization"]["saturated"], 1);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, QuantizationScenario,
                         ::testing::ValuesIn(test::yaml_stems(test::source_root() / "scenarios" / "quantization")),
                         test::scenario_test_name);

}  // namespace
}  // namespace probelab::sim
