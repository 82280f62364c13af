#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "graph/passes.h"
#include "tests/probes/probe_test_util.h"
#include "probes/compare.h"

using namespace probe_test;
using probes::CompareCriteria;
using probes::compute_metrics;
using probes::judge;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const graph::Op& the_fused(const graph::Graph& g) {
  for (const auto& op : g.ops())
    if (!op.fused_from.empty()) return op;
  throw std::runtime_error("no fused op");
}
}  // namespace

TEST(Metrics, HandComputedValues) {
  std::vector<double> a{1, 2, 3, 4}, g{1, 2, 3, 5};
  auto m = compute_metrics(a, g, graph::DType::F32);
  EXPECT_EQ(m.count, 4u);
  EXPECT_NEAR(m.cosine, 34.0 / std::sqrt(30.0 * 39.0), 1e-15);  // 0.99400...
  EXPECT_DOUBLE_EQ(m.max_abs_err, 1.0);
  EXPECT_DOUBLE_EQ(m.max_rel_err, 0.2);
  EXPECT_DOUBLE_EQ(m.mean_rel_err, 0.05);
  EXPECT_DOUBLE_EQ(m.rmse, 0.5);
  EXPECT_DOUBLE_EQ(m.within_0_1pct, 0.75);
  EXPECT_DOUBLE_EQ(m.within_0_5pct, 0.75);
  EXPECT_EQ(m.max_ulp, 0x200000u);  // 4.0f = 0x40800000, 5.0f = 0x40A00000
  EXPECT_EQ(m.worst_element, 3u);
  EXPECT_EQ(m.nonfinite_mismatch, 0u);

  // relative thresholds: 0.3% error is within 0.5% but not within 0.1%
  std::vector<double> b{1.003, 2.0}, h{1.0, 2.0};
  m = compute_metrics(b, h, graph::DType::F64);
  EXPECT_DOUBLE_EQ(m.within_0_1pct, 0.5);
  EXPECT_DOUBLE_EQ(m.within_0_5pct, 1.0);
}

TEST(Metrics, UlpDistanceInTheDeviceDtype) {
  EXPECT_EQ(probes::ulp_distance(1.0, 1.0009765625, graph::DType::F16), 1u);  // one FP16 ulp at 1.0
  EXPECT_EQ(probes::ulp_distance(1.0, 1.0004, graph::DType::F16), 0u);        // rounds to 1.0 in FP16
  EXPECT_EQ(probes::ulp_distance(0.0, -0.0, graph::DType::F16), 0u);
  EXPECT_EQ(probes::ulp_distance(1.0, -1.0, graph::DType::F16), 2u * 0x3C00u);
  EXPECT_EQ(probes::ulp_distance(65504.0, std::numeric_limits<double>::infinity(), graph::DType::F16), 1u);
  EXPECT_EQ(probes::ulp_distance(kNaN, 1.0, graph::DType::F32), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(probes::ulp_distance(1.0, 1.0 + 0x1p-7, graph::DType::BF16), 1u);
  EXPECT_EQ(probes::ulp_distance(1.0, std::nextafter(1.0, 2.0), graph::DType::F64), 1u);
  // a tensor of FP16 values against an FP64 golden: golden rounded to FP16 first
  auto dev = f16({3}, {1.0f, 2.0f, 3.0f});
  auto gold = graph::Tensor::from_f64({3}, std::vector<double>{1.0001, 2.0, 3.0 + 3 * 0x1p-10}, graph::DType::F64);
  auto m = compute_metrics(dev, gold, graph::DType::F16);
  EXPECT_EQ(m.max_ulp, 2u);  // 3 + 3*2^-10 is 1.5 ulps (ulp at 3 is 2^-9) -> rounds to 2 ulps (even)
}

TEST(Metrics, NonFiniteAndZeroVectors) {
  std::vector<double> z{0, 0}, nz{0, 1};
  EXPECT_DOUBLE_EQ(compute_metrics(z, z, graph::DType::F32).cosine, 1.0);
  EXPECT_DOUBLE_EQ(compute_metrics(z, nz, graph::DType::F32).cosine, 0.0);
  std::vector<double> n1{kNaN, 1}, n2{kNaN, 1}, n3{1, 1};
  auto same = compute_metrics(n1, n2, graph::DType::F32);
  EXPECT_EQ(same.nonfinite_mismatch, 0u);
  EXPECT_DOUBLE_EQ(same.max_abs_err, 0.0);
  auto diff = compute_metrics(n1, n3, graph::DType::F32);
  EXPECT_EQ(diff.nonfinite_mismatch, 1u);
  EXPECT_TRUE(std::isinf(diff.max_abs_err));
  EXPECT_FALSE(judge(diff, graph::DType::F32, {}).pass);
  EXPECT_THROW(compute_metrics(std::vector<double>{1}, std::vector<double>{1, 2}, graph::DType::F32), std::invalid_argument);
}

TEST(Verdict, MsprobeAccuracyRule) {
  CompareCriteria c;
  c.mean_rel_err.clear();  // isolate the cosine / max abs error rule
  // cosine 0.958 but every error tiny: reached (the rule needs both cosine < 0.99 AND max_abs_err > 0.001)
  std::vector<double> a{1e-4, 0}, g{1e-4, 0.3e-4};
  auto m = compute_metrics(a, g, graph::DType::F32);
  EXPECT_NEAR(m.cosine, 1 / std::sqrt(1.09), 1e-12);
  EXPECT_TRUE(judge(m, graph::DType::F32, c).pass);
  // same shape of error, 100x larger: not reached
  std::vector<double> a2{1e-2, 0}, g2{1e-2, 0.3e-2};
  auto v = judge(compute_metrics(a2, g2, graph::DType::F32), graph::DType::F32, c);
  EXPECT_FALSE(v.pass);
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_NE(v.reasons[0].find("cosine"), std::string::npos);
  // cosine below 0.9 always fails; max abs error above 1 always fails
  std::vector<double> a3{1e-4, 0}, g3{0, 1e-4};
  EXPECT_FALSE(judge(compute_metrics(a3, g3, graph::DType::F32), graph::DType::F32, c).pass);
  std::vector<double> a4{1000, 2000}, g4{1000, 2001.5};
  auto m4 = compute_metrics(a4, g4, graph::DType::F32);
  EXPECT_GT(m4.cosine, 0.99999);
  EXPECT_FALSE(judge(m4, graph::DType::F32, c).pass);
  // default per-dtype mean relative error bound (FP16 2^-10)
  CompareCriteria d;
  std::vector<double> a5{1.0, 1.0}, g5{1.0, 1.0 + 0x1p-11};
  EXPECT_TRUE(judge(compute_metrics(a5, g5, graph::DType::F16), graph::DType::F16, d).pass);
  std::vector<double> a6{1.0, 1.0}, g6{1.0, 1.0 + 0x1p-8};
  EXPECT_FALSE(judge(compute_metrics(a6, g6, graph::DType::F16), graph::DType::F16, d).pass);
  d.max_ulp = 0;  // one FP16 ulp apart: passes the relative bound, fails a zero-ulp bound
  std::vector<double> a7{1.0, 1.0}, g7{1.0, 1.0 + 0x1p-10};
  EXPECT_TRUE(judge(compute_metrics(a7, g7, graph::DType::F16), graph::DType::F16, CompareCriteria{}).pass);
  EXPECT_FALSE(judge(compute_metrics(a7, g7, graph::DType::F16), graph::DType::F16, d).pass);
}

TEST(CompareOp, ReplayOnTheReferenceAndFirstDivergence) {
  graph::Graph g = mlp();
  const graph::Op& relu = *g.find_op("relu1");
  auto x = f16({4}, {-1.0f, 2.0f, 0.5f, -0.25f});
  auto good = f16({4}, {0.0f, 2.0f, 0.5f, 0.0f});
  auto bad = f16({4}, {0.0f, 2.5f, 0.5f, 0.0f});
  const graph::Tensor* ins[] = {&x};
  const graph::Tensor* outs_good[] = {&good};
  const graph::Tensor* outs_bad[] = {&bad};
  auto r = probes::compare_op(relu, ins, outs_good, {});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].pass) << fmt::format("{}", fmt::join(r[0].reasons, "; "));
  EXPECT_EQ(r[0].device_dtype, graph::DType::F16);
  r = probes::compare_op(relu, ins, outs_bad, {});
  EXPECT_FALSE(r[0].pass);
  EXPECT_DOUBLE_EQ(r[0].metrics.max_abs_err, 0.5);

  // FP16 matmul rounded once from the exact result passes the default criteria
  const graph::Op& fc1 = *g.find_op("fc1");
  auto xx = f16({2, 8}, ramp(16, 0.3f));
  const auto& w1 = g.initializers().at("w1");
  const graph::Tensor* mm_ins[] = {&xx, &w1};
  auto exact = graph::run_reference(fc1, mm_ins, graph::RefPrecision::F64);
  auto ev = exact[0].to_f64();
  auto dev = graph::Tensor::from_f64(exact[0].shape(), ev, graph::DType::F16);
  const graph::Tensor* mm_out[] = {&dev};
  auto rm = probes::compare_op(fc1, mm_ins, mm_out, {});
  EXPECT_TRUE(rm[0].pass) << fmt::format("{}", fmt::join(rm[0].reasons, "; "));
  EXPECT_LE(rm[0].metrics.max_ulp, 1u);

  std::vector<probes::OpComparison> cs(3);
  cs[0].op = "fc2", cs[0].op_id = g.find_op("fc2")->id, cs[0].step = 1, cs[0].pass = false;
  cs[1].op = "add1", cs[1].op_id = g.find_op("add1")->id, cs[1].step = 1, cs[1].pass = false;
  cs[2].op = "relu1", cs[2].op_id = g.find_op("relu1")->id, cs[2].step = 2, cs[2].pass = false;
  const auto* first = probes::first_divergence(cs, g);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->op, "add1");
  cs[1].pass = true;
  EXPECT_EQ(probes::first_divergence(cs, g)->op, "fc2");
}

// An FP32 MatMul whose results cancel to rounding level: x @ (I - 1/n) with x all ones is 0
// exactly, the device's FP32 sums leave about 1e-7. Cosine and relative errors of such noise say
// nothing, so the comparison passes; an error above rounding at the operands' scale still fails.
TEST(CompareOp, ResultsThatCancelToRoundingLevelPassWhileRealErrorsFail) {
  constexpr int n = 10;
  graph::Op mm;
  mm.name = "center";
  mm.type = "MatMul";
  mm.inputs = {"x", "w"};
  mm.outputs = {"y"};
  std::vector<double> w(n * n), x(4 * n, 1.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) w[static_cast<std::size_t>(i * n + j)] = (i == j ? 1.0 : 0.0) - 1.0 / n;
  const auto xt = graph::Tensor::from_f64({4, n}, x, graph::DType::F32);
  const auto wt = graph::Tensor::from_f64({n, n}, w, graph::DType::F32);
  const graph::Tensor* ins[] = {&xt, &wt};
  const auto device = graph::run_reference(mm, ins, graph::RefPrecision::F32);  // FP32 sums: rounding residue
  const graph::Tensor* outs[] = {&device[0]};
  auto r = probes::compare_op(mm, ins, outs, {});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_GT(r[0].metrics.max_abs_err, 0.0);  // the residue is there ...
  EXPECT_LT(r[0].metrics.cosine, 0.9);       // ... and meaningless as a direction
  EXPECT_TRUE(r[0].pass) << fmt::format("{}", fmt::join(r[0].reasons, "; "));
  // The same output off by 1e-4 somewhere (far above FP32 rounding at magnitude 1) fails.
  std::vector<double> off = device[0].to_f64();
  off[3] += 1e-4;
  const auto wrong = graph::Tensor::from_f64({4, n}, off, graph::DType::F32);
  const graph::Tensor* outs_wrong[] = {&wrong};
  r = probes::compare_op(mm, ins, outs_wrong, {});
  EXPECT_FALSE(r[0].pass);
  // judge() alone: within the floor only the absolute checks apply.
  probes::Metrics m;
  m.cosine = 0.1;
  m.max_abs_err = 1e-7;
  m.mean_rel_err = 1.0;
  CompareCriteria c;
  EXPECT_FALSE(judge(m, graph::DType::F32, c).pass);
  EXPECT_TRUE(judge(m, graph::DType::F32, c, 2e-7).pass);
  m.nonfinite_mismatch = 1;
  EXPECT_FALSE(judge(m, graph::DType::F32, c, 2e-7).pass);
  const graph::Tensor* none[] = {nullptr};
  EXPECT_DOUBLE_EQ(probes::rounding_noise_floor(ins, device[0], graph::DType::F32), 16 * 0x1p-23);
  EXPECT_DOUBLE_EQ(probes::rounding_noise_floor(none, wt, graph::DType::F16), 16 * 0x1p-10 * static_cast<double>(0.9f));
}

TEST(FusedDecomposition, PartialDumpNamesTheInnerOp) {
  graph::Graph g("ln_relu");
  g.add_tensor({"x", {graph::DType::F16, {2, 8}, graph::Format::ND}, graph::TensorKind::Input});
  g.mark_input("x");
  g.add_initializer("gamma", f16({8}, std::vector<float>(8, 1.0f)));
  g.add_initializer("beta", f16({8}, std::vector<float>(8, 0.0f)));
  g.add_op(make_op("ln", "LayerNormalization", {"x", "gamma", "beta"}, {"ln:0"}));
  g.add_op(make_op("relu", "Relu", {"ln:0"}, {"y"}));
  g.mark_output("y");
  graph::Graph fused = graph::fuse_graph(g);
  const graph::Op& f = the_fused(fused);
  ASSERT_EQ(f.fused_body.size(), 2u);
  const std::string inner_out = f.fused_body[0].outputs[0];  // "<fused>/ln:0"

  auto x = f16({2, 8}, ramp(16, 0.7f));
  const auto& gamma = g.initializers().at("gamma");
  const auto& beta = g.initializers().at("beta");
  const graph::Tensor* ins[] = {&x, &gamma, &beta};
  // the device's LayerNorm stage is wrong in one element; ReLU is applied correctly on top of it
  const graph::Tensor* ln_ins[] = {&x, &gamma, &beta};
  auto ln_ref = graph::run_reference(f.fused_body[0], ln_ins, graph::RefPrecision::F64)[0].to_f32();
  ln_ref[3] += 3.0f;
  auto ln_dev = f16({2, 8}, ln_ref);
  std::vector<float> y(ln_ref.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::max(0.0f, ln_dev.to_f32()[i]);
  auto y_dev = f16({2, 8}, y);
  const graph::Tensor* outs[] = {&y_dev};
  std::map<std::string, graph::Tensor> partial{{inner_out, ln_dev}};

  auto r = probes::compare_op(f, ins, outs, {}, true, &partial);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].pass);
  ASSERT_EQ(r[0].inner.size(), 2u);
  EXPECT_EQ(r[0].inner[0].basis, "partial_dump");
  EXPECT_FALSE(r[0].inner[0].pass);
  EXPECT_TRUE(r[0].inner[1].pass) << fmt::format("{}", fmt::join(r[0].inner[1].reasons, "; "));
  EXPECT_EQ(r[0].inner[1].basis, "device_output");
  EXPECT_EQ(r[0].culprit_inner_op, "ln");
  EXPECT_EQ(r[0].culprit_basis, "partial_dump");
}

TEST(FusedDecomposition, Fp16EmulationNamesTheOverflowingInnerOp) {
  graph::Graph g("mm_add_gelu");
  g.add_tensor({"x", {graph::DType::F16, {2, 8}, graph::Format::ND}, graph::TensorKind::Input});
  g.mark_input("x");
  g.add_initializer("w", f16({8, 4}, std::vector<float>(32, 200.0f)));
  g.add_initializer("b", f16({4}, std::vector<float>(4, -1.0f)));
  g.add_op(make_op("mm", "MatMul", {"x", "w"}, {"mm:0"}));
  g.add_op(make_op("add", "Add", {"mm:0", "b"}, {"add:0"}));
  g.add_op(make_op("gelu", "Gelu", {"add:0"}, {"y"}));
  g.mark_output("y");
  graph::Graph fused = graph::fuse_graph(g);
  const graph::Op& f = the_fused(fused);
  ASSERT_EQ(f.fused_body.size(), 3u);
  auto x = f16({2, 8}, std::vector<float>(16, 200.0f));  // 8 * 200 * 200 = 320000 > 65504
  const graph::Tensor* ins[] = {&x, &g.initializers().at("w"), &g.initializers().at("b")};
  auto y_dev = f16({2, 4}, std::vector<float>(8, std::numeric_limits<float>::infinity()));
  const graph::Tensor* outs[] = {&y_dev};
  auto r = probes::compare_op(f, ins, outs, {});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].pass);
  EXPECT_EQ(r[0].culprit_inner_op, "mm");
  EXPECT_EQ(r[0].culprit_basis, "emulated_float16");
  ASSERT_EQ(r[0].inner.size(), 3u);
  EXPECT_GT(r[0].inner[0].metrics.nonfinite_mismatch, 0u);
}
