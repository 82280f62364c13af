// `probelab perf` what-if estimates checked by re-running with the chip override they name: HBM
// bandwidth x2 on a streaming model whose kernels run at the HBM's rate (the estimate must
// predict the saving within 15% and the total within 0.5%) and on the degraded-channel scenario
// (saving within 15%, total within 3%), link bandwidth x2 on the 4-rank ring
// (saving within 35%, total within 1%: the ring waits for its slowest hop, latency does not halve),
// and the full-Cube-rate bound of an op (its cycles less its roofline bound, on every rank).
#include <cstdio>
#include <string>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"
#include "tests/sim/scenario_suite.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

constexpr const char* kStream = R"(name: stream
seed: 1
inputs:
  - {name: x, shape: [1024, 4096]}
  - {name: y, shape: [1024, 4096]}
weights:
  - {name: w, shape: [4096, 1024]}
ops:
  - {name: add, type: Add, inputs: [x, y]}
  - {name: act, type: Relu}
  - {name: scale, type: Scale, attrs: {alpha: 0.5}}
  - {name: mm, type: MatMul, inputs: [scale, w]}
outputs: [mm]
)";

json perf_json(const std::string& run, const TempDir& dir) {
  const auto res = test::run("perf " + run + " --json", dir);
  EXPECT_EQ(res.code, 0) << res.err;
  return json::parse(res.out);
}

/// Runs `scenario` as it is and with the what-if's override; returns {estimate, simulated, base}.
std::tuple<double, double, double> check(const std::string& scenario, const std::string& name, const char* what,
                                         const TempDir& dir) {
  EXPECT_EQ(test::run("run " + scenario + " --out a --no-trace --no-baseline", dir).code, 0);
  const json w = perf_json("a/" + name, dir)["what_if"][what];
  const json& ov = w["override"];
  if (ov.empty()) {
    ADD_FAILURE() << "no override in " << w;
    return {};
  }
  const std::string key = ov.begin().key();
  const json value = ov.begin().value();
  const auto res = test::run("run " + scenario + " --out b --no-trace --no-baseline --set chip.overrides." + key + "=" +
                                 value.dump(), dir);
  EXPECT_EQ(res.code, 0) << res.err;
  const json b = json::parse(test::slurp(dir.path() / "b" / name / "report.json"));
  EXPECT_EQ(std::stod(b["chip"]["overrides"][key].get<std::string>()), value.get<double>()) << b["chip"]["overrides"];
  const double est = w["total"]["estimate"].get<double>(), sim = b["cycles"]["total"].get<double>();
  const double base = w["total"]["cycles"].get<double>();
  std::printf("%s %s: %.0f cycles, estimate %.0f, simulated %.0f (total residual %+.2f%%, saving %.0f vs %.0f)\n",
              name.c_str(), what, base, est, sim, 100 * (est - sim) / sim, base - est, base - sim);
  return {est, sim, base};
}

TEST(PerfWhatIf, HbmTimesTwoOnAStreamingModelMatchesTheRerun) {
  TempDir dir;
  dir.write("stream.yaml", kStream);
  // The coupled layout streams from HBM; the split default's L2 would hold these operands.
  dir.write("big.yaml", "name: big\nmodel: stream.yaml\nmode: inference\nsteps: 1\nseed: 3\nchip: ascend910b_coupled\n");
  const auto [est, sim, base] = check("big.yaml", "big", "hbm_x2", dir);
  ASSERT_GT(base - sim, 0.02 * base) << "the override must matter for the check to mean something";
  EXPECT_NEAR(base - est, base - sim, 0.15 * (base - sim));
  EXPECT_NEAR(est, sim, 0.005 * sim);
  const auto text = test::run("perf a/big", dir);
  EXPECT_NE(text.out.find("HBM bandwidth x2: total"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("check: chip.overrides: {hbm_bandwidth_gbps: 3200}"), std::string::npos) << text.out;
}

TEST(PerfWhatIf, HbmTimesTwoWithADegradedChannelMatchesTheRerun) {
  // Striped transfers wait for the slow channel: the estimate uses channels x its rate.
  TempDir dir;
  std::string yaml = "'";
  yaml += (test::source_root() / "scenarios" / "perf" / "hbm_channel_latency_spike.yaml").string();
  yaml += "'";
  const auto [est, sim, base] = check(yaml, "hbm_channel_latency_spike", "hbm_x2", dir);
  ASSERT_GT(base - sim, 0.1 * base);
  EXPECT_NEAR(base - est, base - sim, 0.15 * (base - sim));
  EXPECT_NEAR(est, sim, 0.03 * sim);
}

TEST(PerfWhatIf, LinkTimesTwoOnTheRingMatchesTheRerun) {
  TempDir dir;
  dir.write("ring.yaml", "name: ring\nmodel: transformer_wide\nmode: training\nranks: 4\nsteps: 1\nseed: 9\n"
                         "chip: {overrides: {link_count: 2}}\ntraining: {allreduce: {algorithm: ring}}\n");
  const auto [est, sim, base] = check("ring.yaml", "ring", "link_x2", dir);
  ASSERT_GT(base - sim, 0.01 * base);
  EXPECT_NEAR(base - est, base - sim, 0.35 * (base - sim));
  EXPECT_NEAR(est, sim, 0.01 * sim);
  // An op at full Cube rate on every rank: it saves its cycles less its roofline bound.
  const json perf = perf_json("a/ring", dir);
  const json& op = perf["what_if"]["full_cube_rate"].at(0);
  double cycles = 0, bound = 0;
  for (const auto& o : perf["ops"])
    if (o["op"] == op["op"]) {
      cycles += o["cycles"].get<double>();
      bound += o["roofline"]["bound_cycles"].get<double>();
    }
  EXPECT_DOUBLE_EQ(op["cycles"].get<double>(), cycles);
  EXPECT_GT(op["saved"].get<double>(), 0);
  EXPECT_LE(op["saved"].get<double>(), (cycles - bound) / 4 + 1) << "the slowest rank saves its own share";
  EXPECT_TRUE(op["override"].is_null());
  ASSERT_TRUE(perf["what_if"].contains("hbm_x2"));
}

}  // namespace
}  // namespace probelab::sim
