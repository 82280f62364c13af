// The numeric injectors on the simulated chip: a NaN propagates through the real datapath to
// exactly the ops that depend on it, FP16 accumulation overflows (and swamps) where FP32 does not,
// per-rank reduction orders make eight ranks disagree in FP16 but not in FP32, and a bit flip in
// a weight in HBM reaches the probes. Every simulation runs in a forked child (sim::Runner), so
// a TEST may compare several runs.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "tests/sim/run/injector_chip_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;
using nlohmann::json;

// A small DAG: p -> q -> r -> t depends on p; s and u do not.
const char* kDag = R"yaml(name: dag
seed: 2
inputs:
  - {name: x, shape: [4, 8]}
ops:
  - {name: p, type: MatMul, inputs: [x], weights: {weight: [8, 16]}}
  - {name: q, type: Add, weights: {b: {shape: [16], init: "uniform(-1, 1)"}}}
  - {name: r, type: MatMul, weights: {weight: [16, 8]}}
  - {name: s, type: MatMul, inputs: [x], weights: {weight: [8, 8]}}
  - {name: t, type: Add, inputs: [r, s]}
  - {name: u, type: Sigmoid, inputs: [s]}
outputs: [t, u]
)yaml";

bool is_f16_nan(std::uint64_t bits) { return (bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0; }

TEST(InjectorsOnChip, NanAtOneOpReachesExactlyItsDependents) {
  TempDir dir;
  dir.write("dag.yaml", kDag);
  dir.write("nan.yaml", R"(name: nan_dag
model: dag.yaml
chip: tiny
seed: 9
probes: {mode: statistics, watch_points: ["*"]}
injections:
  - {kind: nan, op: p, element: 5}
)");
  const auto runs = test::run_scenarios(dir, {"nan.yaml"});
  const auto& o = runs.at("nan_dag");
  ASSERT_EQ(o.report.at("status"), "ok") << o.report.dump(2);

  // Proof: op p, output 0 element 5 = [0, 5], a finite value replaced by the quiet NaN.
  const json& inj = test::injection(o);
  ASSERT_TRUE(inj.at("fired").get<bool>()) << inj.dump(2);
  ASSERT_EQ(inj.at("applications"), 1u);
  const json& proof = inj.at("proof").at(0);
  EXPECT_EQ(proof.at("op"), "p");
  EXPECT_EQ(proof.at("location"), "output 0 element 5 [0, 5]");
  EXPECT_EQ(proof.at("step"), 0u);
  EXPECT_EQ(proof.at("rank"), 0u);
  EXPECT_FALSE(is_f16_nan(test::bits_of(proof.at("before"))));
  EXPECT_EQ(test::bits_of(proof.at("after")), 0x7E00u);

  // Captured statistics: NaN counts follow the dependency structure of the datapath. One NaN in
  // row 0 of p: q keeps it in place, the MatMul r spreads it over row 0 (8 columns), t adds r.
  const std::map<std::string, std::uint64_t> want = {{"p", 1}, {"q", 1}, {"r", 8}, {"s", 0}, {"t", 8}, {"u", 0}};
  std::map<std::string, std::uint64_t> got;
  const json manifest = test::dump_manifest(o);
  for (const auto& e : manifest.at("entries"))
    if (e.at("edge") == "out0" && e.contains("statistics")) got[e.at("op")] = e.at("statistics").at("nan_count");
  EXPECT_EQ(got, want);

  // The fetched outputs agree: row 0 of t is NaN, nothing else is.
  const auto t = test::saved_output(o, "t");
  const auto u = test::saved_output(o, "u");
  ASSERT_EQ(t.size(), 32u);
  for (std::size_t i = 0; i < t.size(); ++i) EXPECT_EQ(std::isnan(t[i]), i < 8) << "t element " << i;
  for (double v : u) EXPECT_TRUE(std::isfinite(v));

  // The exception latches name p as the source and only p's dependents otherwise.
  ASSERT_FALSE(o.report.at("anomalies").empty());
  const std::set<std::string> dependents = {"p", "q", "r", "t"};
  bool source_p = false;
  for (const auto& a : o.report.at("anomalies")) {
    EXPECT_TRUE(dependents.count(a.at("op").get<std::string>())) << a.dump();
    source_p = source_p || (a.at("op") == "p" && a.at("role") == "source");
  }
  EXPECT_TRUE(source_p) << o.report.at("anomalies").dump(2);
}

// K = 1024; the weight is +200 in its first half of rows and -200 in the second, inputs are in
// [0.5, 1.5): running sums pass 65504 half-way through K although the result is small.
const char* kLargeK = R"yaml(name: large_k
seed: 5
inputs:
  - {name: x, shape: [8, 1024]}
weights:
  - {name: w_pos, shape: [512, 32], init: constant(200), trainable: false}
  - {name: w_neg, shape: [512, 32], init: constant(-200), trainable: false}
ops:
  - {name: proj_weight, type: Concat, inputs: [w_pos, w_neg], attrs: {axis: 0}}
  - {name: down_proj, type: MatMul, inputs: [x, proj_weight]}
  - {name: act, type: Relu}
outputs: [act]
)yaml";

std::string large_k_scenario(const std::string& name, const std::string& injections) {
  return "name: " + name + R"(
model: large_k.yaml
chip: tiny
seed: 3
data: {generator: uniform, low: 0.5, high: 1.5}
probes: {mode: statistics, watch_points: ["*"]}
)" + injections;
}

TEST(InjectorsOnChip, Fp16AccumulationOverflowsWhereFp32DoesNot) {
  TempDir dir;
  dir.write("large_k.yaml", kLargeK);
  dir.write("fp16.yaml", large_k_scenario("acc_fp16", "injections:\n  - {kind: fp16_accumulation, op: down_proj}\n"));
  dir.write("fp16dr.yaml", large_k_scenario("acc_fp16_dr", "injections:\n  - {kind: fp16_accumulation, op: down_proj, "
                                                           "rounding: fp32_then_round}\n"));
  dir.write("fp32.yaml", large_k_scenario("acc_fp32", ""));
  const auto runs = test::run_scenarios(dir, {"fp16.yaml", "fp16dr.yaml", "fp32.yaml"});

  for (const char* name : {"acc_fp16", "acc_fp16_dr"}) {
    const auto& o = runs.at(name);
    ASSERT_EQ(o.report.at("status"), "ok") << o.report.dump(2);
    const json& inj = test::injection(o);
    ASSERT_EQ(inj.at("applications"), 1u) << inj.dump(2);
    const json& proof = inj.at("proof").at(0);
    EXPECT_EQ(proof.at("op"), "down_proj");
    EXPECT_EQ(proof.at("before"), "acc=float32");
    EXPECT_NE(proof.at("after").get<std::string>().find("acc=float16"), std::string::npos) << proof.dump();
    // The exception latch names the MatMul as the source of an overflow at step 0.
    const auto over = test::anomalies_of(o, "overflow");
    ASSERT_FALSE(over.empty()) << name << ": " << o.report.at("anomalies").dump(2);
    EXPECT_EQ(over.front().at("op"), "down_proj");
    EXPECT_EQ(over.front().at("role"), "source");
    EXPECT_EQ(over.front().at("step"), 0u);
    // The running sums stay at +Inf once they passed 65504: every output is +Inf.
    for (double v : test::saved_output(o, "act")) EXPECT_EQ(v, INFINITY) << name;
  }
  EXPECT_NE(runs.at("acc_fp16").report.at("injections")[0]["proof"][0]["after"],
            runs.at("acc_fp16_dr").report.at("injections")[0]["proof"][0]["after"]);

  // FP32 accumulation: no exception, finite results of the size the data implies.
  const auto& clean = runs.at("acc_fp32");
  ASSERT_EQ(clean.report.at("status"), "ok") << clean.report.dump(2);
  EXPECT_TRUE(clean.report.at("anomalies").empty()) << clean.report.at("anomalies").dump(2);
  double max_abs = 0;
  for (double v : test::saved_output(clean, "act")) {
    EXPECT_TRUE(std::isfinite(v));
    max_abs = std::max(max_abs, std::abs(v));
  }
  EXPECT_GT(max_abs, 100.0);
  EXPECT_LT(max_abs, 65504.0);
}

// One large product followed by 1023 small ones: 2048 + 1023 * 0.25 = 2303.75. An FP16 accumulator
// (ulp 2 at 2048) drops every 0.25: the result is 2048, with no exception of any kind.
const char* kSwamp = R"yaml(name: swamp
seed: 1
inputs:
  - {name: x, shape: [8, 1024]}
weights:
  - {name: w_big, shape: [1, 32], init: constant(2048), trainable: false}
  - {name: w_small, shape: [1023, 32], init: constant(0.25), trainable: false}
ops:
  - {name: w, type: Concat, inputs: [w_big, w_small], attrs: {axis: 0}}
  - {name: total, type: MatMul, inputs: [x, w]}
outputs: [total]
)yaml";

std::string swamp_scenario(const std::string& name, const std::string& injections) {
  return "name: " + name + R"(
model: swamp.yaml
chip: tiny
seed: 3
data: {generator: ones}
probes: {mode: full, data_mode: [input, output], watch_points: ["*"], compare: {enabled: true}}
)" + injections;
}

TEST(InjectorsOnChip, Fp16AccumulationSwampsSmallAddendsWithoutAnyFlag) {
  TempDir dir;
  dir.write("swamp.yaml", kSwamp);
  dir.write("fp16.yaml", swamp_scenario("swamp_fp16", "injections:\n  - {kind: fp16_accumulation, op: total}\n"));
  dir.write("fp32.yaml", swamp_scenario("swamp_fp32", ""));
  const auto runs = test::run_scenarios(dir, {"fp16.yaml", "fp32.yaml"});
  const auto& bad = runs.at("swamp_fp16");
  const auto& good = runs.at("swamp_fp32");
  ASSERT_EQ(bad.report.at("status"), "ok") << bad.report.dump(2);
  ASSERT_EQ(good.report.at("status"), "ok") << good.report.dump(2);
  EXPECT_TRUE(test::injection(bad).at("fired").get<bool>());

  for (double v : test::saved_output(bad, "total")) EXPECT_EQ(v, 2048.0);
  for (double v : test::saved_output(good, "total")) EXPECT_EQ(v, 2304.0);  // FP16(2303.75)

  // No exception latch and no condition: only the reference comparison sees it.
  EXPECT_TRUE(bad.report.at("anomalies").empty()) << bad.report.at("anomalies").dump(2);
  const json cmp = test::comparison(bad, "total");
  ASSERT_FALSE(cmp.is_null()) << bad.report.at("comparisons").dump(2);
  EXPECT_FALSE(cmp.at("passed").get<bool>()) << cmp.dump(2);
  EXPECT_EQ(bad.report.at("first_failing_op"), "total");
  const json ok = test::comparison(good, "total");
  ASSERT_FALSE(ok.is_null());
  EXPECT_TRUE(ok.at("passed").get<bool>()) << ok.dump(2);
  EXPECT_TRUE(good.report.at("first_failing_op").is_null());
}

std::string collective_scenario(const std::string& name, const std::string& acc) {
  return "name: " + name + R"(
model: mlp_loss_scaled
mode: training
ranks: 8
steps: 3
seed: 21
training:
  loss: model
  optimizer: {type: sgd, lr: 5.0e-5}
  allreduce: {algorithm: direct, accumulation: )" + acc + R"(, order: arrival}
probes:
  mode: statistics
  watch_points: ["*/gradient/reduced", "*/updated"]
  consistency: {enabled: true, reference_rank: 0, mode: statistics, tolerance: 1.0e-3}
injections:
  - {kind: collective_order, op: "*/allreduce", order: rotate}
)";
}

TEST(InjectorsOnChip, PerRankReductionOrdersSplitEightRanksInFp16Only) {
  TempDir dir;
  dir.write("fp16.yaml", collective_scenario("dp_fp16", "fp16"));
  dir.write("fp32.yaml", collective_scenario("dp_fp32", "fp32"));
  const auto runs = test::run_scenarios(dir, {"fp16.yaml", "fp32.yaml"});
  for (const auto& [name, o] : runs) {
    ASSERT_EQ(o.report.at("status"), "ok") << o.report.dump(2);
    // Proof: every rank of every all-reduce got its rotated order (rank r starts with itself).
    const json& inj = test::injection(o);
    ASSERT_TRUE(inj.at("fired").get<bool>());
    EXPECT_EQ(inj.at("applications").get<std::uint64_t>() % (8 * 3), 0u) << name;
    for (const auto& p : inj.at("proof")) {
      const auto r = p.at("rank").get<std::uint32_t>();
      std::vector<std::uint32_t> order;
      for (std::uint32_t i = 0; i < 8; ++i) order.push_back((r + i) % 8);
      EXPECT_NE(p.at("after").get<std::string>().find(fmt::format("order=[{}]", fmt::join(order, ","))), std::string::npos)
          << p.dump();
    }
  }
  const json& c16 = runs.at("dp_fp16").report.at("consistency");
  ASSERT_TRUE(c16.at("checked").get<bool>()) << c16.dump(2);
  EXPECT_FALSE(c16.at("consistent").get<bool>()) << c16.dump(2);
  ASSERT_FALSE(c16.at("first_divergence").is_null());
  EXPECT_EQ(c16.at("first_divergence").at("step"), 0u) << c16.dump(2);
  EXPECT_GT(c16.at("first_divergence").at("max_abs_diff").get<double>(), 1e-3) << c16.dump(2);
  // The gap persists over the steps of the training loop and later exceeds its first value (per
  // step it moves by FP16 ulps of the gradient's largest elements, not monotonically).
  const json& steps16 = c16.at("per_step");
  ASSERT_EQ(steps16.size(), 3u) << c16.dump(2);
  double later = 0;
  for (std::size_t s = 0; s < steps16.size(); ++s) {
    EXPECT_GT(steps16[s].at("max_abs_diff").get<double>(), 1e-3) << "step " << s << ": " << c16.dump(2);
    if (s > 0) later = std::max(later, steps16[s].at("max_abs_diff").get<double>());
  }
  EXPECT_GT(later, steps16[0].at("max_abs_diff").get<double>()) << c16.dump(2);

  const json& c32 = runs.at("dp_fp32").report.at("consistency");
  ASSERT_TRUE(c32.at("checked").get<bool>()) << c32.dump(2);
  EXPECT_GT(c32.at("comparisons").get<std::uint64_t>(), 0u);
  // Consistent at tolerance 1e-3: no rank differs from rank 0 by more than 1e-3 at any step.
  EXPECT_TRUE(c32.at("consistent").get<bool>()) << c32.dump(2);
  EXPECT_TRUE(c32.at("divergences").empty()) << c32.dump(2);
  for (const auto& s : c32.at("per_step")) EXPECT_LT(s.at("max_abs_diff").get<double>(), 1e-3) << c32.dump(2);
}

// Weights of 1.0 (FP16 0x3c00): flipping bit 14 makes one +Inf (0x7c00), bits 14 and 0 a NaN (0x7c01).
const char* kOnes = R"yaml(name: onesnet
seed: 5
inputs:
  - {name: x, shape: [4, 8]}
ops:
  - {name: fc1, type: MatMul, inputs: [x], weights: {weight: {shape: [8, 16], init: ones}}}
  - {name: fc1_bias, type: Add, weights: {b: [16]}}
  - {name: relu, type: Relu}
  - {name: fc2, type: MatMul, weights: {weight: [16, 4]}}
outputs: [fc2]
)yaml";

std::string hbm_scenario(const std::string& name, const std::string& bits) {
  return "name: " + name + R"(
model: onesnet.yaml
chip: tiny
seed: 3
steps: 3
probes: {mode: statistics, watch_points: ["*"]}
injections:
  - {kind: bitflip, target: hbm, tensor: fc1/weight, element: 3, bits: )" + bits + ", cycle: 30000}\n";
}

/// Captured statistic `key` of fc1's output per step.
std::vector<std::uint64_t> fc1_counts(const ScenarioOutcome& o, const char* key) {
  std::vector<std::uint64_t> v(3, 99);
  const json manifest = test::dump_manifest(o);
  for (const auto& e : manifest.at("entries"))
    if (e.at("op") == "fc1" && e.at("edge") == "out0") v.at(e.at("step").get<std::size_t>()) = e.at("statistics").at(key);
  return v;
}

// A flip at cycle 30000 of a three-step inference: the steps before it are clean, the steps after
// it read the flipped weight: column 3 of fc1's output (4 rows) is then +-Inf (x * Inf) or NaN.
TEST(InjectorsOnChip, HbmBitflipInAWeightReachesTheProbes) {
  TempDir dir;
  dir.write("onesnet.yaml", kOnes);
  dir.write("inf.yaml", hbm_scenario("hbm_inf", "[14]"));
  dir.write("nan.yaml", hbm_scenario("hbm_nan", "[14, 0]"));
  const auto runs = test::run_scenarios(dir, {"inf.yaml", "nan.yaml"});
  struct Case {
    const char* name;
    std::uint64_t after;
    const char* count_key;
    const char* bits;
  };
  for (const Case& k : {Case{"hbm_inf", 0x7C00, "inf_count", "[14]"}, Case{"hbm_nan", 0x7C01, "nan_count", "[14, 0]"}}) {
    SCOPED_TRACE(k.name);
    const auto& o = runs.at(k.name);
    ASSERT_EQ(o.report.at("status"), "ok") << o.report.dump(2);
    const json& inj = test::injection(o);
    ASSERT_EQ(inj.at("applications"), 1u) << inj.dump(2);
    const json& proof = inj.at("proof").at(0);
    EXPECT_EQ(test::bits_of(proof.at("before")), 0x3C00u);
    EXPECT_EQ(test::bits_of(proof.at("after")), k.after);
    EXPECT_EQ(proof.at("cycle"), 30000u);
    EXPECT_NE(proof.at("location").get<std::string>().find(std::string("tensor fc1/weight element 3 bits ") + k.bits),
              std::string::npos)
        << proof.dump();
    const auto flip_step = proof.at("step").get<std::uint32_t>();
    ASSERT_LT(flip_step, 2u) << "the flip must land before the last step";
    const auto counts = fc1_counts(o, k.count_key);
    for (std::uint32_t s = 0; s < 3; ++s) {
      if (s < flip_step) {
        EXPECT_EQ(counts[s], 0u) << "step " << s;
      } else if (s > flip_step) {
        EXPECT_EQ(counts[s], 4u) << "step " << s;
      } else {
        EXPECT_TRUE(counts[s] == 0 || counts[s] == 4) << counts[s];
      }
    }
  }
  // x * Inf is exact, so an Inf weight raises no arithmetic flag, but the read is seen: inf_input
  // (a NaN weight: nan_input) latches at fc1 in every step that read it, naming the weight element.
  // No op wrote that value (the host uploaded a finite weight): corruption of fc1/weight element 3.
  for (const Case& k : {Case{"hbm_inf", 0, "inf_count", "inf_input"}, Case{"hbm_nan", 0, "nan_count", "nan_input"}}) {
    SCOPED_TRACE(k.name);
    const auto& o = runs.at(k.name);
    const auto counts = fc1_counts(o, k.count_key);
    std::vector<std::uint64_t> latched(3, 0);
    for (const auto& a : o.report.at("anomalies")) {
      if (a.at("op") != "fc1") continue;  // readers downstream latch too
      EXPECT_EQ(a.at("kind"), k.bits) << a.dump();
      EXPECT_EQ(a.at("element"), 3) << a.dump();
      EXPECT_EQ(a.at("tensor"), "fc1/weight") << a.dump();
      EXPECT_EQ(a.at("role"), "corruption") << a.dump();
      EXPECT_EQ(a.at("corrupted_tensor"), "fc1/weight") << a.dump();
      ++latched.at(a.at("step").get<std::size_t>());
    }
    for (std::size_t s = 0; s < 3; ++s) EXPECT_EQ(latched[s], counts[s] ? 1u : 0u) << "step " << s;
    const json& top = o.report.at("diagnosis").at(0);
    EXPECT_EQ(top.at("cause"), "data_corruption") << top.dump(2);
    EXPECT_EQ(top.at("op"), "fc1");
    EXPECT_EQ(top.at("tensor"), "fc1/weight");
    EXPECT_EQ(top.at("element"), 3);
  }
}

}  // namespace
}  // namespace probelab::sim
