// The reference kernels (which the chip's Vector unit computes with) round every + and * as the
// source writes them: the build forbids the compiler to fuse a multiply and an add
// (-ffp-contract=off), which it would otherwise do where inlining and vectorisation let it, so
// the same op gives different bits from different builds.
#include <bit>
#include <cmath>

#include <gtest/gtest.h>

#include "tests/graph/op_test_util.h"

namespace probelab::graph {
namespace {

using testing::make_op;
using testing::run;

TEST(RoundingAsWritten, SgdRoundsTheProductBeforeTheSubtraction) {
  // param - lr * grad, in FP64 (and rounded to FP32 after): values where a fused multiply-add
  // (one rounding) and the written expression (two) differ.
  const double lr = 0.1;
  const float g = 3.0f, p = 0.3f;
  volatile double product = lr * static_cast<double>(g);  // rounded on its own
  const double written = static_cast<double>(p) - product;
  const double fused = std::fma(-lr, static_cast<double>(g), static_cast<double>(p));
  ASSERT_NE(written, fused);  // the case distinguishes the two

  const Op op = make_op("SgdUpdate", 2, {{"lr", lr}});
  const Tensor p64 = Tensor::from_f64({1}, std::vector<double>{p}, DType::F64);
  const Tensor g64 = Tensor::from_f64({1}, std::vector<double>{g}, DType::F64);
  const auto out = run(op, {&p64, &g64}, RefPrecision::F64);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(out[0].data<double>()[0]), std::bit_cast<std::uint64_t>(written));
}

}  // namespace
}  // namespace probelab::graph
