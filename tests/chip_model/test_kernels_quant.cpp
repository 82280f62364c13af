// Quantized Cube ops (chip_model/kernels/quant_kernel.h) through OpRunner: INT8 and FP8 MatMul,
// Conv with bias and per-channel weights, Gemm with transB and beta * C, against host references
// built from the quantized codes (integer sums are exact, so the checks are bit for bit).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "chip_model/spec/quant_args.h"
#include "numerics/fp16.h"
#include "numerics/quant.h"
#include "tests/chip_model/kernel_test_util.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace ps = probelab::spec;
namespace num = probelab::num;
using pc::testing::fetch;
using pc::testing::MemStore;
using pc::testing::op_args;
using pc::testing::Placer;
using pc::testing::random_f16;
using pc::testing::run_op;

namespace {

struct Quantized {
  std::vector<float> offsets;  // q - zero_point (or FP8 values)
  std::vector<num::QuantParams> params;
};
Quantized quantize(const pg::Tensor& t, num::QuantFormat f, bool sym, std::int64_t channels, std::int64_t inner) {
  Quantized q;
  q.offsets = t.to_f32();
  q.params = num::choose_params(q.offsets, f, sym, channels, inner);
  num::quantize_span(q.offsets, q.params, inner);
  return q;
}
float to_fp16_value(float v) { return num::to_float(num::to_f16(v).value); }
std::vector<float> values(const pg::Tensor& t) { return t.to_f32(); }

TEST(QuantKernels, Int8MatMulPerChannelWeightsAsymmetricActivationsBitExact) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t M = 9, K = 37, N = 11;
  const pg::Tensor a = random_f16({M, K}, 1, -0.5f, 2.0f), b = random_f16({K, N}, 2);
  const auto out = place.out(pg::DType::F16, {M, N});
  ps::OpAttrs at{{ps::kQuantWeights, std::string("int8")}, {ps::kQuantWeightsPerChannel, std::int64_t{1}},
                 {ps::kQuantActivations, std::string("int8")}, {ps::kQuantActivationsSymmetric, std::int64_t{0}}};
  run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {out}, at));
  const std::vector<float> y = values(fetch(mem, out));

  const Quantized qa = quantize(a, num::QuantFormat::Int8, false, 1, 1);
  const Quantized qb = quantize(b, num::QuantFormat::Int8, true, N, 1);  // channel = column n
  ASSERT_NE(qa.params[0].zero_point, 0);
  double worst = 0;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = 0;  // an exact integer
      for (std::int64_t k = 0; k < K; ++k) acc += qa.offsets[m * K + k] * qb.offsets[k * N + n];
      const auto s = static_cast<float>(static_cast<double>(qa.params[0].scale) * qb.params[n].scale);
      const float expect = to_fp16_value(static_cast<float>(acc * s));
      ASSERT_EQ(y[m * N + n], expect) << m << "," << n;
      double exact = 0;
      for (std::int64_t k = 0; k < K; ++k) exact += a.to_f32()[m * K + k] * b.to_f32()[k * N + n];
      worst = std::max(worst, std::fabs(exact - y[m * N + n]));
    }
  EXPECT_GT(worst, 1e-4);  // quantization really happened
  EXPECT_LT(worst, 0.2);   // and stays an approximation of the product
}

TEST(QuantKernels, Fp8E4M3MatMulAccumulatesInFp32InKOrder) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t M = 5, K = 64, N = 7;
  const pg::Tensor a = random_f16({M, K}, 3, -3.0f, 3.0f), b = random_f16({K, N}, 4, -0.1f, 0.1f);
  const auto out = place.out(pg::DType::F16, {M, N});
  ps::OpAttrs at{{ps::kQuantWeights, std::string("e4m3")}, {ps::kQuantActivations, std::string("e4m3")}};
  run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {out}, at));
  const std::vector<float> y = values(fetch(mem, out));
  const Quantized qa = quantize(a, num::QuantFormat::E4M3, true, 1, 1);
  const Quantized qb = quantize(b, num::QuantFormat::E4M3, true, 1, 1);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;  // FP8 x FP8 products are exact in FP32; the sum rounds per step
      for (std::int64_t k = 0; k < K; ++k) acc += qa.offsets[m * K + k] * qb.offsets[k * N + n];
      const auto s = static_cast<float>(static_cast<double>(qa.params[0].scale) * qb.params[0].scale);
      ASSERT_EQ(y[m * N + n], to_fp16_value(static_cast<float>(static_cast<double>(acc) * s))) << m << "," << n;
    }
}

TEST(QuantKernels, Int8ConvPerChannelWithBiasBitExact) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t Nb = 2, C = 3, H = 5, W = 5, Mo = 4, R = 3;
  const pg::Tensor x = random_f16({Nb, C, H, W}, 5), w = random_f16({Mo, C, R, R}, 6), bias = random_f16({Mo}, 7);
  const auto out = place.out(pg::DType::F16, {Nb, Mo, H, W});
  ps::OpAttrs at{{"pads", std::vector<std::int64_t>{1, 1, 1, 1}},
                 {ps::kQuantWeights, std::string("int8")}, {ps::kQuantWeightsPerChannel, std::int64_t{1}},
                 {ps::kQuantActivations, std::string("int8")}};
  run_op(mem, op_args("Conv", {place.put(x), place.put(w), place.put(bias)}, {out}, at));
  const std::vector<float> y = values(fetch(mem, out));
  const Quantized qx = quantize(x, num::QuantFormat::Int8, true, 1, 1);
  const Quantized qw = quantize(w, num::QuantFormat::Int8, true, Mo, C * R * R);
  const std::vector<float> b = bias.to_f32();
  for (std::int64_t n = 0; n < Nb; ++n)
    for (std::int64_t m = 0; m < Mo; ++m)
      for (std::int64_t oy = 0; oy < H; ++oy)
        for (std::int64_t ox = 0; ox < W; ++ox) {
          double acc = 0;
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t i = 0; i < R; ++i)
              for (std::int64_t j = 0; j < R; ++j) {
                const std::int64_t iy = oy - 1 + i, ix = ox - 1 + j;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                acc += qx.offsets[((n * C + c) * H + iy) * W + ix] * qw.offsets[((m * C + c) * R + i) * R + j];
              }
          const auto s = static_cast<float>(static_cast<double>(qx.params[0].scale) * qw.params[m].scale);
          const float expect = to_fp16_value(static_cast<float>(acc * s) + b[m]);
          ASSERT_EQ(y[((n * Mo + m) * H + oy) * W + ox], expect) << n << "," << m << "," << oy << "," << ox;
        }
}

TEST(QuantKernels, GemmTransBChannelsAndBetaBias) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t M = 4, K = 16, N = 6;
  const pg::Tensor a = random_f16({M, K}, 8), b = random_f16({N, K}, 9), c = random_f16({N}, 10);
  const auto out = place.out(pg::DType::F16, {M, N});
  ps::OpAttrs at{{"transB", std::int64_t{1}}, {"beta", 0.5}, {ps::kQuantWeights, std::string("int4")},
                 {ps::kQuantWeightsPerChannel, std::int64_t{1}}};
  run_op(mem, op_args("Gemm", {place.put(a), place.put(b), place.put(c)}, {out}, at));
  const std::vector<float> y = values(fetch(mem, out));
  const Quantized qb = quantize(b, num::QuantFormat::Int4, true, N, K);  // rows of B^T = output channels
  const std::vector<float> av = a.to_f32(), cv = c.to_f32();
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) acc += av[m * K + k] * qb.offsets[n * K + k];
      const float v = static_cast<float>(static_cast<double>(acc) * qb.params[n].scale) + 0.5f * cv[n];
      ASSERT_EQ(y[m * N + n], to_fp16_value(v)) << m << "," << n;
    }
}

TEST(QuantKernels, DelayedScalingReadsAndUpdatesItsStateInHbmAndLatchesSaturation) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t M = 4, K = 16, N = 3;
  const pg::Tensor b = random_f16({K, N}, 6, -0.5f, 0.5f);
  // State [multiplier, history x 2], as the host initialises it.
  const auto state = place.put(pg::Tensor::from_f32({3}, std::vector<float>{1.0f, 0.0f, 0.0f}, pg::DType::F32));
  ps::OpAttrs at{{ps::kQuantWeights, std::string("e4m3")},
                 {ps::kQuantActivations, std::string("e4m3")},
                 {std::string(ps::kQuantActivations) + ps::kQuantScalingSuffix, std::string("delayed")},
                 {std::string(ps::kQuantActivations) + ps::kQuantHistorySuffix, std::int64_t{2}},
                 {std::string(ps::kQuantActivations) + ps::kQuantAlgorithmSuffix, std::string("max")},
                 {std::string(ps::kQuantActivations) + ps::kQuantMarginSuffix, std::int64_t{0}},
                 {std::string(ps::kQuantActivations) + ps::kQuantMetaSuffix, static_cast<std::int64_t>(state.addr)}};
  auto step = [&](float spike) {
    std::vector<float> av(static_cast<std::size_t>(M * K));
    for (std::size_t i = 0; i < av.size(); ++i) av[i] = 0.25f * static_cast<float>(static_cast<int>(i % 9) - 4);
    av[5] = spike;
    const pg::Tensor a = pg::Tensor::from_f32({M, K}, av, pg::DType::F16);
    const auto out = place.out(pg::DType::F16, {M, N});
    return run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {out}, at));
  };
  auto read_state = [&] { return fetch(mem, state).to_f32(); };
  // Step 0: multiplier 1 (no history yet); amax 1 enters the history: next multiplier 448.
  auto r0 = step(1.0f);
  ASSERT_EQ(r0.quant_records().size(), 1u);
  EXPECT_TRUE(r0.quant_records()[0].activations.delayed);
  EXPECT_EQ(r0.quant_records()[0].activations.scale, 1.0f);
  EXPECT_EQ(read_state(), (std::vector<float>{448.0f, 1.0f, 0.0f}));
  EXPECT_FALSE(r0.detection().inputs.kinds[ps::kExcOverflow].hit());
  // Step 1: a spike of 100 with the scale of amax 1: it saturates, and the latch hears of it on
  // input 0 at the spike's element.
  auto r1 = step(100.0f);
  const auto& q1 = r1.quant_records()[0].activations;
  EXPECT_EQ(q1.stats.saturated, 1u);
  EXPECT_EQ(q1.stats.first_saturated, 5);
  const auto& hit = r1.detection().inputs.kinds[ps::kExcOverflow];
  ASSERT_TRUE(hit.hit());
  EXPECT_EQ(hit.first, 5);
  EXPECT_EQ(hit.slot, 0);
  EXPECT_EQ(hit.value, 100.0f);
  EXPECT_TRUE(hit.detail & ps::kExcDetailQuantize);
  EXPECT_TRUE(r1.detection().inputs.status & ps::kFsOverflow);
  EXPECT_EQ(read_state(), (std::vector<float>{4.48f, 100.0f, 1.0f}));
  // Steps 2 and 3: the spike sets the scale for the history's length (2), then drops out.
  auto r2 = step(1.0f);
  EXPECT_EQ(r2.quant_records()[0].activations.scale, static_cast<float>(1.0 / static_cast<double>(4.48f)));
  EXPECT_EQ(r2.quant_records()[0].activations.stats.saturated, 0u);
  step(1.0f);
  EXPECT_EQ(read_state()[0], 448.0f);
  // Without its state buffer the op fails naming itself.
  at.erase(std::string(ps::kQuantActivations) + ps::kQuantMetaSuffix);
  EXPECT_THROW(step(1.0f), std::runtime_error);
}

TEST(QuantKernels, BadQuantizationAttributesThrowNamingTheOp) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor a = random_f16({2, 3}, 1), b = random_f16({3, 2}, 2);
  const auto ra = place.put(a), rb = place.put(b);
  const auto out = place.out(pg::DType::F16, {2, 2});
  ps::OpAttrs asym_fp8{{ps::kQuantWeights, std::string("e5m2")}, {ps::kQuantWeightsSymmetric, std::int64_t{0}}};
  EXPECT_THROW(run_op(mem, op_args("MatMul", {ra, rb}, {out}, asym_fp8)), std::runtime_error);
  ps::OpAttrs unknown{{ps::kQuantActivations, std::string("int3")}};
  try {
    run_op(mem, op_args("MatMul", {ra, rb}, {out}, unknown));
    FAIL() << "int3 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("test/MatMul"), std::string::npos) << e.what();
  }
  const auto o2 = place.out(pg::DType::F16, {2, 3});
  EXPECT_THROW(run_op(mem, op_args("Add", {ra, ra}, {o2}, unknown)), std::runtime_error);
}

}  // namespace
