// LpNormalization, MeanVarianceNormalization and GlobalLpPool on the CPU reference (FP32 and
// FP64) against values computed with numpy, and their named errors.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/graph/op_test_util.h"

namespace probelab::graph {
namespace {

using testing::error_of;
using testing::make_op;
using testing::run;

std::vector<double> iota_f(std::size_t n, double (*f)(double)) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = f(static_cast<double>(i));
  return v;
}

void expect_near_all(const Tensor& t, const std::vector<double>& want, double tol) {
  const std::vector<double> got = t.to_f64();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// Both precisions: FP32 within 1e-6, FP64 within 1e-8 (the numpy values have 9 digits).
void expect_op(const Op& op, const Shape& s, const std::vector<double>& x, const std::vector<double>& want) {
  const Tensor x32 = Tensor::from_f64(s, x, DType::F32), x64 = Tensor::from_f64(s, x, DType::F64);
  expect_near_all(run(op, {&x32}).at(0), want, 1e-6);
  expect_near_all(run(op, {&x64}, RefPrecision::F64).at(0), want, 1e-8);
}

// numpy: x = ((arange(12) - 5.5) / 3).reshape(2, 3, 2); x / norm(x, p, axis=1, keepdims=True).
const std::vector<double> kX3 = iota_f(12, [](double i) { return (i - 5.5) / 3; });

TEST(LpNormalization, P1AlongAxis1MatchesNumpy) {
  expect_op(make_op("LpNormalization", 1, {{"axis", std::int64_t{1}}, {"p", std::int64_t{1}}}), {2, 3, 2}, kX3,
            {-0.523809524, -0.6, -0.333333333, -0.333333333, -0.142857143, -0.0666666667, 0.0666666667, 0.142857143,
             0.333333333, 0.333333333, 0.6, 0.523809524});
}

TEST(LpNormalization, P2AlongAxis1MatchesNumpy) {
  expect_op(make_op("LpNormalization", 1, {{"axis", std::int64_t{1}}}), {2, 3, 2}, kX3,
            {-0.822178602, -0.87006284, -0.523204565, -0.483368245, -0.224230528, -0.0966736489, 0.0966736489,
             0.224230528, 0.483368245, 0.523204565, 0.87006284, 0.822178602});
}

TEST(LpNormalization, BadPAndAxisAreNamed) {
  const Tensor x = Tensor::from_f64({2, 3}, std::vector<double>(6, 1.0), DType::F32);
  EXPECT_NE(error_of(make_op("LpNormalization", 1, {{"p", std::int64_t{3}}}), {&x}).find("p must be 1 or 2, got 3"),
            std::string::npos);
  EXPECT_NE(error_of(make_op("LpNormalization", 1, {{"axis", std::int64_t{2}}}), {&x}).find("axis 2 is out of range"),
            std::string::npos);
}

TEST(MeanVarianceNormalization, DefaultAxesMatchNumpy) {
  // numpy: x = (sin(arange(24) * 0.7) * 2 + 0.3).reshape(2, 3, 2, 2), axes (0, 2, 3),
  // (x - mean) / (sqrt(var) + 1e-9).
  expect_op(make_op("MeanVarianceNormalization", 1), {2, 3, 2, 2},
            iota_f(24, [](double i) { return std::sin(i * 0.7) * 2 + 0.3; }),
            {-0.482975957, 0.545421866, 1.09014812, 0.895009546, 1.15114144, -0.00894893792, -0.889951612,
             -1.07751726, -1.66517952, -0.563737416, 0.52426496, 1.08712309, 0.881264228, 0.0264171684, -1.06800544,
             -1.88727954, -1.07197728, -0.461220172, 0.641334864, 1.71713897, 1.09126848, 0.845071489, -0.0771500784,
             -1.24166101});
}

TEST(MeanVarianceNormalization, DefaultAxesNeedRank4) {
  const Tensor x = Tensor::from_f64({2, 3, 4}, std::vector<double>(24, 1.0), DType::F32);
  const std::string e = error_of(make_op("MeanVarianceNormalization", 1), {&x});
  EXPECT_NE(e.find("axes entry 3 is out of range for rank 3"), std::string::npos) << e;
}

TEST(GlobalLpPool, P3MatchesNumpy) {
  // numpy: x = (cos(arange(8) * 0.9) * 1.5).reshape(1, 2, 2, 2); (abs(x)**3).sum((2, 3))**(1/3).
  const Op op = make_op("GlobalLpPool", 1, {{"p", std::int64_t{3}}});
  expect_op(op, {1, 2, 2, 2}, iota_f(8, [](double i) { return std::cos(i * 0.9) * 1.5; }), {1.88699761, 1.88538888});
  const Tensor x = Tensor::from_f64({1, 2, 2, 2}, std::vector<double>(8, 1.0), DType::F32);
  EXPECT_EQ(run(op, {&x}).at(0).shape(), (Shape{1, 2, 1, 1}));
}

}  // namespace
}  // namespace probelab::graph
