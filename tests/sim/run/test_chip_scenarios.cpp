// The chip scenarios (scenarios/chips/*.yaml): the presets from CANN's platform files running a
// whole scenario through the probelab executable. Each passes (exit 0) and the fact it exists
// for is checked on report.json: the chip the report names, and on the saturation-only Ascend 910
// that the overflowed output saturated instead of becoming Inf.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "tests/sim/cli/cli_test_util.h"
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

// A large projection on B1 holds its A panels in the Cube cores' L1: the operand bytes that reach
// the cores are B per tile plus each operand once (the first touches), not both panels per tile
// (2 x 72 MiB over the two steps), and the MatMul runs near its Cube roofline.
TEST(ChipScenarios, Ascend910b1WideProjectionHoldsItsAPanelsInL1) {
  TempDir dir;
  const json r = run_chip_scenario("ascend910b1_wide_projection_l1_reuse", dir);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["status"], "ok");
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  bool seen = false;
  for (const auto& o : r["perf"]["ops"]) {
    if (o["op"] != "up_proj") continue;
    seen = true;
    const double b_per_tile = 512.0 * 128 * 2, tiles = 12.0 * 24;
    const double once = 1536.0 * 512 * 2 + 512.0 * 3072 * 2;
    const double moved = o["counters"]["l2_read_bytes"].get<double>() + o["counters"]["hbm_read_bytes"].get<double>();
    EXPECT_LE(moved, 2 * (tiles * b_per_tile + once) * 1.01) << o.dump();
    EXPECT_GE(o["roofline"]["efficiency"].get<double>(), 0.85) << o.dump();
    EXPECT_EQ(o["cores"], 24) << o.dump();
  }
  EXPECT_TRUE(seen);
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

namespace probelab::sim {
namespace {

// A fused MatMul + GELU on a split chip: the Cube part on the Cube cores, the GELU on their Vector
// cores, each tile handed over through the workspace with a flag, on the timeline; the NaN the
// epilogue produced is latched by a Vector core.
TEST(ChipScenarios, FusedMatMulGeluRunsAsCubeAndVectorCoresWithCrossCoreFlagsOnTheTimeline) {
  TempDir dir;
  const std::string yaml = (test::source_root() / "scenarios" / "chips" / "ascend910b4_split_fused_gelu.yaml").string();
  const test::CmdResult run =
      test::run("run '" + yaml + "' --out out --trace-format json", dir);
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  const auto out = dir.path() / "out" / "ascend910b4_split_fused_gelu";
  const json r = json::parse(test::slurp(out / "report.json"));
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  const json doc = json::parse(test::slurp(out / "trace.json"));
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> track;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name")
      track[{e["pid"].get<std::int64_t>(), e["tid"].get<std::int64_t>()}] = e["args"]["name"].get<std::string>();
  std::size_t set_flags = 0, waits = 0, flow_starts = 0, flow_ends = 0, aiv_vector = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string& t = track[{e.value("pid", std::int64_t{0}), e.value("tid", std::int64_t{0})}];
    if (e["ph"] == "X" && e["cat"] == "xcore") {
      const std::string name = e["name"].get<std::string>();
      if (name.find("CrossCoreSetFlag") != std::string::npos) {
        EXPECT_NE(t.find(".fixpipe"), std::string::npos) << t;
        ++set_flags;
      }
      if (name.find("CrossCoreWaitFlag") != std::string::npos) {
        EXPECT_NE(t.find(".aiv"), std::string::npos) << t;
        ++waits;
      }
    }
    if (e["ph"] == "X" && e["cat"] == "kernel" && t.find(".aiv") != std::string::npos &&
        t.find(".vector") != std::string::npos && e["name"].get<std::string>().find("fc1") != std::string::npos)
      ++aiv_vector;
    if (e.value("cat", "") == "xcore" && e["ph"] == "s") ++flow_starts;
    if (e.value("cat", "") == "xcore" && e["ph"] == "f") ++flow_ends;
  }
  EXPECT_GT(set_flags, 0u);
  EXPECT_EQ(waits, set_flags);        // one hand-over per tile: a set on the AIC, a wait on an AIV
  EXPECT_EQ(flow_starts, set_flags);  // joined by one arrow each
  EXPECT_EQ(flow_ends, set_flags);
  EXPECT_GT(aiv_vector, 0u);          // the fused op's epilogue ran on Vector cores
  bool aiv_latch = false;
  for (const auto& a : r["anomalies"])
    if (a.value("op", "") == "mlp/fc1+fc1_bias+gelu" && a.value("core_kind", "") == "aiv") aiv_latch = true;
  EXPECT_TRUE(aiv_latch) << r["anomalies"].dump();
}

// An FP16 accumulator overflow inside a mixed kernel is latched by the Cube core, the NaN its
// GELU computes from the Inf by the Vector core.
TEST(ChipScenarios, MixedKernelLatchesNameTheCubeCoreForTheAccumulatorAndTheVectorCoreForTheEpilogue) {
  TempDir dir;
  const json r = run_chip_scenario("ascend910b1_fused_fp16_accumulator_aic", dir);
  ASSERT_TRUE(r.is_object());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  std::set<std::string> seen;
  for (const auto& a : r["anomalies"])
    if (a.value("op", "") == "mlp/fc1+fc1_bias+gelu") seen.insert(a.value("kind", "") + ":" + a.value("core_kind", ""));
  EXPECT_TRUE(seen.count("overflow:aic")) << r["anomalies"].dump();
  EXPECT_TRUE(seen.count("invalid:aiv")) << r["anomalies"].dump();
}

class FloatStatusScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(FloatStatusScenario, Passes) {
  TempDir dir;
  const json r = test::run_scenario_report(test::source_root() / "scenarios" / "float_status" / (GetParam() + ".yaml"), dir);
  ASSERT_TRUE(r.is_object());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  ASSERT_TRUE(r["loss_scaling"].is_object());
  for (const auto& s : r["loss_scaling"]["steps"]) {
    EXPECT_EQ(s["skipped"], s["found_inf"]) << s.dump();  // a step is skipped exactly when an overflow was found
    EXPECT_EQ(s["next_scale"].get<double>(), s["found_inf"].get<bool>() ? s["scale"].get<double>() / 2 : s["scale"].get<double>());
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, FloatStatusScenario,
                         ::testing::ValuesIn(test::yaml_stems(test::source_root() / "scenarios" / "float_status")),
                         test::scenario_test_name);

}  // namespace
}  // namespace probelab::sim
