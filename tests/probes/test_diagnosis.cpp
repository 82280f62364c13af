#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "tests/probes/probe_test_util.h"
#include "probes/diagnosis.h"

using namespace probe_test;
using probes::AnomalyKind;
using probes::AnomalyRecord;
using probes::CauseClass;

namespace {
AnomalyRecord anomaly(const graph::Graph& g, const char* op, AnomalyKind k, std::uint32_t step, std::uint32_t detail = 0) {
  AnomalyRecord a;
  a.op = op;
  a.op_id = g.find_op(op)->id;
  a.op_type = g.find_op(op)->type;
  a.kind = k;
  a.on_input = probes::reads_input(k);
  a.tensor = a.on_input ? g.find_op(op)->inputs[0] : g.find_op(op)->outputs[0];
  a.step = step;
  a.detail = detail;
  return a;
}

/// Provenance over one rank's evidence, then the diagnosis.
struct Diag {
  std::vector<AnomalyRecord> anomalies;
  std::map<probes::EdgeKey, probes::EdgeObservation> obs;
  std::map<std::uint32_t, probes::StepEvidence> steps;
  std::vector<probes::Origin> origins;
  std::vector<probes::Candidate> run(const graph::Graph& g, probes::DiagnosisInput in = {}, std::size_t top = 3) {
    std::vector<probes::RankEvidence> ev{{0, &anomalies, &obs, &steps, 0x1F, 0}};
    origins = probes::resolve_provenance(g, ev);
    in.graph = &g;
    in.origins = origins;
    return probes::diagnose(in, top);
  }
};

probes::EdgeObservation seen(std::uint64_t nan, std::uint64_t inf = 0) {
  probes::EdgeObservation o;
  o.has_stats = true;
  o.nan_count = nan;
  o.inf_count = inf;
  o.count = 16;
  return o;
}
}  // namespace

TEST(Diagnosis, NanSourceRanksAboveItsPropagation) {
  graph::Graph g = mlp();
  Diag d;
  d.anomalies = {anomaly(g, "fc2", AnomalyKind::NanInput, 2), anomaly(g, "softmax", AnomalyKind::NanInput, 2)};
  d.obs[{2, g.find_op("relu1")->id, false, 0}] = seen(1);  // relu1's output capture shows the NaN
  d.obs[{2, g.find_op("add1")->id, false, 0}] = seen(0);   // its input did not
  probes::TriggerEvent t;  // a condition at relu1 saw it too
  t.op = "relu1";
  t.op_id = g.find_op("relu1")->id;
  t.tensor = "relu1:0";
  t.step = 2;
  t.condition = "nan_count > 0";
  spec::CaptureStats s;
  s.count = 16;
  s.nan_count = 1;
  t.stats = s;
  std::vector<probes::TriggerEvent> tr{t};
  probes::DiagnosisInput in;
  in.triggers = tr;
  auto c = d.run(g, in);
  ASSERT_FALSE(c.empty());
  EXPECT_LE(c.size(), 3u);
  EXPECT_EQ(c[0].op, "relu1");
  EXPECT_EQ(c[0].cause, CauseClass::NanSource);
  EXPECT_EQ(c[0].step, 2u);
  EXPECT_EQ(c[0].explains, 2u);
  EXPECT_GE(c[0].evidence.size(), 2u);
  EXPECT_NE(c[0].evidence[1].find("nan_count = 1 (threshold > 0)"), std::string::npos) << c[0].evidence[1];
  EXPECT_FALSE(c[0].suggestion.empty());
  for (const auto& x : c) EXPECT_FALSE(x.op == "fc2" && x.cause == CauseClass::NanSource) << "downstream blamed";
  for (const auto& x : c) EXPECT_FALSE(x.op == "softmax" && x.cause == CauseClass::NanSource) << "downstream blamed";
  EXPECT_EQ(d.anomalies[1].propagation_path, (std::vector<std::string>{"relu1@2", "fc2@2", "softmax@2"}));
}

TEST(Diagnosis, OverflowCauseFollowsTheAccumulatorNotTheOpType) {
  graph::Graph g = mlp();
  // fc1 accumulated in FP16 and its accumulator overflowed; fc2 accumulated in FP32 and only its
  // conversion to FP16 overflowed; add1 overflowed in its own computation.
  Diag d;
  d.anomalies = {anomaly(g, "fc1", AnomalyKind::Overflow, 1, spec::kExcDetailAccumulator | spec::kExcDetailAccFp16),
                 anomaly(g, "add1", AnomalyKind::Overflow, 1, spec::kExcDetailCompute),
                 anomaly(g, "relu1", AnomalyKind::Underflow, 1),
                 anomaly(g, "fc2", AnomalyKind::Overflow, 1, spec::kExcDetailAccumulator | spec::kExcDetailConversion)};
  d.anomalies[3].value = 70123.0;
  auto c = d.run(g, {}, 5);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].op, "fc1");
  EXPECT_EQ(c[0].cause, CauseClass::Fp16AccumulationOverflow);
  EXPECT_NE(c[0].suggestion.find("FP16 accumulator"), std::string::npos) << c[0].suggestion;
  EXPECT_NE(c[0].suggestion.find("no loss scale"), std::string::npos) << c[0].suggestion;
  EXPECT_EQ(c[1].op, "add1");
  EXPECT_EQ(c[1].cause, CauseClass::Overflow);
  EXPECT_EQ(c[2].op, "fc2");
  EXPECT_EQ(c[2].cause, CauseClass::OutputRangeOverflow);
  EXPECT_NE(c[2].suggestion.find("float16 output"), std::string::npos) << c[2].suggestion;
  EXPECT_NE(c[2].suggestion.find("70123"), std::string::npos) << c[2].suggestion;
  EXPECT_EQ(c[3].cause, CauseClass::Underflow);
}

TEST(Diagnosis, ReplayThatDoesNotReproduceIsCorruption) {
  graph::Graph g = mlp();
  Diag d;
  d.anomalies = {anomaly(g, "fc2", AnomalyKind::Overflow, 0, spec::kExcDetailAccumulator | spec::kExcDetailConversion)};
  std::vector<probes::ReplayCheck> rp{{0, 0, g.find_op("fc2")->id, AnomalyKind::Overflow, false, "FP32 0.5"}};
  probes::DiagnosisInput in;
  in.replays = rp;
  auto c = d.run(g, in);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].cause, CauseClass::DataCorruption);
  EXPECT_EQ(c[0].replay, "not_reproduced");
  rp[0].reproduced = true;
  c = d.run(g, in);
  EXPECT_EQ(c[0].cause, CauseClass::OutputRangeOverflow);
  EXPECT_EQ(c[0].replay, "reproduced");
}

TEST(Diagnosis, UserConditionIsAlwaysACandidateWithItsThreshold) {
  graph::Graph g = mlp();
  probes::TriggerEvent t;
  t.op = "fc2";
  t.op_id = g.find_op("fc2")->id;
  t.tensor = "fc2:0";
  t.step = 3;
  t.condition = "abs_mean < 1e-5";  // above any built-in vanishing threshold
  spec::CaptureStats s;
  s.count = 8;
  s.abs_mean = s.finite_abs_mean = 3e-6;
  t.stats = s;
  probes::TriggerEvent u = t;
  u.condition = "mean > 0.5 || std > 2";  // no class of its own
  s.mean = 0.7;
  u.stats = s;
  std::vector<probes::TriggerEvent> tr{t, u};
  probes::DiagnosisInput in;
  in.triggers = tr;
  Diag d;
  auto c = d.run(g, in);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].cause, CauseClass::Underflow);
  EXPECT_EQ(c[0].step, 3u);
  EXPECT_NE(c[0].evidence[0].find("abs_mean = 3e-06 (threshold < 1e-05)"), std::string::npos) << c[0].evidence[0];
  EXPECT_EQ(c[1].cause, CauseClass::Condition);
  EXPECT_NE(c[1].evidence[0].find("mean = 0.7"), std::string::npos) << c[1].evidence[0];
}

TEST(Diagnosis, CollectiveDivergenceAndFusedComparison) {
  graph::Graph g = mlp();
  probes::ConsistencyResult cr;
  cr.checked = true;
  cr.consistent = false;
  probes::Divergence dv;
  dv.step = 1;
  dv.op = "fc2";  // not a collective in this graph: classified as corruption/nondeterminism
  dv.ranks = {3};
  dv.max_abs_diff = 2e-3;
  cr.first = dv;
  cr.growth = {{0, 0.0}, {1, 2e-3}, {2, 5e-3}};
  cr.growing = true;
  probes::OpComparison fused;
  fused.op = "add1";
  fused.op_id = g.find_op("add1")->id;
  fused.step = 0;
  fused.pass = false;
  fused.culprit_inner_op = "add1/inner_ln";
  fused.culprit_basis = "partial_dump";
  std::vector<probes::OpComparison> cmp{fused};
  probes::DiagnosisInput in;
  in.graph = &g;
  in.consistency = &cr;
  in.comparisons = cmp;
  in.corrupt_records = 2;
  auto d = probes::diagnose(in, 5);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].cause, CauseClass::FusedOpPrecision);
  EXPECT_EQ(d[0].inner_op, "add1/inner_ln");
  EXPECT_EQ(d[1].op, "fc2");
  EXPECT_EQ(d[1].cause, CauseClass::DataCorruption);
  EXPECT_NE(d[1].evidence[0].find("growing"), std::string::npos) << d[1].evidence[0];
  EXPECT_EQ(d[2].op, "<capture path>");
}

TEST(Diagnosis, ADivergenceNamesTheReferenceOfTheRanksGroup) {
  graph::Graph g = mlp();
  probes::ConsistencyResult cr;
  cr.checked = true;
  cr.consistent = false;
  cr.reference_rank = 0;
  probes::Divergence dv;
  dv.step = 1;
  dv.op = "fc2";
  dv.basis = "hash";
  auto evidence = [&](std::vector<std::uint32_t> ranks, std::vector<std::uint32_t> refs) {
    dv.ranks = std::move(ranks);
    dv.references = std::move(refs);
    cr.first = dv;
    probes::DiagnosisInput in;
    in.graph = &g;
    in.consistency = &cr;
    auto d = probes::diagnose(in, 5);
    EXPECT_EQ(d.size(), 1u);
    return d.empty() ? std::string() : d[0].evidence.at(0);
  };
  // rank 6 of a server communicator {4..7} was compared with rank 4, not with the reference rank 0
  EXPECT_NE(evidence({6}, {4}).find("ranks 6 diverge from reference rank 4 first at fc2"), std::string::npos)
      << evidence({6}, {4});
  // that group's reference out of line
  EXPECT_NE(evidence({4}, {4}).find("reference rank 4 diverges from the other ranks of its group"), std::string::npos)
      << evidence({4}, {4});
  EXPECT_NE(evidence({2, 5}, {0, 4}).find("ranks 2,5 diverge from the reference ranks of their groups (0,4)"),
            std::string::npos) << evidence({2, 5}, {0, 4});
  // without references (one group): the reference rank
  EXPECT_NE(evidence({3}, {}).find("ranks 3 diverge from reference rank 0"), std::string::npos) << evidence({3}, {});
  EXPECT_NE(evidence({0}, {}).find("reference rank 0 diverges"), std::string::npos) << evidence({0}, {});
}

TEST(Diagnosis, GradientVanishingEarliestTriggerWins) {
  graph::Graph g = mlp();
  auto trig = [&](const char* op, double abs_mean) {
    probes::TriggerEvent t;
    t.op = op;
    t.op_id = g.find_op(op)->id;
    t.tensor = g.find_op(op)->outputs[0];
    t.step = 4;
    t.condition = "abs_mean < 1e-6";
    spec::CaptureStats s;
    s.count = 64;
    s.abs_mean = abs_mean;
    t.stats = s;
    return t;
  };
  std::vector<probes::TriggerEvent> tr{trig("fc2", 1e-8), trig("add1", 1e-7), trig("relu1", 5e-8)};
  probes::DiagnosisInput in;
  in.graph = &g;
  in.triggers = tr;
  auto d = probes::diagnose(in);
  ASSERT_FALSE(d.empty());
  EXPECT_NE(d[0].evidence[0].find("threshold < 1e-06"), std::string::npos) << d[0].evidence[0];
  EXPECT_EQ(d[0].op, "add1");  // earliest in execution order
  EXPECT_EQ(d[0].cause, CauseClass::Underflow);
  EXPECT_GT(d[0].score, d[1].score);
  EXPECT_NE(d[0].suggestion.find("re-initialise"), std::string::npos);
  auto j = probes::to_json(d[0]);
  EXPECT_EQ(j["cause"], "underflow");
  EXPECT_EQ(j["op"], "add1");
}

TEST(Diagnosis, UnderflowAndNanOfOneOpAndStepAreTwoOrigins) {
  // the per-kind latch reports both of relu1's kinds at step 1; the underflow latched first must
  // not swallow the NaN's origin
  graph::Graph g = mlp();
  Diag d;
  AnomalyRecord u = anomaly(g, "relu1", AnomalyKind::Underflow, 1);
  u.element = 7;
  AnomalyRecord n = anomaly(g, "relu1", AnomalyKind::Invalid, 1);
  n.element = 70;
  d.anomalies = {u, n, anomaly(g, "fc2", AnomalyKind::NanInput, 1)};
  auto c = d.run(g, {}, 5);
  ASSERT_EQ(d.origins.size(), 2u);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].op, "relu1");
  EXPECT_EQ(c[0].cause, CauseClass::NanSource);
  EXPECT_EQ(c[0].element, 70u);
  bool under = false;
  for (const auto& x : c) under = under || (x.op == "relu1" && x.cause == CauseClass::Underflow && x.element == 7u);
  EXPECT_TRUE(under);
}

TEST(Diagnosis, OverflowAndNanOfOneOpExecutionNameTheOverflow) {
  // an FP16 accumulator that ran past 65504 holds ±Inf, and Inf - Inf in the same accumulators is
  // a NaN: whichever latch the tiles raised first, the overflow is the root and the NaN its evidence
  graph::Graph g = mlp();
  Diag d;
  AnomalyRecord nan = anomaly(g, "fc1", AnomalyKind::Invalid, 0);
  nan.element = 1553;
  nan.cycle = 100;
  AnomalyRecord ovf = anomaly(g, "fc1", AnomalyKind::Overflow, 0, spec::kExcDetailAccumulator | spec::kExcDetailAccFp16);
  ovf.element = 87;
  ovf.cycle = 140;  // latched after the NaN
  d.anomalies = {nan, ovf, anomaly(g, "add1", AnomalyKind::NanInput, 0)};
  auto c = d.run(g, {}, 5);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].op, "fc1");
  EXPECT_EQ(c[0].cause, CauseClass::Fp16AccumulationOverflow);
  EXPECT_EQ(c[0].element, 87u);
  ASSERT_FALSE(c[0].evidence.empty());
  EXPECT_NE(c[0].evidence[0].find("invalid latched too, at element 1553"), std::string::npos) << c[0].evidence[0];
  for (const auto& x : c) EXPECT_FALSE(x.op == "add1" && x.cause == CauseClass::NanSource) << "reader blamed";
}

namespace {
probes::OpComparison failing(const graph::Graph& g, const char* op, std::uint64_t count, double within_0_1pct,
                             double within_0_5pct, std::uint64_t max_ulp) {
  probes::OpComparison c;
  c.op = op;
  c.op_id = g.find_op(op)->id;
  c.tensor = g.find_op(op)->outputs[0];
  c.device_dtype = graph::DType::F16;
  c.pass = false;
  c.metrics.count = count;
  c.metrics.within_0_1pct = within_0_1pct;
  c.metrics.within_0_5pct = within_0_5pct;
  c.metrics.max_ulp = max_ulp;
  c.metrics.worst_element = 3;
  return c;
}
}  // namespace

// One flipped operand reaches one row of a MatMul result: 1 of 16 rows off by a few hundred ULP,
// every other element exact to rounding. An FP16 accumulator instead leaves half of the elements
// beyond 0.1%, although only a few are beyond 0.5% and the worst is of the same order.
TEST(Diagnosis, ErrorConfinedToARowIsCorruptionSpreadErrorIsPrecision) {
  graph::Graph g = mlp();
  for (const auto& [w01, w05, ulp, want] :
       {std::tuple{0.9375, 0.9375, std::uint64_t{470}, CauseClass::DataCorruption},   // a row, 470 ULP
        std::tuple{0.998, 0.998, std::uint64_t{180}, CauseClass::DataCorruption},     // one element
        std::tuple{0.484, 0.914, std::uint64_t{341}, CauseClass::Precision},          // FP16 accumulation
        std::tuple{0.691, 0.957, std::uint64_t{74}, CauseClass::Precision},
        std::tuple{0.9375, 0.9375, std::uint64_t{20}, CauseClass::Precision},         // within rounding reach
        std::tuple{0.70, 0.95, std::uint64_t{2000}, CauseClass::DataCorruption}}) {   // >= 1024 ULP, confined
    std::vector<probes::OpComparison> cmp{failing(g, "fc2", 512, w01, w05, ulp)};
    probes::DiagnosisInput in;
    in.graph = &g;
    in.comparisons = cmp;
    const auto c = probes::diagnose(in);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].cause, want) << "within 0.1% " << w01 << ", within 0.5% " << w05 << ", max ulp " << ulp;
    EXPECT_EQ(c[0].element, 3u);
  }
  // a NaN/Inf mismatch is never a finite corruption pattern of the comparison
  std::vector<probes::OpComparison> cmp{failing(g, "fc2", 512, 0.9375, 0.9375, 470)};
  cmp[0].metrics.nonfinite_mismatch = 1;
  probes::DiagnosisInput in;
  in.graph = &g;
  in.comparisons = cmp;
  EXPECT_EQ(probes::diagnose(in)[0].cause, CauseClass::Precision);
}

// An op that only moves values (Flatten) replays bit-exact: one element 8 ULP off is a changed value.
TEST(Diagnosis, AnyErrorOfADataMovementOpIsCorruption) {
  graph::Graph g = mlp();
  g.add_op(make_op("flat", "Flatten", {"probs"}, {"flat:0"}, "model/head/flat"));
  std::vector<probes::OpComparison> cmp{failing(g, "flat", 16, 0.9375, 0.9375, 8), failing(g, "fc2", 16, 0.9375, 0.9375, 8)};
  probes::DiagnosisInput in;
  in.graph = &g;
  in.comparisons = cmp;
  const auto c = probes::diagnose(in);
  ASSERT_EQ(c.size(), 2u);
  for (const auto& x : c) EXPECT_EQ(x.cause, x.op == "flat" ? CauseClass::DataCorruption : CauseClass::Precision) << x.op;
}

namespace {
probes::EdgeObservation magnitude(double max_abs, double l2) {
  probes::EdgeObservation o = seen(0);
  o.max_abs = max_abs;
  o.l2 = l2;
  return o;
}
}  // namespace

// relu1 wrote 60000 although its input (add1) holds at most 2: no arithmetic gives that value, and
// fc2's overflow on it is explained by it. Statistics only, no latch at relu1.
TEST(Diagnosis, OverflowOnAnOutOfRangeFiniteValueNamesItsWriter) {
  graph::Graph g = mlp();
  Diag d;
  d.anomalies = {anomaly(g, "fc2", AnomalyKind::Overflow, 1, spec::kExcDetailAccumulator | spec::kExcDetailConversion),
                 anomaly(g, "softmax", AnomalyKind::NanInput, 1)};
  d.anomalies[0].value = 70000;
  d.obs[{1, g.find_op("fc1")->id, false, 0}] = magnitude(1.5, 4);
  d.obs[{1, g.find_op("add1")->id, false, 0}] = magnitude(2, 5);
  d.obs[{1, g.find_op("relu1")->id, false, 0}] = magnitude(60000, 60000);
  d.obs[{1, g.find_op("fc2")->id, false, 0}] = seen(0, 3);
  auto c = d.run(g);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].op, "relu1");
  EXPECT_EQ(c[0].cause, CauseClass::DataCorruption);
  EXPECT_EQ(c[0].step, 1u);
  EXPECT_EQ(c[0].tensor, "relu1:0");
  EXPECT_EQ(c[0].explains, 2u);
  EXPECT_NE(c[0].evidence[0].find("the most its inputs allow"), std::string::npos) << c[0].evidence[0];
  EXPECT_EQ(c[0].propagation_path, (std::vector<std::string>{"relu1@1", "fc2@1", "softmax@1"}));
  ASSERT_EQ(d.origins.size(), 1u);
  ASSERT_TRUE(d.origins[0].jump);
  EXPECT_EQ(d.origins[0].jump->consumer, "fc2@1");
  EXPECT_EQ(d.anomalies[0].role, probes::AnomalyRole::Propagation);
  for (const auto& x : c) EXPECT_NE(x.op, "fc2") << "the overflowing consumer is explained";
}

namespace {
/// Runs `fn` on a thread with a stack of `bytes` (the simulated host runs the probe runtime on a
/// SystemC thread, whose stack is a fraction of a process's main stack).
void on_small_stack(std::size_t bytes, const std::function<void()>& fn) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t t;
  auto call = [](void* f) -> void* {
    (*static_cast<const std::function<void()>*>(f))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&t, &attr, call, const_cast<std::function<void()>*>(&fn)), 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
}
}  // namespace

// A chain of 3000 Relus after the op that wrote 60000 from inputs of at most 2: the search for the
// writer goes back through every Relu (each within its bound) and finds it, on a 256 KiB stack.
TEST(Diagnosis, ValueJumpFoundThroughAChainDeeperThanAThreadStack) {
  constexpr int kChain = 3000;
  graph::Graph g("chain");
  g.add_tensor({"x", {graph::DType::F16, {2, 8}, graph::Format::ND}, graph::TensorKind::Input});
  g.mark_input("x");
  g.add_op(make_op("jump", "Relu", {"x"}, {"t0"}, "chain/jump"));
  for (int i = 1; i <= kChain; ++i)
    g.add_op(make_op(fmt::format("r{}", i), "Relu", {fmt::format("t{}", i - 1)}, {fmt::format("t{}", i)},
                     fmt::format("chain/r{}", i)));
  g.add_op(make_op("sink", "Exp", {fmt::format("t{}", kChain)}, {"probs"}, "chain/sink"));
  g.mark_output("probs");

  Diag d;
  d.anomalies = {anomaly(g, "sink", AnomalyKind::Overflow, 1, spec::kExcDetailConversion)};
  d.obs[{1, g.find_op("jump")->id, true, 0}] = magnitude(2, 5);
  d.obs[{1, g.find_op("jump")->id, false, 0}] = magnitude(60000, 60000);
  for (int i = 1; i <= kChain; ++i) d.obs[{1, g.find_op(fmt::format("r{}", i))->id, false, 0}] = magnitude(60000, 60000);
  std::vector<probes::Candidate> c;
  on_small_stack(256 * 1024, [&] { c = d.run(g); });
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].op, "jump");
  EXPECT_EQ(c[0].cause, CauseClass::DataCorruption);
  ASSERT_EQ(d.origins.size(), 1u);
  ASSERT_TRUE(d.origins[0].jump);
  EXPECT_EQ(d.origins[0].jump->consumer, "sink@1");
}

// x -> jump (Relu) -> ln (`type`: a LayerNormalization with scale and bias, or a unary op) -> probs,
// in `dt`; jump wrote `big` from inputs of at most 2, and ln raised an invalid (NaN) latch at step 1.
namespace {
std::vector<probes::Candidate> nan_after_jump(graph::DType dt, double big, Diag& d, const char* type = "LayerNormalization") {
  graph::Graph g("ln_chain");
  g.add_tensor({"x", {dt, {2, 8}, graph::Format::ND}, graph::TensorKind::Input});
  g.mark_input("x");
  g.add_initializer("scale", graph::Tensor::from_f32({8}, ramp(8, 0.1f, 1.0f), dt));
  g.add_initializer("bias", graph::Tensor::from_f32({8}, ramp(8, 0.01f), dt));
  g.add_op(make_op("jump", "Relu", {"x"}, {"t0"}, "m/jump"));
  const bool norm = std::string_view(type) == "LayerNormalization";
  graph::Op ln = norm ? make_op("ln", type, {"t0", "scale", "bias"}, {"probs"}, "m/ln")
                      : make_op("ln", type, {"t0"}, {"probs"}, "m/ln");
  if (norm) {
    ln.attrs["axis"] = std::int64_t{-1};
    ln.attrs["epsilon"] = 1e-5f;
  }
  g.add_op(std::move(ln));
  g.mark_output("probs");
  d.anomalies = {anomaly(g, "ln", AnomalyKind::Invalid, 1)};
  d.obs[{1, g.find_op("jump")->id, true, 0}] = magnitude(2, 5);
  d.obs[{1, g.find_op("jump")->id, false, 0}] = magnitude(big, big);
  d.obs[{1, g.find_op("ln")->id, true, 1}] = magnitude(1.5, 3);
  d.obs[{1, g.find_op("ln")->id, true, 2}] = magnitude(0.05, 0.1);
  return d.run(g);
}
}  // namespace

// A LayerNormalization computes with FP32 or wider intermediates: from FP16 inputs, however large,
// none overflows and its output stays within sqrt(n) max|scale| + max|bias|, so the NaN it made is
// its own, not the upstream value's. From FP32 inputs near the top of the range its squares can
// overflow: then the value upstream explains it.
TEST(Diagnosis, NanInANormalizationIsItsOwnUnlessItsIntermediatesCanOverflow) {
  Diag d16;
  auto c = nan_after_jump(graph::DType::F16, 60000, d16);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].op, "ln");
  EXPECT_EQ(c[0].cause, CauseClass::NanSource);
  for (const auto& x : c) EXPECT_NE(x.cause, CauseClass::DataCorruption) << x.op;
  Diag d32;
  c = nan_after_jump(graph::DType::F32, 1e37, d32);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].op, "jump");
  EXPECT_EQ(c[0].cause, CauseClass::DataCorruption);
  // a GELU saturates (tanh, erf -> +-1) and its output is within its input's magnitude; an Exp
  // of 20000 overflows, so there the value upstream explains the NaN
  Diag gelu, exp;
  c = nan_after_jump(graph::DType::F16, 20000, gelu, "Gelu");
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].op, "ln");
  EXPECT_EQ(c[0].cause, CauseClass::NanSource);
  c = nan_after_jump(graph::DType::F16, 20000, exp, "Exp");
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].op, "jump");
}

namespace {
// relu1 wrote values no arithmetic gives (from add1 of at most 2) at steps 0 and 1: 20000, then
// 30000; fc2 computed a finite result at step 0 (`fc2_then`) and latched `kind` (an overflow, or
// a NaN) at step 1 on inputs 1.5x larger.
std::vector<probes::Candidate> nonfinite_a_step_after_finite(double fc2_then, AnomalyKind kind, Diag& d,
                                                             const graph::Graph& g) {
  const bool overflow = kind == AnomalyKind::Overflow;
  d.anomalies = {anomaly(g, "fc2", kind, 1, overflow ? std::uint32_t{spec::kExcDetailConversion} : 0u)};
  for (std::uint32_t step : {0u, 1u}) {
    d.obs[{step, g.find_op("fc1")->id, false, 0}] = magnitude(1.5, 4);
    d.obs[{step, g.find_op("add1")->id, false, 0}] = magnitude(2, 5);
    d.obs[{step, g.find_op("relu1")->id, false, 0}] = step == 0 ? magnitude(20000, 40000) : magnitude(30000, 60000);
  }
  d.obs[{0, g.find_op("fc2")->id, false, 0}] = magnitude(fc2_then, fc2_then);
  d.obs[{1, g.find_op("fc2")->id, false, 0}] = overflow ? seen(0, 3) : seen(3);
  return d.run(g);
}
}  // namespace

// An overflow is the size of the values: relu1@1 is named whatever fc2 computed at step 0. A NaN:
// after a step-0 result of 60000, already near the FP16 range, the larger inputs may explain it
// (relu1@1 named); a step-0 result of 10000 grown 1.5x stays far inside the range, so inputs as
// large gave a finite result before and their size does not explain the NaN (fc2's own).
TEST(Diagnosis, AnEarlierFiniteResultClearsTheInputsOnlyOfANanAndFarFromTheRange) {
  const graph::Graph g = mlp();
  struct Case {
    double then;
    AnomalyKind kind;
    const char* named;
  };
  for (const Case& k : {Case{60000, AnomalyKind::Overflow, "relu1"}, Case{10000, AnomalyKind::Overflow, "relu1"},
                        Case{60000, AnomalyKind::Invalid, "relu1"}, Case{10000, AnomalyKind::Invalid, "fc2"}}) {
    const std::string what = fmt::format("{} after {}", probes::anomaly_kind_name(k.kind), k.then);
    Diag d;
    const auto c = nonfinite_a_step_after_finite(k.then, k.kind, d, g);
    ASSERT_FALSE(c.empty()) << what;
    EXPECT_EQ(c[0].op, k.named) << what;
    EXPECT_EQ(c[0].step, 1u) << what;
    ASSERT_EQ(d.origins.size(), 1u) << what;
    const bool jump = std::string(k.named) == "relu1";
    EXPECT_EQ(d.origins[0].jump.has_value(), jump) << what;
    if (jump) {
      EXPECT_EQ(c[0].cause, CauseClass::DataCorruption) << what;
      EXPECT_EQ(d.origins[0].jump->consumer, "fc2@1") << what;
    }
  }
}

// The same overflow on values that grew within what each op's inputs allow (add1 = fc1 + b1,
// relu1 <= add1; fc1 reads the fed input, whose magnitude is unknown): a genuine overflow of fc2.
TEST(Diagnosis, OverflowOnValuesGrownWithinTheirBoundsStaysAtTheConsumer) {
  graph::Graph g = mlp();
  Diag d;
  d.anomalies = {anomaly(g, "fc2", AnomalyKind::Overflow, 1, spec::kExcDetailAccumulator | spec::kExcDetailConversion)};
  d.obs[{1, g.find_op("fc1")->id, false, 0}] = magnitude(30000, 90000);
  d.obs[{1, g.find_op("add1")->id, false, 0}] = magnitude(30000.5, 90000);
  d.obs[{1, g.find_op("relu1")->id, false, 0}] = magnitude(30000, 80000);
  auto c = d.run(g);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].op, "fc2");
  EXPECT_EQ(c[0].cause, CauseClass::OutputRangeOverflow);
  ASSERT_EQ(d.origins.size(), 1u);
  EXPECT_FALSE(d.origins[0].jump);
}

// Clip (ReLU6), the saturating and piecewise-linear activations, and the gradients of the
// pointwise ops whose derivative does not grow with the inputs: a value written into ReLU6's
// gradient is beyond |dY|, which the search for an earlier value out of range has to see.
TEST(Diagnosis, ValueBoundsOfActivationsAndPointwiseGradients) {
  using M = std::optional<probes::Magnitude>;
  auto mag = [](double max_abs) { return M(probes::Magnitude{max_abs, max_abs, -max_abs, 1}); };
  const graph::Op relu6 = make_op("r6", "Clip", {"x", "lo", "hi"}, {"y"});
  EXPECT_DOUBLE_EQ(*probes::value_bound(relu6, 0, std::vector<M>{mag(3), mag(0), mag(6)}), 6.0);
  EXPECT_FALSE(probes::value_bound(relu6, 0, std::vector<M>{mag(3), std::nullopt, mag(6)}));  // a bound unknown
  graph::Op clip_attrs = make_op("c", "Clip", {"x"}, {"y"});  // opset 6: bounds as attributes
  clip_attrs.attrs["min"] = -1.0;
  clip_attrs.attrs["max"] = 2.0;
  EXPECT_DOUBLE_EQ(*probes::value_bound(clip_attrs, 0, std::vector<M>{mag(0.5)}), 2.0);
  EXPECT_DOUBLE_EQ(*probes::value_bound(make_op("hs", "HardSigmoid", {"x"}, {"y"}), 0, std::vector<M>{mag(900)}), 1.0);
  EXPECT_DOUBLE_EQ(*probes::value_bound(make_op("hw", "HardSwish", {"x"}, {"y"}), 0, std::vector<M>{mag(9)}), 9.0);
  // SliceGrad scatters dY into zeros (rotate_half's halves, a cached table cut to the sequence).
  const graph::Op slice_grad = make_op("sg", "SliceGrad", {"dy"}, {"dx"});
  EXPECT_DOUBLE_EQ(*probes::value_bound(slice_grad, 0, std::vector<M>{mag(0.75)}), 0.75);
  EXPECT_FALSE(probes::value_bound(slice_grad, 0, std::vector<M>{std::nullopt}));
  EXPECT_NEAR(*probes::value_bound(make_op("se", "Selu", {"x"}, {"y"}), 0, std::vector<M>{mag(1)}),
              1.67326319217681884765625 * 1.05070102214813232421875, 1e-12);
  EXPECT_DOUBLE_EQ(*probes::value_bound(make_op("w", "Where", {"c", "a", "b"}, {"y"}), 0,
                                        std::vector<M>{mag(1), mag(2), mag(7)}),
                   7.0);
  EXPECT_DOUBLE_EQ(*probes::value_bound(make_op("p", "PRelu", {"x", "s"}, {"y"}), 0, std::vector<M>{mag(4), mag(3)}),
                   12.0);
  EXPECT_DOUBLE_EQ(*probes::value_bound(make_op("tg", "TanhGrad", {"dy", "y"}, {"dx"}), 0,
                                        std::vector<M>{mag(5), mag(0.9)}),
                   5.0);
  EXPECT_DOUBLE_EQ(*probes::value_bound(make_op("sg", "SigmoidGrad", {"dy", "y"}, {"dx"}), 0,
                                        std::vector<M>{mag(5), mag(1)}),
                   10.0);  // Y out of [0, 1] is not assumed away

  // a decomposed LayerNorm and tanh-GELU: powers, roots, quotients by positive operands
  auto signed_mag = [](double max_abs, double min) { return M(probes::Magnitude{max_abs, max_abs, min, 1}); };
  const graph::Op pw = make_op("pw", "Pow", {"x", "p"}, {"y"});
  EXPECT_DOUBLE_EQ(*probes::value_bound(pw, 0, std::vector<M>{mag(4), signed_mag(2, 2)}), 16.0);
  EXPECT_DOUBLE_EQ(*probes::value_bound(pw, 0, std::vector<M>{mag(0.5), signed_mag(3, 3)}), 1.0);
  EXPECT_FALSE(probes::value_bound(pw, 0, std::vector<M>{mag(4), signed_mag(2, -1)}));  // 1 / x: unbounded
  EXPECT_FALSE(probes::value_bound(pw, 0, std::vector<M>{mag(4), signed_mag(2, 0)}));   // minimum unknown
  EXPECT_DOUBLE_EQ(*probes::value_bound(make_op("sq", "Sqrt", {"x"}, {"y"}), 0, std::vector<M>{mag(16)}), 4.0);
  const graph::Op dv = make_op("dv", "Div", {"a", "b"}, {"y"});
  EXPECT_DOUBLE_EQ(*probes::value_bound(dv, 0, std::vector<M>{mag(3), signed_mag(2, 0.25)}), 12.0);
  EXPECT_FALSE(probes::value_bound(dv, 0, std::vector<M>{mag(3), signed_mag(2, -0.25)}));  // b changes sign
  EXPECT_DOUBLE_EQ(*probes::value_bound(make_op("rc", "Reciprocal", {"x"}, {"y"}), 0, std::vector<M>{signed_mag(9, 0.5)}),
                   2.0);
  EXPECT_NEAR(*probes::value_bound(make_op("lg", "Log", {"x"}, {"y"}), 0, std::vector<M>{signed_mag(10, 0.001)}),
              std::log(1000.0), 1e-12);

  // PointwiseGrad(dY, Y, X0, X1, ...; of, wrt)
  auto grad = [](const std::string& of, std::int64_t wrt, std::vector<std::string> xs) {
    std::vector<std::string> in{"dy", "y"};
    in.insert(in.end(), xs.begin(), xs.end());
    graph::Op o = make_op("g_" + of, "PointwiseGrad", in, {"dx"});
    o.attrs["of"] = of;
    o.attrs["wrt"] = wrt;
    return o;
  };
  const std::vector<M> clip_in{mag(5), mag(6), mag(100), mag(0), mag(6)};
  EXPECT_DOUBLE_EQ(*probes::value_bound(grad("Clip", 0, {"x", "lo", "hi"}), 0, clip_in), 5.0);
  EXPECT_DOUBLE_EQ(*probes::value_bound(grad("HardSwish", 0, {"x"}), 0, std::span(clip_in).first(3)), 7.5);
  graph::Op leaky = grad("LeakyRelu", 0, {"x"});
  leaky.attrs["alpha"] = -3.0;
  EXPECT_DOUBLE_EQ(*probes::value_bound(leaky, 0, std::span(clip_in).first(3)), 15.0);
  const std::vector<M> prelu_in{mag(5), mag(1), mag(100), mag(3)};
  EXPECT_DOUBLE_EQ(*probes::value_bound(grad("PRelu", 0, {"x", "s"}), 0, prelu_in), 15.0);   // dY max(1, |slope|)
  EXPECT_DOUBLE_EQ(*probes::value_bound(grad("PRelu", 1, {"x", "s"}), 0, prelu_in), 500.0);  // dY |x|
  // a derivative that grows with the input: no bound
  EXPECT_FALSE(probes::value_bound(grad("Exp", 0, {"x"}), 0, std::span(clip_in).first(3)));
  EXPECT_FALSE(probes::value_bound(grad("Clip", 0, {"x"}), 0, std::vector<M>{std::nullopt, mag(1), mag(1)}));
}

namespace {

// The magnitudes of a tensor as captures summarize them (FP32 data).
probes::Magnitude magnitude_of(const graph::Tensor& t) {
  probes::Magnitude m{0, 0, t.data<float>()[0], 0};
  double sq = 0;
  for (const float v : t.data<float>()) {
    m.max_abs = std::max(m.max_abs, static_cast<double>(std::fabs(v)));
    m.min = std::min(m.min, static_cast<double>(v));
    sq += static_cast<double>(v) * v;
    ++m.count;
  }
  m.l2 = std::sqrt(sq);
  return m;
}

}  // namespace

// A dot product of k terms: k max|a| max|b| and sqrt(k) max l2 beat Cauchy-Schwarz over whole
// operands (a 1x1 convolution of a large activation), and hold for the reference MatMul.
TEST(Diagnosis, ValueBoundOfShortDotProducts) {
  using M = std::optional<probes::Magnitude>;
  const graph::Op mm = make_op("mm", "MatMul", {"a", "b"}, {"y"});
  const std::vector<M> big{probes::Magnitude{2, 100, -2, 4000}, probes::Magnitude{0.5, 10, -0.5, 900}};
  EXPECT_DOUBLE_EQ(*probes::value_bound(mm, 0, big), 1000.0);                   // l2 l2
  EXPECT_DOUBLE_EQ(*probes::value_bound(mm, 0, big, 9.0), 9.0);                 // 9 * 2 * 0.5
  EXPECT_DOUBLE_EQ(*probes::value_bound(mm, 0, big, 900.0), 600.0);             // sqrt(900) * 2 * 10 < 900
  EXPECT_DOUBLE_EQ(*probes::value_bound(make_op("sm", "Softmax", {"a"}, {"y"}), 0, big, 9.0), 1.0);  // not a dot
  std::vector<float> a(4 * 8), b(8 * 3);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7 % 11) - 5) * (i == 9 ? 40.0f : 1.0f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5 % 7) - 3) * 0.25f;
  const graph::Tensor ta = graph::Tensor::from_f32({4, 8}, a), tb = graph::Tensor::from_f32({8, 3}, b);
  const std::vector<const graph::Tensor*> args{&ta, &tb};
  const graph::Tensor y = graph::run_reference(mm, args, graph::RefPrecision::F32).at(0);
  const std::vector<M> in{magnitude_of(ta), magnitude_of(tb)};
  const double tight = *probes::value_bound(mm, 0, in, 8.0);
  EXPECT_LE(magnitude_of(y).max_abs, tight * (1 + 1e-6));
  EXPECT_LT(tight, *probes::value_bound(mm, 0, in));
}

// SoftmaxCrossEntropyLoss without class weights: logsumexp(x) - x[label] <= 2 max|x| + log C per
// position, the reference's loss and log_prob within it; the sum of the positions' terms.
TEST(Diagnosis, ValueBoundOfCrossEntropyLoss) {
  using M = std::optional<probes::Magnitude>;
  const std::vector<float> scores{30, -30, 0, 1, -2, 29, 5, 5, -30, 30, 0, 0};  // [4, 3]
  const graph::Tensor ts = graph::Tensor::from_f32({4, 3}, scores);
  graph::Tensor labels(graph::TensorDesc{graph::DType::I64, {4}, graph::Format::ND});
  const std::vector<std::int64_t> lab{1, 2, 0, 0};
  std::copy(lab.begin(), lab.end(), labels.data<std::int64_t>().begin());
  for (const char* reduction : {"mean", "sum", "none"}) {
    graph::Op ce = make_op("ce", "SoftmaxCrossEntropyLoss", {"s", "l"}, {"loss", "log_prob"});
    ce.attrs["reduction"] = std::string(reduction);
    const std::vector<const graph::Tensor*> args{&ts, &labels};
    const auto out = graph::run_reference(ce, args, graph::RefPrecision::F32);
    const std::vector<M> in{magnitude_of(ts), std::nullopt};
    for (std::uint16_t slot = 0; slot < 2; ++slot) {
      const auto bound = probes::value_bound(ce, slot, in);
      ASSERT_TRUE(bound) << reduction;
      EXPECT_LE(magnitude_of(out[slot]).max_abs, *bound) << reduction << slot;
    }
    if (std::string(reduction) == "none") {  // one position near its bound
      EXPECT_GT(magnitude_of(out[0]).max_abs, 0.9 * *probes::value_bound(ce, 0, in)) << reduction;
    }
  }
  const graph::Op weighted = make_op("cw", "SoftmaxCrossEntropyLoss", {"s", "l", "w"}, {"loss"});
  EXPECT_FALSE(probes::value_bound(weighted, 0, std::vector<M>{magnitude_of(ts), std::nullopt, magnitude_of(ts)}));
}

// BatchNormalizationGrad's dX against the reference kernel on inputs that make rstd large (a
// channel of nearly equal values, variance far below epsilon) and dY uneven: the bound holds, and
// the kernel's result comes within 16 times of it.
TEST(Diagnosis, ValueBoundOfBatchNormalizationGradInput) {
  using M = std::optional<probes::Magnitude>;
  auto magnitude = [](const graph::Tensor& t) { return M(magnitude_of(t)); };
  const graph::Shape shape{2, 2, 1, 4};
  const std::vector<float> x{1, 1.0001f, 1, 1, -3, 5, 0, 2, 1, 1, 1, 0.9999f, 7, -1, 4, 4};
  const std::vector<float> dy{0.5f, -2, 0.1f, 0, 1, 1, -1, 3, 0, 0.25f, -0.75f, 4, 0, 0, 1, -2};
  const std::vector<float> scale{-1.5f, 0.5f}, mean{0.5f, -1}, var{0.25f, 2};
  const graph::Tensor tdy = graph::Tensor::from_f32(shape, dy), tx = graph::Tensor::from_f32(shape, x);
  const graph::Tensor ts = graph::Tensor::from_f32({2}, scale), tm = graph::Tensor::from_f32({2}, mean),
                      tv = graph::Tensor::from_f32({2}, var);
  for (const std::int64_t training : {1, 0}) {
    graph::Op op = make_op("bng", "BatchNormalizationGrad", {"dy", "x", "s", "m", "v"}, {"dx", "ds", "db"});
    op.attrs["epsilon"] = 1e-5;
    op.attrs["training_mode"] = training;
    if (training) op.inputs.resize(3);
    std::vector<const graph::Tensor*> args{&tdy, &tx, &ts};
    std::vector<M> in{magnitude(tdy), magnitude(tx), magnitude(ts)};
    if (!training) {
      args.insert(args.end(), {&tm, &tv});
      in.insert(in.end(), {magnitude(tm), magnitude(tv)});
    }
    const auto out = graph::run_reference(op, args, graph::RefPrecision::F32);
    for (std::uint16_t slot = 0; slot < 3; ++slot) {  // dX, dScale, dB
      const auto bound = probes::value_bound(op, slot, in);
      ASSERT_TRUE(bound) << training << " " << slot;
      EXPECT_LE(magnitude(out.at(slot))->max_abs, *bound * (1 + 1e-6)) << training << " " << slot;  // rounded to FP32
      // within the factor a written value must exceed (dScale's sqrt(n) for |xhat| is looser)
      if (slot != 1) {
        EXPECT_GT(magnitude(out.at(slot))->max_abs, *bound / 16) << training << " " << slot;
      }
    }
    if (!training) {  // a running variance not known to be positive: rstd unbounded (dB needs none)
      in[4]->min = 0;
      EXPECT_FALSE(probes::value_bound(op, 0, in));
      EXPECT_FALSE(probes::value_bound(op, 1, in));
      EXPECT_TRUE(probes::value_bound(op, 2, in));
    } else {  // epsilon 0: a constant channel divides by 0
      op.attrs["epsilon"] = 0.0;
      EXPECT_FALSE(probes::value_bound(op, 0, in));
    }
  }
}

// BatchNormalization with running statistics against the reference kernel when a variance was
// written just below zero (above -epsilon: the kernel still gives finite values, larger than
// 1 / sqrt(epsilon) allows): the bound holds.
// LayerNormalizationGrad normalises each row by its own statistics: a near-constant row divides
// by about sqrt(epsilon), which bounds rstd; dScale and dB sum over the rows.
TEST(Diagnosis, ValueBoundOfLayerNormalizationGrad) {
  using M = std::optional<probes::Magnitude>;
  auto magnitude = [](const graph::Tensor& t) { return M(magnitude_of(t)); };
  const graph::Shape shape{3, 4};
  const std::vector<float> x{1, 1.0001f, 1, 1, -3, 5, 0, 2, 7, -1, 4, 4};
  const std::vector<float> dy{4, -4, 0, 0, 1, 1, -1, 0.5f, 0, 0.25f, -0.75f, 1};
  const graph::Tensor tdy = graph::Tensor::from_f32(shape, dy), tx = graph::Tensor::from_f32(shape, x);
  const std::vector<float> scale{2, 2, -1.5f, 0.5f};
  const graph::Tensor ts = graph::Tensor::from_f32({4}, scale);
  graph::Op op = make_op("lng", "LayerNormalizationGrad", {"dy", "x", "s"}, {"dx", "ds", "db"});
  op.attrs["axis"] = std::int64_t{-1};
  op.attrs["epsilon"] = 1e-5;
  const std::vector<M> in{magnitude(tdy), magnitude(tx), magnitude(ts)};
  const std::vector<const graph::Tensor*> args{&tdy, &tx, &ts};
  const auto out = graph::run_reference(op, args, graph::RefPrecision::F32);
  for (std::uint16_t slot = 0; slot < 3; ++slot) {
    const auto bound = probes::value_bound(op, slot, in);
    ASSERT_TRUE(bound) << slot;
    EXPECT_LE(magnitude(out.at(slot))->max_abs, *bound * (1 + 1e-6)) << slot;  // rounded to FP32
    EXPECT_GT(magnitude(out.at(slot))->max_abs, *bound / 16) << slot;  // within the factor a written value must exceed
  }
  op.attrs["epsilon"] = 0.0;  // a constant row divides by 0
  EXPECT_FALSE(probes::value_bound(op, 0, in));
}

// SgdUpdate writes p - lr (momentum v + grad + weight_decay p): with the factor the host may scale
// lr by (RankEvidence::lr_factor) the bound is p + lr factor |step|, which a loss-scaled gradient
// (hundreds) keeps near p; unknown, lr counts as at least 1.
TEST(Diagnosis, ValueBoundOfSgdUpdateFollowsTheHostsLearningRate) {
  using M = std::optional<probes::Magnitude>;
  auto magnitude = [](const graph::Tensor& t) { return M(magnitude_of(t)); };
  const std::vector<float> p{0.5f, -0.25f, 0.125f, 1}, g{615.5f, -300, 12, -0.5f};
  const graph::Tensor tp = graph::Tensor::from_f32({4}, p), tg = graph::Tensor::from_f32({4}, g);
  graph::Op op = make_op("upd", "SgdUpdate", {"p", "g"}, {"p2"});
  op.attrs["lr"] = 5e-4;
  const std::vector<M> in{magnitude(tp), magnitude(tg)};
  const std::vector<const graph::Tensor*> args{&tp, &tg};
  const auto out = graph::run_reference(op, args, graph::RefPrecision::F32).at(0);
  const auto known = probes::value_bound(op, 0, in, std::nullopt, 1.0);
  ASSERT_TRUE(known);
  EXPECT_LE(magnitude(out)->max_abs, *known * (1 + 1e-6));
  EXPECT_LT(*known, 5000.0 / 16);  // a written 5000 is beyond what the update gives
  const auto scaled = probes::value_bound(op, 0, in, std::nullopt, 1 / 0.25);  // a scale down to 0.25
  ASSERT_TRUE(scaled);
  EXPECT_NEAR(*scaled - 1, 4 * (*known - 1), 1e-9);
  const auto unknown = probes::value_bound(op, 0, in);
  ASSERT_TRUE(unknown);
  EXPECT_GT(*unknown, 5000.0 / 16);  // lr taken as 1: the bound passes it
}

// AdamUpdate writes p - lr (m' / c1) / (sqrt(v' / c2) + eps): its three outputs stay within the
// bounds whatever second moment it reads (an element with no gradient and no second moment yet
// divides by eps alone: the largest step), over steps 1 and 50 and with weight decay; a master
// weight written as 1e38 is beyond them; without the gradient's or a moment's magnitude there is
// no bound.
// The gradients of a decomposed LayerNorm's Sqrt, an RMSNorm's Reciprocal, and Log: with the
// operand's captured minimum > 0 (var + eps) each is at most |dY| times the derivative's largest
// value there; the reference's dX stays within it, a value written as 1e30 is beyond, and an
// operand that reaches 0 gives no bound.
TEST(Diagnosis, ValueBoundsOfDividingPointwiseGradients) {
  using M = std::optional<probes::Magnitude>;
  auto magnitude = [](const graph::Tensor& t) { return M(magnitude_of(t)); };
  std::mt19937 gen(23);
  std::uniform_real_distribution<float> pos(1e-5f, 4.0f), sym(-3.0f, 3.0f);
  for (const std::string of : {"Sqrt", "Reciprocal", "Log"}) {
    std::vector<float> dy(200), x(200), y(200);
    for (std::size_t i = 0; i < dy.size(); ++i) {
      dy[i] = sym(gen), x[i] = pos(gen);
      y[i] = of == "Sqrt" ? std::sqrt(x[i]) : of == "Log" ? std::log(x[i]) : 1.0f / x[i];
    }
    const graph::Tensor tdy = graph::Tensor::from_f32({200}, dy), ty = graph::Tensor::from_f32({200}, y),
                       tx = graph::Tensor::from_f32({200}, x);
    graph::Op op = make_op("g", "PointwiseGrad", {"dy", "y", "x"}, {"dx"});
    op.attrs["of"] = of;
    op.attrs["wrt"] = std::int64_t{0};
    std::vector<M> in{magnitude(tdy), magnitude(ty), magnitude(tx)};
    const auto out = graph::run_reference(op, std::vector<const graph::Tensor*>{&tdy, &ty, &tx}, graph::RefPrecision::F32).at(0);
    const auto bound = probes::value_bound(op, 0, in);
    ASSERT_TRUE(bound) << of;
    EXPECT_LE(magnitude(out)->max_abs, *bound * (1 + 1e-6)) << of;
    EXPECT_LT(*bound, 1e30 / 16) << of;
    in.back()->min = 0.0;  // the operand reaches 0: no bound
    EXPECT_FALSE(probes::value_bound(op, 0, in)) << of;
  }
}

TEST(Diagnosis, ValueBoundOfAdamUpdateHoldsForAnySecondMoment) {
  using M = std::optional<probes::Magnitude>;
  auto magnitude = [](const graph::Tensor& t) { return M(magnitude_of(t)); };
  std::mt19937 gen(17);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<float> p(64), g(64), m(64), v(64);
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] = u(gen), g[i] = u(gen) * 0.1f, m[i] = u(gen) * 0.05f;
      v[i] = trial % 2 ? 0.0f : std::fabs(u(gen)) * 1e-6f;  // none yet, or small
    }
    // Elements without a gradient this step (rows a batch did not touch) and no second moment
    // yet: the step is lr (b1 m / c1) / eps, the largest there is.
    for (std::size_t i = 0; i < p.size(); i += 9) g[i] = 0.0f, v[i] = 0.0f;
    const graph::Tensor tp = graph::Tensor::from_f32({64}, p), tg = graph::Tensor::from_f32({64}, g),
                       tm = graph::Tensor::from_f32({64}, m), tv = graph::Tensor::from_f32({64}, v);
    graph::Op op = make_op("upd", "AdamUpdate", {"p", "g", "m", "v"}, {"p2", "m2", "v2"});
    op.attrs["lr"] = 1e-3;
    op.attrs["step"] = static_cast<std::int64_t>(trial % 3 == 0 ? 1 : 50);
    op.attrs["weight_decay"] = trial % 4 == 0 ? 0.01 : 0.0;
    const std::vector<M> in{magnitude(tp), magnitude(tg), magnitude(tm), magnitude(tv)};
    const std::vector<const graph::Tensor*> args{&tp, &tg, &tm, &tv};
    const auto out = graph::run_reference(op, args, graph::RefPrecision::F32);
    for (std::uint16_t slot = 0; slot < 3; ++slot) {
      const auto bound = probes::value_bound(op, slot, in, std::nullopt, 1.0);
      ASSERT_TRUE(bound) << slot;
      EXPECT_LE(magnitude(out.at(slot))->max_abs, *bound * (1 + 1e-6)) << "trial " << trial << " slot " << slot;
      if (slot == 0) {
        EXPECT_LT(*bound, 1e38 / 16) << "a master weight written as 1e38 is beyond it";
      }
    }
    EXPECT_FALSE(probes::value_bound(op, 0, std::vector<M>{in[0], std::nullopt, in[2], in[3]}));
    EXPECT_FALSE(probes::value_bound(op, 0, std::vector<M>{in[0], in[1], std::nullopt, in[3]}));
  }
}

TEST(Diagnosis, ValueBoundOfBatchNormalizationWithANegativeRunningVariance) {
  using M = std::optional<probes::Magnitude>;
  auto magnitude = [](const graph::Tensor& t) { return M(magnitude_of(t)); };
  const graph::Shape shape{1, 2, 1, 4};
  const std::vector<float> x{3, -2, 0.5f, 1, 4, -4, 2, 0}, scale{1.5f, -0.5f}, bias{0.1f, 0}, mean{0.5f, -1},
      var{-0.9e-5f, 2};
  const graph::Tensor tx = graph::Tensor::from_f32(shape, x), ts = graph::Tensor::from_f32({2}, scale),
                      tb = graph::Tensor::from_f32({2}, bias), tm = graph::Tensor::from_f32({2}, mean),
                      tv = graph::Tensor::from_f32({2}, var);
  graph::Op op = make_op("bn", "BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
  op.attrs["epsilon"] = 1e-5;
  const std::vector<const graph::Tensor*> args{&tx, &ts, &tb, &tm, &tv};
  const auto y = graph::run_reference(op, args, graph::RefPrecision::F32).at(0);
  const std::vector<M> in{magnitude(tx), magnitude(ts), magnitude(tb), magnitude(tm), magnitude(tv)};
  const auto bound = probes::value_bound(op, 0, in);
  ASSERT_TRUE(bound);
  ASSERT_TRUE(std::isfinite(magnitude(y)->max_abs));
  EXPECT_LE(magnitude(y)->max_abs, *bound * (1 + 1e-6));
  // the variance taken as 0 would give a bound the kernel's values exceed
  EXPECT_GT(magnitude(y)->max_abs, 1.5 * (4 + 1) / std::sqrt(1e-5) + 0.1);
}

TEST(Diagnosis, ValueBoundsFollowTheArithmetic) {
  graph::Graph g = mlp();
  using M = std::optional<probes::Magnitude>;
  const std::vector<M> two{probes::Magnitude{3, 4, 16}, probes::Magnitude{0.5, 2, 8}};
  EXPECT_DOUBLE_EQ(*probes::value_bound(*g.find_op("fc1"), 0, two), 8.0);   // l2 * l2
  EXPECT_DOUBLE_EQ(*probes::value_bound(*g.find_op("add1"), 0, two), 3.5);  // sum of max |x|
  EXPECT_DOUBLE_EQ(*probes::value_bound(*g.find_op("relu1"), 0, std::vector<M>{two[0]}), 3.0);
  EXPECT_DOUBLE_EQ(*probes::value_bound(*g.find_op("softmax"), 0, std::vector<M>{two[0]}), 1.0);
  EXPECT_FALSE(probes::value_bound(*g.find_op("fc1"), 0, std::vector<M>{two[0], std::nullopt}));  // unknown input
  // BatchNorm (an alias) with running statistics: |scale| (|x| + |mean|) / sqrt(min var + eps) + |B|
  const graph::Op bn = make_op("bn", "BatchNorm", {"x", "s", "b", "m", "v"}, {"y"}, "model/bn");
  const std::vector<M> bn_in{probes::Magnitude{4, 8, -4, 16}, probes::Magnitude{1, 1, 1, 1},
                             probes::Magnitude{0.1, 0.1, 0.1, 1}, probes::Magnitude{0.2, 0.2, 0.2, 1},
                             probes::Magnitude{1, 1, 0.25, 1}};
  EXPECT_NEAR(*probes::value_bound(bn, 0, bn_in), 1.0 * 4.2 / std::sqrt(0.25 + 1e-5) + 0.1, 1e-9);
  // a running variance written below zero (a corrupted statistic): the bound follows it, and none
  // once var + eps can reach zero
  std::vector<M> neg = bn_in;
  neg[4]->min = -0.5e-5;
  EXPECT_NEAR(*probes::value_bound(bn, 0, neg), 1.0 * 4.2 / std::sqrt(0.5e-5) + 0.1, 1e-6);
  neg[4]->min = -1e-5;
  EXPECT_FALSE(probes::value_bound(bn, 0, neg));
  neg[4]->min = -2.0;
  EXPECT_FALSE(probes::value_bound(bn, 0, neg));
  // loss gradients: dLoss * (softmax - onehot) and 2 (p - t) dLoss; mean with class weights divides
  // by a weight sum the magnitudes do not give
  const std::vector<M> sce_in{probes::Magnitude{128, 128, 128, 1}, probes::Magnitude{9, 20, -9, 40},
                              probes::Magnitude{9, 20, 0, 4}, probes::Magnitude{2, 3, 0.5, 10}};
  graph::Op sce = make_op("dl", "SoftmaxCrossEntropyLossGrad", {"g", "scores", "labels"}, {"dx"}, "model/dl");
  EXPECT_DOUBLE_EQ(*probes::value_bound(sce, 0, std::span(sce_in).first(3)), 128.0);
  sce.inputs.push_back("w");
  sce.attrs["reduction"] = std::string("sum");
  EXPECT_DOUBLE_EQ(*probes::value_bound(sce, 0, sce_in), 256.0);
  sce.attrs["reduction"] = std::string("mean");
  EXPECT_FALSE(probes::value_bound(sce, 0, sce_in));
  const graph::Op mse = make_op("dm", "MSELossGrad", {"g", "p", "t"}, {"dp"}, "model/dm");
  EXPECT_DOUBLE_EQ(*probes::value_bound(mse, 0, std::span(sce_in).first(3)), 2 * (9 + 9) * 128.0);
}

namespace {

graph::Tensor i64_tensor(const graph::Shape& shape, const std::vector<std::int64_t>& v) {
  graph::Tensor t(graph::TensorDesc{graph::DType::I64, shape, graph::Format::ND});
  std::copy(v.begin(), v.end(), t.data<std::int64_t>().begin());
  return t;
}

std::vector<float> pattern(std::size_t n, int mul, int mod, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<int>(i * mul % mod) - mod / 2) * scale;
  return v;
}

// The op's reference result on `args` stays within value_bound() with dot_length() from a graph
// holding the inputs' shapes, and comes within `within` of it (the bound is not vacuous; 0: not
// checked); without the length there is no bound unless `bound_without_length`.
void expect_bound_holds(const graph::Op& op, const std::vector<const graph::Tensor*>& args, double within,
                        bool bound_without_length = false) {
  using M = std::optional<probes::Magnitude>;
  graph::Graph g("bounds");
  std::vector<M> in;
  for (std::size_t i = 0; i < args.size(); ++i) {
    g.add_tensor({op.inputs[i], args[i]->desc(), graph::TensorKind::Input});
    in.push_back(args[i]->dtype() == graph::DType::F32 ? M(magnitude_of(*args[i])) : std::nullopt);
  }
  const auto len = probes::dot_length(g, op);
  ASSERT_TRUE(len) << op.type;
  const auto y = graph::run_reference(op, args, graph::RefPrecision::F32).at(0);
  const auto bound = probes::value_bound(op, 0, in, len);
  ASSERT_TRUE(bound) << op.type;
  EXPECT_LE(magnitude_of(y).max_abs, *bound * (1 + 1e-6)) << op.type;
  if (within > 0) {
    EXPECT_GT(magnitude_of(y).max_abs, *bound / within) << op.type;
  }
  EXPECT_EQ(probes::value_bound(op, 0, in).has_value(), bound_without_length) << op.type;
}

}  // namespace

// Einsum (the mixture-of-experts' expert product and its mixing, and their gradients, are
// Einsums): each output sums the products over the labels it lacks.
TEST(Diagnosis, ValueBoundOfEinsum) {
  const graph::Tensor x = graph::Tensor::from_f32({6, 8}, pattern(48, 7, 11, 0.5f));
  const graph::Tensor experts = graph::Tensor::from_f32({4, 8, 8}, pattern(256, 5, 13, 0.25f));
  graph::Op expert = make_op("e", "Einsum", {"x", "experts"}, {"y"});
  expert.attrs["equation"] = std::string("td,edh->teh");
  expect_bound_holds(expert, {&x, &experts}, 16);
  const std::vector<float> gates{1, 0, 0.5f, 0.5f, 0.9f, 0.1f, 0, 1, 0.3f, 0.7f, 1, 0};
  const graph::Tensor gate = graph::Tensor::from_f32({6, 2}, gates);
  const graph::Tensor chosen = graph::Tensor::from_f32({6, 2, 8}, pattern(96, 3, 17, 4.0f));
  graph::Op mix = make_op("m", "Einsum", {"gate", "chosen"}, {"y"});
  mix.attrs["equation"] = std::string("tk,tkh->th");
  expect_bound_holds(mix, {&gate, &chosen}, 16);
  graph::Op trace = make_op("t", "Einsum", {"sq"}, {"y"});  // a diagonal summed: 5 terms
  trace.attrs["equation"] = std::string("ii->");
  const graph::Tensor sq = graph::Tensor::from_f32({5, 5}, pattern(25, 1, 3, 2.0f));
  expect_bound_holds(trace, {&sq}, 16);
}

// SoftmaxGrad over rows of n, also for a Y that is no distribution (a corrupted softmax result);
// LogSoftmaxGrad has none (exp(Y) needs Y's maximum, which magnitudes do not give).
TEST(Diagnosis, ValueBoundOfSoftmaxGradients) {
  const graph::Tensor x = graph::Tensor::from_f32({3, 5}, pattern(15, 7, 9, 1.5f));
  const graph::Tensor dy = graph::Tensor::from_f32({3, 5}, pattern(15, 4, 7, 3.0f));
  graph::Op fwd = make_op("s", "Softmax", {"x"}, {"y"});
  fwd.attrs["axis"] = std::int64_t{-1};
  const std::vector<const graph::Tensor*> fargs{&x};
  const graph::Tensor y = graph::run_reference(fwd, fargs, graph::RefPrecision::F32).at(0);
  graph::Op grad = make_op("g", "SoftmaxGrad", {"dy", "y"}, {"dx"});
  grad.attrs["axis"] = std::int64_t{-1};
  expect_bound_holds(grad, {&dy, &y}, 32, true);  // Cauchy-Schwarz without n
  grad.attrs["axis"] = std::int64_t{1};
  const graph::Tensor bad_y = graph::Tensor::from_f32({3, 5}, pattern(15, 2, 5, 30.0f));
  expect_bound_holds(grad, {&dy, &bad_y}, 0, true);
  using M = std::optional<probes::Magnitude>;
  const graph::Op log_grad = make_op("l", "LogSoftmaxGrad", {"dy", "y"}, {"dx"});
  EXPECT_FALSE(probes::value_bound(log_grad, 0, std::vector<M>{magnitude_of(dy), magnitude_of(y)}, 5.0));
}

// The scatter-adds of GatherND's and GatherElements' gradients with indices that repeat: an
// element of dData sums one dY value per index that selects it.
TEST(Diagnosis, ValueBoundOfGatherGradients) {
  const graph::Tensor dy = graph::Tensor::from_f32({2, 3, 4}, pattern(24, 5, 7, 2.0f));
  const graph::Tensor idx = i64_tensor({2, 3, 1}, {1, 1, 1, 0, 2, 0});  // batch 0 selects slice 1 three times
  graph::Op nd = make_op("g", "GatherNDGrad", {"dy", "i"}, {"dx"});
  nd.attrs["batch_dims"] = std::int64_t{1};
  nd.attrs["data_shape"] = std::vector<std::int64_t>{2, 3, 4};
  expect_bound_holds(nd, {&dy, &idx}, 3.01);
  const std::vector<float> dys{5, 5, 5, -1, 2, 0.5f};
  const graph::Tensor dy2 = graph::Tensor::from_f32({2, 3}, dys);
  const graph::Tensor idx2 = i64_tensor({2, 3}, {4, 4, 4, 0, 1, 2});  // row 0 adds three values into element 4
  graph::Op el = make_op("e", "GatherElementsGrad", {"dy", "i"}, {"dx"});
  el.attrs["axis"] = std::int64_t{1};
  el.attrs["data_shape"] = std::vector<std::int64_t>{2, 6};
  expect_bound_holds(el, {&dy2, &idx2}, 1.01);
}
