// The linear-quantization ops of quantized ONNX models (QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv) and int8 /
// uint8 tensors in the ops that take them, on hand-computed values. (The ONNX node cases check
// them too, on the CPU reference and the chip.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "graph/op_registry.h"
#include "graph/ops/quantize.h"
#include "tests/graph/op_test_util.h"

namespace probelab::graph {
namespace {

using testing::error_of;
using testing::make_op;
using testing::run;

Tensor of(DType t, const Shape& s, std::vector<double> v) { return Tensor::from_f64(s, v, t); }

std::vector<double> values(const Tensor& t) { return t.to_f64(); }

TEST(QuantizedOps, QuantizeRoundsHalfToEvenBeforeTheZeroPointAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_f32({9}, std::vector<float>{0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 300, -300, nan, inf});
  const Tensor scale = of(DType::F32, {}, {1});
  // An odd zero point: rounding after adding it would give 12 for 0.5 and 14 for 2.5.
  const Tensor zp = of(DType::U8, {}, {11});
  const Tensor y = run(make_op("QuantizeLinear", 3), {&x, &scale, &zp})[0];
  EXPECT_EQ(y.dtype(), DType::U8);
  // NaN gives the zero point (the chip flags it as a NaN input), +Inf the largest code.
  EXPECT_EQ(values(y), (std::vector<double>{11, 13, 13, 11, 9, 255, 0, 11, 255}));
  // Without a zero point: uint8 with zero point 0.
  EXPECT_EQ(run(make_op("QuantizeLinear", 2), {&x, &scale})[0].dtype(), DType::U8);
  // Per axis (axis 1), int8.
  const Tensor x2 = Tensor::from_f32({2, 2}, std::vector<float>{1, 2, 3, 4});
  const Tensor s2 = Tensor::from_f32({2}, std::vector<float>{0.5f, 2});
  const Tensor z2 = of(DType::I8, {2}, {0, -3});
  const Tensor y2 = run(make_op("QuantizeLinear", 3, {{"axis", std::int64_t{1}}}), {&x2, &s2, &z2})[0];
  EXPECT_EQ(y2.dtype(), DType::I8);
  EXPECT_EQ(values(y2), (std::vector<double>{2, -2, 6, -1}));
  // int8 saturates at -128 and 127.
  const Tensor z0 = of(DType::I8, {}, {0});
  EXPECT_EQ(values(run(make_op("QuantizeLinear", 3), {&x, &scale, &z0})[0]),
            (std::vector<double>{0, 2, 2, -0.0, -2, 127, -128, 0, 127}));
}

TEST(QuantizedOps, DequantizePerTensorAndPerAxis) {
  const Tensor x = of(DType::I8, {3}, {-128, 0, 127});
  const Tensor scale = Tensor::from_f32({}, std::vector<float>{0.5f});
  const Tensor zp = of(DType::I8, {}, {-1});
  const Tensor y = run(make_op("DequantizeLinear", 3), {&x, &scale, &zp})[0];
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(y.to_f32(), (std::vector<float>{-63.5f, 0.5f, 64}));
  const Tensor xu = of(DType::U8, {2, 2}, {0, 255, 10, 20});
  const Tensor su = Tensor::from_f32({2}, std::vector<float>{1, 0.25f});
  const Tensor zu = of(DType::U8, {2}, {0, 12});
  EXPECT_EQ(run(make_op("DequantizeLinear", 3, {{"axis", std::int64_t{0}}}), {&xu, &su, &zu})[0].to_f32(),
            (std::vector<float>{0, 255, -0.5f, 2}));
  // int32 input (a bias), no zero point.
  const Tensor xi = of(DType::I32, {2}, {-1000, 7});
  EXPECT_EQ(run(make_op("DequantizeLinear", 2), {&xi, &scale})[0].to_f32(), (std::vector<float>{-500, 3.5f}));
}

TEST(QuantizedOps, DynamicQuantizeCoversZeroExactly) {
  const Tensor x = Tensor::from_f32({4}, std::vector<float>{0, 2, -0.5f, 1.5f});
  const auto out = run(make_op("DynamicQuantizeLinear", 1, {}, 3), {&x});
  const float scale = 2.5f / 255.0f;
  EXPECT_EQ(out[1].to_f32(), (std::vector<float>{scale}));
  EXPECT_EQ(values(out[2]), (std::vector<double>{51}));
  EXPECT_EQ(values(out[0]), (std::vector<double>{51, 255, 0, 204}));
  const Tensor pos = Tensor::from_f32({2}, std::vector<float>{0.5f, 2});
  const auto p = run(make_op("DynamicQuantizeLinear", 1, {}, 3), {&pos});
  EXPECT_EQ(values(p[2]), (std::vector<double>{0}));  // the range [0, 2]
  EXPECT_EQ(values(p[0]), (std::vector<double>{64, 255}));
}

TEST(QuantizedOps, IntegerProductsSubtractZeroPointsPerRowColumnAndChannel) {
  // MatMulInteger with a per-row zero point of A and a scalar one of B.
  const Tensor a = of(DType::U8, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = of(DType::I8, {3, 2}, {1, -1, 2, 0, -3, 5});
  const Tensor azp = of(DType::U8, {2}, {1, 2});
  const Tensor bzp = of(DType::I8, {}, {1});
  const Tensor y = run(make_op("MatMulInteger", 4), {&a, &b, &azp, &bzp})[0];
  EXPECT_EQ(y.dtype(), DType::I32);
  // (A - [1; 2]) = [[0, 1, 2], [2, 3, 4]]; (B - 1) = [[0, -2], [1, -1], [-4, 4]].
  EXPECT_EQ(values(y), (std::vector<double>{-7, 7, -13, 9}));
  // ConvInteger: a 2x2 window of ones over x - 1.
  const Tensor x = of(DType::U8, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor w = of(DType::U8, {1, 1, 2, 2}, {1, 1, 1, 1});
  const Tensor xzp = of(DType::U8, {}, {1});
  EXPECT_EQ(values(run(make_op("ConvInteger", 3), {&x, &w, &xzp})[0]), (std::vector<double>{8, 12, 20, 24}));
  // The INT32 accumulator wraps.
  EXPECT_EQ(ops::quant::wrap_i32(2147483648.0), -2147483648.0);
  EXPECT_EQ(ops::quant::wrap_i32(-2147483649.0), 2147483647.0);
}

TEST(QuantizedOps, QLinearOpsRequantizeWithBiasAndPerChannelScales) {
  const Tensor a = of(DType::U8, {1, 2}, {10, 20});
  const Tensor as = Tensor::from_f32({}, std::vector<float>{0.5f});
  const Tensor azp = of(DType::U8, {}, {10});
  const Tensor b = of(DType::I8, {2, 1}, {3, -4});
  const Tensor bs = Tensor::from_f32({}, std::vector<float>{0.25f});
  const Tensor bzp = of(DType::I8, {}, {0});
  const Tensor ys = Tensor::from_f32({}, std::vector<float>{1});
  const Tensor yzp = of(DType::U8, {}, {128});
  // acc = 0 * 3 + 10 * -4 = -40; -40 * 0.125 = -5; + 128.
  EXPECT_EQ(values(run(make_op("QLinearMatMul", 8), {&a, &as, &azp, &b, &bs, &bzp, &ys, &yzp})[0]),
            (std::vector<double>{123}));
  const Tensor x = of(DType::U8, {1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor xs = Tensor::from_f32({}, std::vector<float>{1});
  const Tensor xzp = of(DType::U8, {}, {0});
  const Tensor w = of(DType::I8, {2, 1, 1, 1}, {1, 2});
  const Tensor ws = Tensor::from_f32({2}, std::vector<float>{1, 0.5f});
  const Tensor wzp = of(DType::I8, {2}, {0, 0});
  const Tensor yz8 = of(DType::I8, {}, {0});
  const Tensor bias = of(DType::I32, {2}, {10, -1});
  const Tensor y = run(make_op("QLinearConv", 9), {&x, &xs, &xzp, &w, &ws, &wzp, &ys, &yz8, &bias})[0];
  EXPECT_EQ(y.dtype(), DType::I8);
  // Channel 0: x + 10. Channel 1: (2x - 1) * 0.5 = 0.5, 1.5, 2.5, 3.5, rounded half to even.
  EXPECT_EQ(values(y), (std::vector<double>{11, 12, 13, 14, 0, 2, 2, 4}));
}

TEST(QuantizedOps, NarrowIntegersWrapInArithmeticAndPool) {
  const Tensor a = of(DType::U8, {3}, {200, 5, 0});
  const Tensor b = of(DType::U8, {3}, {100, 7, 1});
  EXPECT_EQ(values(run(make_op("Add", 2), {&a, &b})[0]), (std::vector<double>{44, 12, 1}));
  EXPECT_EQ(values(run(make_op("Sub", 2), {&a, &b})[0]), (std::vector<double>{100, 254, 255}));
  const Tensor c = of(DType::I8, {3}, {-100, 5, 127});
  const Tensor d = of(DType::I8, {3}, {-100, -7, 1});
  EXPECT_EQ(values(run(make_op("Add", 2), {&c, &d})[0]), (std::vector<double>{56, -2, -128}));
  const Tensor img = of(DType::U8, {1, 1, 2, 2}, {3, 250, 0, 7});
  const Tensor m = run(make_op("MaxPool", 1, {{"kernel_shape", std::vector<std::int64_t>{2, 2}}}), {&img})[0];
  EXPECT_EQ(m.dtype(), DType::U8);
  EXPECT_EQ(values(m), (std::vector<double>{250}));
}

TEST(QuantizedOps, BadInputNamesTheOpAndWhatWasExpected) {
  const Tensor x = Tensor::from_f32({2, 2}, std::vector<float>{1, 2, 3, 4});
  const Tensor s3 = Tensor::from_f32({3}, std::vector<float>{1, 1, 1});
  std::string e = error_of(make_op("QuantizeLinear", 2), {&x, &s3});
  EXPECT_NE(e.find("y_scale must be a scalar or have shape [2] (one per index of axis 1 of [2, 2]), got [3]"),
            std::string::npos) << e;
  const Tensor s = Tensor::from_f32({}, std::vector<float>{1});
  const Tensor zf = Tensor::from_f32({}, std::vector<float>{0});
  e = error_of(make_op("QuantizeLinear", 3), {&x, &s, &zf});
  EXPECT_NE(e.find("y_zero_point must be an int8 or uint8 tensor, got float32"), std::string::npos) << e;
  e = error_of(make_op("MatMulInteger", 2), {&x, &x});
  EXPECT_NE(e.find("input A must be an int8 or uint8 tensor, got float32"), std::string::npos) << e;
  const Tensor a = of(DType::U8, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor zp3 = of(DType::U8, {3}, {1, 2, 3});
  e = error_of(make_op("MatMulInteger", 2), {&a, &a});
  EXPECT_NE(e.find("inner dimensions differ: A [2, 3] has K = 3, B [2, 3] has K = 2"), std::string::npos) << e;
  const Tensor b = of(DType::U8, {3, 2}, {1, 2, 3, 4, 5, 6});
  e = error_of(make_op("MatMulInteger", 3), {&a, &b, &zp3});
  EXPECT_NE(e.find("the zero point of A / x must be a scalar or have shape [2]"), std::string::npos) << e;
  const Tensor xi = of(DType::U8, {1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor wi = of(DType::I8, {2, 1, 1, 1}, {1, 2});
  const Tensor z8 = of(DType::I8, {}, {0});
  const Tensor zu = of(DType::U8, {}, {0});
  const Tensor fbias = Tensor::from_f32({2}, std::vector<float>{0, 0});
  e = error_of(make_op("QLinearConv", 9), {&xi, &s, &zu, &wi, &s, &z8, &s, &z8, &fbias});
  EXPECT_NE(e.find("bias B must be an int32 tensor, got float32"), std::string::npos) << e;
  // Inference only: no gradient.
  EXPECT_FALSE(OpRegistry::instance().get("QuantizeLinear").gradient);
  EXPECT_FALSE(OpRegistry::instance().get("QLinearConv").gradient);
}

}  // namespace
}  // namespace probelab::graph
