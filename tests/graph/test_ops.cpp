// Op registry, shape inference errors and reference kernels on hand-checked values. (The ONNX
// conformance cases check the ONNX ops broadly; gradients are checked in test_autodiff*.)
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "graph/format.h"
#include "graph/op_registry.h"
#include "tests/graph/grad_check.h"
#include "tests/graph/op_test_util.h"

namespace probelab::graph {
namespace {

using testing::error_of;
using testing::int64_tensor;
using testing::make_op;
using testing::run;

Tensor f32(const Shape& s, std::vector<float> v) { return Tensor::from_f32(s, v); }

TEST(OpRegistry, AliasesResolveToCanonicalOnnxNames) {
  const OpRegistry& r = OpRegistry::instance();
  const std::pair<const char*, const char*> aliases[] = {
      {"Conv2d", "Conv"}, {"LayerNorm", "LayerNormalization"}, {"BatchNorm", "BatchNormalization"},
      {"AvgPool", "AveragePool"}, {"CrossEntropyLoss", "SoftmaxCrossEntropyLoss"}, {"Embedding", "Gather"}};
  for (const auto& [alias, canonical] : aliases) {
    ASSERT_NE(r.find(alias), nullptr) << alias;
    EXPECT_EQ(r.find(alias)->type, canonical);
    EXPECT_EQ(r.find(alias), r.find(canonical));
  }
  const auto types = r.types();
  EXPECT_TRUE(std::is_sorted(types.begin(), types.end()));
  EXPECT_EQ(std::count(types.begin(), types.end(), "Conv2d"), 0) << "aliases are not listed as types";
}

TEST(OpRegistry, EveryDefinitionIsComplete) {
  const char* forward[] = {"MatMul", "Gemm", "Conv", "Add", "Sub", "Mul", "Div", "Relu", "Gelu", "Sigmoid", "Tanh",
                           "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization", "MaxPool",
                           "AveragePool", "Reshape", "Flatten", "Transpose", "Concat", "Slice", "ReduceSum",
                           "ReduceMean", "SoftmaxCrossEntropyLoss", "MSELoss", "Gather", "Identity"};
  for (const char* t : forward) {
    const OpDef* d = OpRegistry::instance().find(t);
    ASSERT_NE(d, nullptr) << t;
    EXPECT_TRUE(d->gradient) << t << " has no gradient";
    EXPECT_FALSE(d->backward) << t;
  }
  for (const auto& [name, d] : OpRegistry::instance().all()) {
    EXPECT_FALSE(d.doc.empty()) << name;
    if (name.starts_with("Fused")) continue;  // fusion types are defined with the fusion passes
    EXPECT_TRUE(d.infer) << name;
    // Collectives have no single-rank reference: their result depends on every rank's data.
    const bool collective = name == "AllReduce" || name == "ReduceScatter" || name == "AllGather" || name == "Broadcast";
    EXPECT_EQ(static_cast<bool>(d.reference), !collective) << name;
    if (d.max_inputs != 0) {  // ConstantOfShape and Range take none (their inputs are attributes)
      EXPECT_FALSE(d.input_names.empty()) << name;
    }
    for (const AttrSpec& a : d.attrs) EXPECT_FALSE(a.doc.empty()) << name << "." << a.name;
    if (d.backward) {
      EXPECT_FALSE(d.gradient) << name << ": backward ops are not differentiated again";
    }
  }
  for (const char* t : {"SgdUpdate", "AdamUpdate"}) EXPECT_FALSE(OpRegistry::instance().get(t).gradient) << t;
  const AttrSpec* group = OpRegistry::instance().get("Conv").attr("group");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(std::get<std::int64_t>(*group->default_value), 1);
}

TEST(OpRegistry, UnknownTypesAndDuplicatesAreErrors) {
  try {
    OpRegistry::instance().get("Conv3x3");
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("Conv3x3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("MatMul"), std::string::npos) << "lists known types";
  }
  OpDef dup;
  dup.type = "Relu";
  EXPECT_THROW(OpRegistry::instance().add(dup), GraphError);
  OpDef alias_clash;
  alias_clash.type = "MyConv";
  alias_clash.aliases = {"Conv2d"};
  EXPECT_THROW(OpRegistry::instance().add(alias_clash), GraphError);
  EXPECT_EQ(OpRegistry::instance().find("MyConv"), nullptr);
}

OpDef negate_def() {
  OpDef d;
  d.type = "TestNegate";
  d.doc = "y = -x";
  d.input_names = {"X"};
  d.infer = [](const Op&, std::span<const TensorDesc> in) { return std::vector<TensorDesc>{in[0]}; };
  d.reference = [](const Op&, std::span<const Tensor* const> in, std::span<Tensor> out, RefPrecision) {
    auto x = in[0]->data<float>();
    auto y = out[0].data<float>();
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = -x[i];
  };
  return d;
}
const OpRegistrar kNegate{negate_def()};

TEST(OpRegistry, StaticRegistrarAddsATypeUsableByTheReference) {
  const Tensor x = f32({2}, {1.5f, -2.0f});
  const auto y = run(make_op("TestNegate", 1), {&x});
  EXPECT_EQ(y[0].to_f32(), (std::vector<float>{-1.5f, 2.0f}));
}

TEST(ShapeInference, ErrorsNameTheOpAndWhatWasExpected) {
  const Tensor a = f32({2, 3}, std::vector<float>(6, 1)), b = f32({4, 5}, std::vector<float>(20, 1));
  std::string e = error_of(make_op("MatMul", 2), {&a, &b});
  EXPECT_NE(e.find("MatMul 't'"), std::string::npos) << e;
  EXPECT_NE(e.find("K = 3"), std::string::npos) << e;
  const Tensor x = f32({1, 3, 4, 4}, std::vector<float>(48, 1)), w = f32({2, 2, 3, 3}, std::vector<float>(36, 1));
  e = error_of(make_op("Conv2d", 2), {&x, &w});
  EXPECT_NE(e.find("C/group = 3"), std::string::npos) << e;
  e = error_of(make_op("Softmax", 1, {{"axis", std::int64_t{2}}}), {&a});
  EXPECT_NE(e.find("axis 2 is out of range for rank 2"), std::string::npos) << e;
  e = error_of(make_op("Reshape", 1, {{"shape", std::vector<std::int64_t>{4, -1}}}), {&a});
  EXPECT_NE(e.find("cannot infer"), std::string::npos) << e;
  e = error_of(make_op("Add", 2), {&a, &b});
  EXPECT_NE(e.find("do not broadcast"), std::string::npos) << e;
  e = error_of(make_op("MaxPool", 1), {&x});
  EXPECT_NE(e.find("kernel_shape"), std::string::npos) << e;
}

TEST(Kernels, MatMulBroadcastsBatchesAndPromotesVectors) {
  const Tensor a = f32({2, 1, 1, 2}, {1, 2, 3, 4}), b = f32({3, 2, 1}, {1, 1, 2, 0, 0, 3});
  const auto y = run(make_op("MatMul", 2), {&a, &b});
  EXPECT_EQ(y[0].shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(y[0].to_f32(), (std::vector<float>{3, 2, 6, 7, 6, 12}));
  const Tensor v = f32({2}, {1, -1});
  const auto yv = run(make_op("MatMul", 2), {&v, &b});
  EXPECT_EQ(yv[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(yv[0].to_f32(), (std::vector<float>{0, 2, -3}));
}

TEST(Kernels, ConvWithStridePadAndBias) {
  std::vector<float> xs(16);
  for (int i = 0; i < 16; ++i) xs[i] = float(i);
  const Tensor x = f32({1, 1, 4, 4}, xs), w = f32({1, 1, 2, 2}, {1, 1, 1, 1}), b = f32({1}, {0.5f});
  const auto y = run(make_op("Conv", 3, {{"strides", std::vector<std::int64_t>{2, 2}},
                                         {"pads", std::vector<std::int64_t>{1, 1, 0, 0}}}),
                     {&x, &w, &b});
  EXPECT_EQ(y[0].shape(), (Shape{1, 1, 2, 2}));
  // windows (rows -1..0, cols -1..0) = x00; (-1..0, 1..2) = x01 + x02; (1..2, -1..0) = x10 + x20; ...
  EXPECT_EQ(y[0].to_f32(), (std::vector<float>{0.5f, 3.5f, 12.5f, 30.5f}));
}

TEST(Kernels, GeluBothForms) {
  const Tensor x = f32({3}, {-1, 0, 1});
  const auto erf = run(make_op("Gelu", 1), {&x}, RefPrecision::F64)[0].to_f64();
  EXPECT_NEAR(erf[0], -0.15865525393145707, 1e-15);
  EXPECT_NEAR(erf[2], 0.8413447460685429, 1e-15);
  const auto th = run(make_op("Gelu", 1, {{"approximate", std::string("tanh")}}), {&x}, RefPrecision::F64)[0].to_f64();
  EXPECT_NEAR(th[2], 0.8411919906082768, 1e-15);
  EXPECT_NE(error_of(make_op("Gelu", 1, {{"approximate", std::string("fast")}}), {&x}).find("approximate"),
            std::string::npos);
}

TEST(Kernels, NanPropagatesThroughReluAndMaxPool) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = f32({1, 1, 2, 2}, {1, nan, -3, 2});
  const auto r = run(make_op("Relu", 1), {&x})[0].to_f32();
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_EQ(r[2], 0.0f);
  const auto m = run(make_op("MaxPool", 1, {{"kernel_shape", std::vector<std::int64_t>{2, 2}}}, 2), {&x});
  EXPECT_TRUE(std::isnan(m[0].to_f32()[0]));
  EXPECT_EQ(m[1].data<std::int64_t>()[0], 1);
}

TEST(Kernels, MaxPoolIndicesInBothStorageOrders) {
  const Tensor x = f32({1, 2, 2, 3}, {0, 9, 1, 2, 3, 4, /*c1*/ 5, 0, 0, 0, 0, 8});
  Attrs a{{"kernel_shape", std::vector<std::int64_t>{2, 3}}};
  auto y = run(make_op("MaxPool", 1, a, 2), {&x});
  EXPECT_EQ(y[0].to_f32(), (std::vector<float>{9, 8}));
  EXPECT_EQ(std::vector<std::int64_t>(y[1].data<std::int64_t>().begin(), y[1].data<std::int64_t>().end()),
            (std::vector<std::int64_t>{1, 11}));
  a["storage_order"] = std::int64_t{1};  // column-major: (h, w) -> w * H + h
  y = run(make_op("MaxPool", 1, a, 2), {&x});
  EXPECT_EQ(y[1].data<std::int64_t>()[0], 2);
  EXPECT_EQ(y[1].data<std::int64_t>()[1], 6 + 5);
}

TEST(Kernels, IntegerArithmeticBroadcastsAndTruncates) {
  const Tensor a = int64_tensor({2, 2}, {7, -7, 9, 0}), b = int64_tensor({2}, {2, -2});
  auto y = run(make_op("Div", 2), {&a, &b});
  EXPECT_EQ(y[0].dtype(), DType::I64);
  EXPECT_EQ(std::vector<std::int64_t>(y[0].data<std::int64_t>().begin(), y[0].data<std::int64_t>().end()),
            (std::vector<std::int64_t>{3, 3, 4, 0}));
  const Tensor z = int64_tensor({1}, {0});
  EXPECT_NE(error_of(make_op("Div", 2), {&a, &z}).find("division by zero"), std::string::npos);
}

TEST(Kernels, LossesAndNormalisation) {
  const Tensor p = f32({4}, {1, 2, 3, 4}), t = f32({4}, {1, 0, 3, 8});
  EXPECT_FLOAT_EQ(run(make_op("MSELoss", 2), {&p, &t})[0].to_f32()[0], (0 + 4 + 0 + 16) / 4.0f);
  const Tensor logits = f32({2, 3}, {0, 0, 0, 1, 2, 3});
  const Tensor labels = int64_tensor({2}, {1, 2});
  const double l1 = std::log(3.0), l2 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0;
  EXPECT_NEAR(run(make_op("CrossEntropyLoss", 2), {&logits, &labels}, RefPrecision::F64)[0].to_f64()[0],
              (l1 + l2) / 2, 1e-12);
  const Tensor bad = int64_tensor({2}, {1, 3});
  EXPECT_NE(error_of(make_op("CrossEntropyLoss", 2), {&logits, &bad}).find("outside [0, 3)"), std::string::npos);
  const Tensor x = f32({2, 4}, {1, 2, 3, 4, -1, 0, 0, 5}), s = f32({4}, {1, 1, 1, 1});
  const auto y = run(make_op("LayerNorm", 2), {&x, &s}, RefPrecision::F64)[0].to_f64();
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 4; ++j) m += y[r * 4 + j] / 4;
    for (int j = 0; j < 4; ++j) v += (y[r * 4 + j] - m) * (y[r * 4 + j] - m) / 4;
    EXPECT_NEAR(m, 0, 1e-12);
    EXPECT_NEAR(v, 1, 1e-4);  // epsilon 1e-5 in the denominator
  }
}

TEST(Kernels, InstanceNormalisesEachImageChannelPlaneOnItsOwn) {
  // Two images x two channels of 2 x 2; every plane is shifted and scaled differently.
  std::vector<float> xs(16);
  for (int i = 0; i < 16; ++i) xs[static_cast<std::size_t>(i)] = float((i * 7) % 5) * float(1 + i / 4) - float(i / 4) * 3;
  const Tensor x = f32({2, 2, 2, 2}, xs), s = f32({2}, {2, -0.5f}), b = f32({2}, {1, 3});
  const auto y = run(make_op("InstanceNorm", 3, {{"epsilon", 1e-3}}), {&x, &s, &b}, RefPrecision::F64)[0].to_f64();
  for (int plane = 0; plane < 4; ++plane) {
    const int c = plane % 2;
    double m = 0, v = 0;
    for (int j = 0; j < 4; ++j) m += xs[static_cast<std::size_t>(plane * 4 + j)] / 4.0;
    for (int j = 0; j < 4; ++j) v += (xs[static_cast<std::size_t>(plane * 4 + j)] - m) * (xs[static_cast<std::size_t>(plane * 4 + j)] - m) / 4;
    for (int j = 0; j < 4; ++j) {
      const double want = (xs[static_cast<std::size_t>(plane * 4 + j)] - m) / std::sqrt(v + 1e-3) * (c ? -0.5 : 2.0) + (c ? 3 : 1);
      EXPECT_NEAR(y[static_cast<std::size_t>(plane * 4 + j)], want, 1e-6) << "plane " << plane << " element " << j;
    }
  }
  // A constant plane normalises to B (variance 0, epsilon keeps it finite).
  const Tensor flat = f32({1, 2, 3}, {5, 5, 5, 1, 2, 3});
  const auto z = run(make_op("InstanceNormalization", 3), {&flat, &s, &b})[0].to_f32();
  EXPECT_EQ(z[0], 1.0f);
  EXPECT_EQ(z[2], 1.0f);
  // Bad input names the op and what was expected.
  const Tensor s3 = f32({3}, {1, 1, 1}), x2 = f32({2, 2}, {1, 2, 3, 4});
  std::string e = error_of(make_op("InstanceNormalization", 3), {&x, &s3, &b});
  EXPECT_NE(e.find("scale must have shape [2] (one per channel of X), got [3]"), std::string::npos) << e;
  e = error_of(make_op("InstanceNormalization", 3), {&x2, &s, &b});
  EXPECT_NE(e.find("at least one spatial dim"), std::string::npos) << e;
  e = error_of(make_op("InstanceNormalization", 3, {{"epsilon", -1.0}}), {&x, &s, &b});
  EXPECT_NE(e.find("epsilon"), std::string::npos) << e;
}

TEST(Kernels, GridSampleInterpolatesPadsAndKeepsNonFiniteVisible) {
  // X is a plane a*w + b*h + c (two channels): bilinear sampling inside the image reproduces it exactly.
  constexpr std::int64_t H = 4, W = 5;
  std::vector<float> xs;
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < H; ++h)
      for (int w = 0; w < W; ++w) xs.push_back(float(c == 0 ? 0.5 * w - 2.0 * h + 1 : 3.0 * h - w));
  const Tensor x = f32({1, 2, H, W}, xs);
  const std::vector<float> gs{-0.6f, 0.3f, 0.2f, -0.45f, 0.9f, 0.7f, -0.95f, -0.9f};  // four (x, y) locations
  const Tensor grid = f32({1, 2, 2, 2}, gs);
  for (const std::int64_t align : {0, 1}) {
    const auto y = run(make_op("GridSample", 2, {{"align_corners", align}}), {&x, &grid}, RefPrecision::F64)[0];
    ASSERT_EQ(y.shape(), (Shape{1, 2, 2, 2}));
    const auto v = y.to_f64();
    for (int k = 0; k < 4; ++k) {
      const double gx = gs[static_cast<std::size_t>(2 * k)], gy = gs[static_cast<std::size_t>(2 * k + 1)];
      const double px = align ? (gx + 1) / 2 * (W - 1) : ((gx + 1) * W - 1) / 2;
      const double py = align ? (gy + 1) / 2 * (H - 1) : ((gy + 1) * H - 1) / 2;
      if (px < 0 || py < 0 || px > W - 1 || py > H - 1) continue;  // near the edge with align 0: zeros mix in
      EXPECT_NEAR(v[static_cast<std::size_t>(k)], 0.5 * px - 2.0 * py + 1, 1e-12) << "align " << align << " k " << k;
      EXPECT_NEAR(v[static_cast<std::size_t>(4 + k)], 3.0 * py - px, 1e-12) << "align " << align << " k " << k;
    }
  }
  // Far outside: zeros reads 0, border the nearest corner, reflection mirrors back inside.
  const Tensor far = f32({1, 1, 1, 2}, {3.0f, -3.0f});  // x = 3 (right), y = -3 (top), align_corners 1
  const Attrs a1{{"align_corners", std::int64_t{1}}};
  auto with = [&](std::string pad, std::string mode) {
    Attrs a = a1;
    a["padding_mode"] = pad;
    a["mode"] = mode;
    return run(make_op("GridSample", 2, a), {&x, &far}, RefPrecision::F64)[0].to_f64()[0];
  };
  EXPECT_EQ(with("zeros", "bilinear"), 0.0);
  EXPECT_EQ(with("border", "bilinear"), xs[W - 1]);  // (h 0, w 4)
  // Reflection with align 1 mirrors at the corner pixels' centres: x = 3 is pixel 8, two spans of 4
  // beyond 0 (an even number of flips) -> 0; y = -3 is pixel -3, one span of 3 (odd) -> 3 - 0 = 3.
  EXPECT_EQ(with("reflection", "nearest"), xs[3 * W]);
  EXPECT_EQ(with("reflection", "bilinear"), xs[3 * W]);
  // A NaN coordinate reads NaN in every channel; a NaN pixel reaches the locations whose taps touch it.
  const Tensor nan_grid = f32({1, 1, 2, 2}, {std::nanf(""), 0.0f, 0.0f, 0.0f});
  const auto yn = run(make_op("GridSample", 2), {&x, &nan_grid})[0].to_f32();
  EXPECT_TRUE(std::isnan(yn[0]) && std::isnan(yn[2])) << "both channels at location 0";
  EXPECT_FALSE(std::isnan(yn[1]) || std::isnan(yn[3]));
  std::vector<float> xn = xs;
  // The centre (0, 0) with align 0 is pixel (x 2, y 1.5): its taps are x 2 and 3 (weight 0), y 1 and 2.
  // A NaN in a tap of weight 0 still reads NaN (NaN * 0), as PyTorch's grid_sample computes.
  xn[2 * W + 3] = std::nanf("");
  const Tensor xnan = f32({1, 2, H, W}, xn);
  const auto yc = run(make_op("GridSample", 2), {&xnan, &nan_grid})[0].to_f32();
  EXPECT_TRUE(std::isnan(yc[1]));
  EXPECT_FALSE(std::isnan(yc[3])) << "channel 1 is clean";
  // Bad input names the op and what was expected.
  const Tensor bad_grid = f32({1, 2, 2, 3}, std::vector<float>(12, 0.0f));
  std::string e = error_of(make_op("GridSample", 2), {&x, &bad_grid});
  EXPECT_NE(e.find("grid must be [N, H_out, W_out, 2] with N = 1 (X's), got [1, 2, 2, 3]"), std::string::npos) << e;
  e = error_of(make_op("GridSample", 2, {{"mode", std::string("cubic")}}), {&x, &grid});
  EXPECT_NE(e.find("mode must be bilinear, nearest or bicubic, got \"cubic\""), std::string::npos) << e;
}

TEST(Kernels, ScatterReducesInIndexOrderAndNamesBadInput) {
  const Tensor data = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor idx = int64_tensor({1, 3}, {1, 0, 1});
  const Tensor upd = f32({1, 3}, {10, 20, 30});
  auto scatter = [&](const char* red) {
    return run(make_op("ScatterElements", 3, {{"reduction", std::string(red)}}), {&data, &idx, &upd})[0].to_f32();
  };
  EXPECT_EQ(scatter("none"), (std::vector<float>{1, 20, 3, 10, 5, 30}));
  EXPECT_EQ(scatter("mul"), (std::vector<float>{1, 40, 3, 40, 5, 180}));
  EXPECT_EQ(scatter("max"), (std::vector<float>{1, 20, 3, 10, 5, 30}));
  EXPECT_EQ(scatter("min"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // ScatterND: a repeated index tuple with reduction none, the last write wins.
  const Tensor rows = int64_tensor({3, 1}, {1, 0, 1});
  const Tensor slices = f32({3, 3}, {7, 7, 7, 8, 8, 8, 9, 9, 9});
  EXPECT_EQ(run(make_op("ScatterND", 3), {&data, &rows, &slices})[0].to_f32(), (std::vector<float>{8, 8, 8, 9, 9, 9}));
  const Tensor far = int64_tensor({1, 3}, {1, 2, 0});
  std::string e = error_of(make_op("ScatterElements", 3), {&data, &far, &upd});
  EXPECT_NE(e.find("index 2 is out of range for a dimension of size 2"), std::string::npos) << e;
  const Tensor short_upd = f32({1, 2}, {1, 2});
  e = error_of(make_op("ScatterND", 3), {&data, &rows, &short_upd});
  EXPECT_NE(e.find("updates must have shape [3, 3], got [1, 2]"), std::string::npos) << e;
  e = error_of(make_op("ScatterElements", 3, {{"reduction", std::string("sum")}}), {&data, &idx, &upd});
  EXPECT_NE(e.find("reduction must be none, add, mul, max or min, got \"sum\""), std::string::npos) << e;
}

TEST(Kernels, SumToShapeAndExpandAreAdjoint) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto s = run(make_op("SumToShape", 1, {{"shape", std::vector<std::int64_t>{1, 3}}}), {&x})[0];
  EXPECT_EQ(s.to_f32(), (std::vector<float>{5, 7, 9}));
  const auto e = run(make_op("Expand", 1, {{"shape", std::vector<std::int64_t>{2, 1, 1}}}), {&s})[0];
  EXPECT_EQ(e.shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(e.to_f32(), (std::vector<float>{5, 7, 9, 5, 7, 9}));
}

TEST(Kernels, PadCropsBeforeReflecting) {
  // Negative pads crop first; reflect then mirrors inside what is kept (ONNX Runtime's order, and
  // what exporters' Slice -> Pad rewrites compute): [10, 11, 12] cropped to [11, 12], then two more.
  const Tensor x = f32({1, 3}, {10, 11, 12});
  auto pad = [&](std::vector<std::int64_t> pads, const char* mode) {
    return make_op("Pad", 1, {{"pads", std::move(pads)}, {"mode", std::string(mode)}});
  };
  EXPECT_EQ(run(pad({0, -1, 0, 2}, "reflect"), {&x})[0].to_f32(), (std::vector<float>{11, 12, 11, 12}));
  EXPECT_EQ(run(pad({0, 3, 0, -1}, "reflect"), {&x})[0].to_f32(), (std::vector<float>{11, 10, 11, 10, 11}));
  EXPECT_EQ(run(pad({0, -1, 0, 2}, "edge"), {&x})[0].to_f32(), (std::vector<float>{11, 12, 12, 12}));
  const std::string e = error_of(pad({0, -2, 0, 1}, "reflect"), {&x});
  EXPECT_NE(e.find("reflect padding of dimension 1 needs at least 2 elements left after cropping, 1 left"),
            std::string::npos)
      << e;
}

TEST(Reference, ConvertsFp16AndPrivateFormatsFirst) {
  std::vector<float> xs(2 * 3 * 2 * 2);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = 0.25f * float(i) - 2.0f;
  const Tensor nchw = f32({2, 3, 2, 2}, xs);
  const Tensor half = Tensor::from_f32({2, 3, 2, 2}, xs, DType::F16);
  const Tensor fractal = convert_format(half, Format::NC1HWC0);
  const auto a = run(make_op("Relu", 1), {&nchw})[0];
  const auto b = run(make_op("Relu", 1), {&fractal})[0];
  EXPECT_EQ(b.dtype(), DType::F32);
  EXPECT_EQ(b.shape(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(a.to_f32(), b.to_f32());  // all values are exact in FP16
}

TEST(Reference, GraphRunIsDeterministicAndReportsMissingFeeds) {
  Graph g("tiny");
  g.add_tensor({"x", TensorDesc{DType::F32, {2, 3}, Format::ND}, TensorKind::Input});
  g.mark_input("x");
  g.add_initializer("w", f32({3, 2}, {1, 2, 3, 4, 5, 6}));
  Op mm = make_op("MatMul", 0);
  mm.inputs = {"x", "w"};
  mm.outputs = {"y"};
  g.add_op(mm);
  EXPECT_THROW(run_graph_reference(g, {}, RefPrecision::F32), GraphError);
  const std::map<std::string, Tensor> feeds{{"x", f32({2, 3}, {1, 0, 0, 0, 1, -1})}};
  const auto v1 = run_graph_reference(g, feeds, RefPrecision::F32);
  const auto v2 = run_graph_reference(g, feeds, RefPrecision::F32);
  EXPECT_EQ(v1.at("y").to_f32(), (std::vector<float>{1, 2, -2, -2}));
  EXPECT_TRUE(v1.at("y") == v2.at("y"));
  const auto v64 = run_graph_reference(g, feeds, RefPrecision::F64);
  EXPECT_EQ(v64.at("y").dtype(), DType::F64);
  EXPECT_EQ(v64.at("w").dtype(), DType::F64);
}

// Clip keeps NaN, the sign of zero and infinities beyond the bounds as the definition says, with
// bounds from attributes, from inputs (omitted = unbounded) and in both reference precisions.
TEST(Reference, ClipPassesNanAndSignedZeroThrough) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor x = f32({8}, {nan, -0.0f, 0.0f, -inf, inf, 7.5f, -3.0f, 2.0f});
  auto bits = [](float v) { return std::bit_cast<std::uint32_t>(v); };
  auto check = [&](const Tensor& y, float lo, float hi) {
    const std::vector<float> got = y.to_f32(), in = x.to_f32();
    for (std::size_t i = 0; i < in.size(); ++i) {
      const float want = std::isnan(in[i]) ? in[i] : in[i] < lo ? lo : hi < in[i] ? hi : in[i];
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(got[i])) << i;
      else EXPECT_EQ(bits(got[i]), bits(want)) << i << ": " << got[i] << " vs " << want;
    }
  };
  for (const RefPrecision p : {RefPrecision::F32, RefPrecision::F64}) {
    check(run(make_op("Clip", 1, {{"min", 0.0}, {"max", 6.0}}), {&x}, p)[0], 0.0f, 6.0f);
    const Tensor lo = f32({}, {-1.0f}), hi = f32({}, {1.0f});
    Op bounded = make_op("Clip", 3);
    check(run(bounded, {&x, &lo, &hi}, p)[0], -1.0f, 1.0f);
    Op upper = make_op("Clip", 3);
    upper.inputs[1].clear();  // min omitted: unbounded below
    check(run(upper, {&x, nullptr, &hi}, p)[0], -inf, 1.0f);
  }
}

}  // namespace
}  // namespace probelab::graph
