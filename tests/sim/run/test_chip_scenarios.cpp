// The chip scenarios (scenarios/chips/*.yaml): the presets from CANN's platform files running a
// whole scenario through the probelab executable. Each passes (exit 0) and the fact it exists
// for is checked on report.json: the chip the report names, and on the saturation-only Ascend 910
// that the overflowed output saturated instead of becoming Inf.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/scenario_suite.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

json run_chip_scenario(const std::string& name, const TempDir& dir) {
  return test::run_scenario_report(test::source_root() / "scenarios" / "chips" / (name + ".yaml"), dir);
}

TEST(ChipScenarios, Ascend910b1LatchesTheFusedGeluNan) {
  TempDir dir;
  const json r = run_chip_scenario("ascend910b1_fused_gelu_nan", dir);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["status"], "ok");
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  EXPECT_EQ(r["chip"]["preset"], "ascend910b1");
  EXPECT_EQ(r["precision"]["overflow_mode"], "inf_nan");
}

TEST(ChipScenarios, Ascend910SaturatesTheOverflowedOutput) {
  TempDir dir;
  const json r = run_chip_scenario("ascend910_saturation_overflow", dir);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["status"], "ok");
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  EXPECT_EQ(r["chip"]["preset"], "ascend910");
  EXPECT_EQ(r["precision"]["overflow_mode"], "saturation");
  // The overflowed output saturated: its captured statistics at step 1 are finite, max 65504.
  const json dump = json::parse(test::slurp(dir.path() / "out" / "ascend910_saturation_overflow" / "dump" / "rank0" /
                                            "dump.json"));
  bool seen = false;
  for (const auto& e : dump["entries"]) {
    if (e["op"] != "down_proj" || e["step"] != 1) continue;
    seen = true;
    EXPECT_EQ(e["statistics"]["inf_count"], 0) << e.dump();
    EXPECT_EQ(e["statistics"]["max_abs"], 65504.0) << e.dump();
  }
  EXPECT_TRUE(seen) << dump.dump();
}

}  // namespace
}  // namespace probelab::sim
