// Device kernels: bit-identity with the numerics layer in the documented order, closeness to the
// FP32 reference, private formats, fused ops.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <tuple>

#include "numerics/bf16.h"
#include "numerics/fp16.h"
#include "numerics/gemm.h"
#include "graph/fused_ops.h"
#include "chip_model/kernels/cube_gemm.h"
#include "chip_model/kernels/op_args_graph.h"
#include "graph/op_registry.h"
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

std::vector<std::uint16_t> bits(const pg::Tensor& t) {
  auto v = t.data<std::uint16_t>();
  return {v.begin(), v.end()};
}

using pc::testing::f16p;

/// FP32 reference of an op on the exactly widened inputs.
std::vector<float> reference(const pg::Op& op, const std::vector<const pg::Tensor*>& in) {
  std::vector<pg::Tensor> f32;
  std::vector<const pg::Tensor*> ptrs;
  f32.reserve(in.size());
  for (const pg::Tensor* t : in) {
    f32.push_back(pg::Tensor::from_f32(t->shape(), t->to_f32(), pg::DType::F32));
    ptrs.push_back(&f32.back());
  }
  return pg::run_reference(op, ptrs, pg::RefPrecision::F32).at(0).to_f32();
}

void expect_close_f16(const pg::Tensor& got, const std::vector<float>& ref, double rel = 2e-3, double abs = 2e-3) {
  const std::vector<float> g = got.to_f32();
  ASSERT_EQ(g.size(), ref.size());
  for (std::size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], ref[i], abs + rel * std::fabs(ref[i])) << "element " << i;
}

/// The detection report of an FP16 output whose FP32 values are `pre`: underflow exactly at the
/// first element whose rounding raises Underflow or DenormalOut, no other kind.
void expect_only_underflow(const pc::kernels::TensorFlags& f, const std::vector<float>& pre) {
  std::int64_t first = -1;
  for (std::size_t i = 0; i < pre.size() && first < 0; ++i) {
    const num::Flags fl = num::to_f16(pre[i]).flags;
    if (fl.has(num::Flag::Underflow) || fl.has(num::Flag::DenormalOut)) first = static_cast<std::int64_t>(i);
  }
  EXPECT_FALSE(f.kinds[ps::kExcOverflow].hit());
  EXPECT_FALSE(f.kinds[ps::kExcInvalid].hit());
  EXPECT_EQ(f.kinds[ps::kExcUnderflow].first, first);
}

pg::Op graph_op(const std::string& type, std::size_t n_in, pg::Attrs attrs = {}) {
  pg::Op op;
  op.name = "ref";
  op.type = type;
  for (std::size_t i = 0; i < n_in; ++i) op.inputs.push_back("in" + std::to_string(i));
  op.outputs = {"out0"};
  op.attrs = std::move(attrs);
  return op;
}

}  // namespace

TEST(Kernels, MatMulBitIdenticalToNumericsGemm) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t M = 37, K = 91, N = 53;
  const pg::Tensor a = random_f16({M, K}, 1), b = random_f16({K, N}, 2);
  const auto out = place.out(pg::DType::F16, {M, N});
  auto run = run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {out}));
  const pg::Tensor y = fetch(mem, out);

  std::vector<num::f16> expect(static_cast<std::size_t>(M * N));
  num::gemm(M, N, K, f16p(a), f16p(b), expect.data());
  for (std::size_t i = 0; i < expect.size(); ++i) ASSERT_EQ(bits(y)[i], expect[i].bits) << "element " << i;
  expect_close_f16(y, reference(graph_op("MatMul", 2), {&a, &b}));
  EXPECT_EQ(run.detection().nan_input, -1);
  // Only underflow can occur (results near zero become FP16 subnormals): at the first such element.
  std::vector<float> acc(static_cast<std::size_t>(M * N));
  num::gemm(M, N, K, num::GemmOperand{a.data<std::uint16_t>().data(), num::InType::F16, K, false},
            num::GemmOperand{b.data<std::uint16_t>().data(), num::InType::F16, N, false},
            num::GemmOutput{acc.data(), num::OutType::F32, N});
  expect_only_underflow(run.detection().outputs.at(0), acc);
}

TEST(Kernels, BatchedBroadcastMatMulAndFp16AccumulationModes) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t B = 3, M = 20, K = 300, N = 24;
  const pg::Tensor a = random_f16({B, M, K}, 3, 0.0f, 1.0f), b = random_f16({K, N}, 4, 0.0f, 1.0f);
  for (auto [accum, mode] : {std::pair{ps::AccumDType::FP32, num::Accum::Fp32},
                             std::pair{ps::AccumDType::FP16_RN, num::Accum::Fp16Rn},
                             std::pair{ps::AccumDType::FP16_VIA_FP32, num::Accum::Fp16ViaFp32}}) {
    const auto out = place.out(pg::DType::F16, {B, M, N});
    auto args = op_args("MatMul", {place.put(a), place.put(b)}, {out});
    args.accum = accum;
    run_op(mem, args);
    const pg::Tensor y = fetch(mem, out);
    num::GemmOptions opt;
    opt.accum = mode;
    for (std::int64_t i = 0; i < B; ++i) {
      std::vector<num::f16> expect(static_cast<std::size_t>(M * N));
      num::gemm(M, N, K, f16p(a) + i * M * K, f16p(b), expect.data(), opt);
      for (std::int64_t j = 0; j < M * N; ++j)
        ASSERT_EQ(bits(y)[static_cast<std::size_t>(i * M * N + j)], expect[static_cast<std::size_t>(j)].bits)
            << "accum " << int(accum) << " batch " << i << " element " << j;
    }
  }
}

TEST(Kernels, Bf16AndFp32CubeOperands) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t M = 19, K = 70, N = 23;
  // BF16: numerics GEMM with BF16 inputs, FP32 accumulation, BF16 output through the Mode.
  const pg::Tensor a = random_f16({M, K}, 80, -1.0f, 1.0f, pg::DType::BF16);
  const pg::Tensor b = random_f16({K, N}, 81, -1.0f, 1.0f, pg::DType::BF16);
  const auto ob = place.out(pg::DType::BF16, {M, N});
  run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {ob}));
  std::vector<std::uint16_t> expect(static_cast<std::size_t>(M * N));
  num::gemm(M, N, K, num::GemmOperand{a.data<std::uint16_t>().data(), num::InType::BF16, K, false},
            num::GemmOperand{b.data<std::uint16_t>().data(), num::InType::BF16, N, false},
            num::GemmOutput{expect.data(), num::OutType::BF16, N});
  EXPECT_EQ(bits(fetch(mem, ob)), expect);

  // FP32: sequential K with fused multiply-add from +0.
  const pg::Tensor af = random_f16({M, K}, 82, -1.0f, 1.0f, pg::DType::F32);
  const pg::Tensor bf = random_f16({K, N}, 83, -1.0f, 1.0f, pg::DType::F32);
  const auto of = place.out(pg::DType::F32, {M, N});
  run_op(mem, op_args("MatMul", {place.put(af), place.put(bf)}, {of}));
  const pg::Tensor yt = fetch(mem, of);
  const auto y = yt.data<float>();
  const auto av = af.data<float>(), bv = bf.data<float>();
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < K; ++k)
        acc = std::fma(av[static_cast<std::size_t>(m * K + k)], bv[static_cast<std::size_t>(k * N + n)], acc);
      ASSERT_EQ(std::bit_cast<std::uint32_t>(y[static_cast<std::size_t>(m * N + n)]), std::bit_cast<std::uint32_t>(acc));
    }
}

TEST(Kernels, GemmTransposesAlphaBetaBias) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t M = 33, K = 40, N = 17;
  const pg::Tensor at = random_f16({K, M}, 5), bt = random_f16({N, K}, 6), c = random_f16({N}, 7);
  // Plain transposed GEMM: bit-identical to numerics with transposed operands.
  const auto out = place.out(pg::DType::F16, {M, N});
  const ps::OpAttrs tr{{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}};
  run_op(mem, op_args("Gemm", {place.put(at), place.put(bt)}, {out}, tr));
  std::vector<num::f16> expect(static_cast<std::size_t>(M * N));
  num::gemm(M, N, K, num::GemmOperand{at.data<std::uint16_t>().data(), num::InType::F16, M, true},
            num::GemmOperand{bt.data<std::uint16_t>().data(), num::InType::F16, K, true},
            num::GemmOutput{expect.data(), num::OutType::F16, N});
  const pg::Tensor y = fetch(mem, out);
  for (std::size_t i = 0; i < expect.size(); ++i) ASSERT_EQ(bits(y)[i], expect[i].bits) << "element " << i;

  // alpha, beta, bias: FP32 epilogue, within FP16 tolerance of the reference.
  pg::Attrs attrs{{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}};
  const auto out2 = place.out(pg::DType::F16, {M, N});
  run_op(mem, op_args("Gemm", {place.put(at), place.put(bt), place.put(c)}, {out2}, attrs));
  expect_close_f16(fetch(mem, out2), reference(graph_op("Gemm", 3, attrs), {&at, &bt, &c}));
}

// Direct convolution in the documented K order (c, kh, kw), FP32 FMA accumulation from +0.
std::vector<float> direct_conv(const pg::Tensor& x, const pg::Tensor& w, std::int64_t group, std::int64_t s,
                               std::int64_t p, std::int64_t d) {
  const auto xv = x.to_f32(), wv = w.to_f32();
  const std::int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const std::int64_t M = w.shape()[0], KH = w.shape()[2], KW = w.shape()[3], cg = C / group, mg = M / group;
  const std::int64_t OH = (H + 2 * p - d * (KH - 1) - 1) / s + 1, OW = (W + 2 * p - d * (KW - 1) - 1) / s + 1;
  std::vector<float> y(static_cast<std::size_t>(N * M * OH * OW));
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          const std::int64_t g = m / mg;
          float acc = 0.0f;
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t kh = 0; kh < KH; ++kh)
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const std::int64_t ih = oh * s - p + kh * d, iw = ow * s - p + kw * d;
                const float xe = (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                     ? xv[static_cast<std::size_t>(((n * C + g * cg + c) * H + ih) * W + iw)]
                                     : 0.0f;
                acc = std::fma(xe, wv[static_cast<std::size_t>(((m * cg + c) * KH + kh) * KW + kw)], acc);
              }
          y[static_cast<std::size_t>(((n * M + m) * OH + oh) * OW + ow)] = acc;
        }
  return y;
}

TEST(Kernels, ConvIm2colBitIdenticalToDirectConvInKOrder) {
  MemStore mem;
  Placer place(mem);
  for (auto [group, s, p, d] : {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>{1, 1, 1, 1},
                                {2, 2, 1, 1}, {1, 1, 2, 2}}) {
    const pg::Tensor x = random_f16({2, 4, 9, 11}, 8 + s), w = random_f16({6, 4 / group, 3, 3}, 9 + p);
    pg::Attrs attrs{{"group", group},
                    {"strides", std::vector<std::int64_t>{s, s}},
                    {"pads", std::vector<std::int64_t>{p, p, p, p}},
                    {"dilations", std::vector<std::int64_t>{d, d}}};
    const std::vector<float> direct = direct_conv(x, w, group, s, p, d);
    const std::int64_t OH = (9 + 2 * p - d * 2 - 1) / s + 1, OW = (11 + 2 * p - d * 2 - 1) / s + 1;
    const auto out = place.out(pg::DType::F16, {2, 6, OH, OW});
    run_op(mem, op_args("Conv", {place.put(x), place.put(w)}, {out}, attrs));
    const pg::Tensor y = fetch(mem, out);
    ASSERT_EQ(static_cast<std::size_t>(y.numel()), direct.size());
    for (std::size_t i = 0; i < direct.size(); ++i)
      ASSERT_EQ(bits(y)[i], num::to_f16(direct[i]).value.bits) << "group " << group << " element " << i;
    expect_close_f16(y, reference(graph_op("Conv", 2, attrs), {&x, &w}));
  }
}

TEST(Kernels, ConvGradientsMatchReference) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor x = random_f16({2, 4, 7, 7}, 20), w = random_f16({6, 2, 3, 3}, 21), dy = random_f16({2, 6, 4, 4}, 22);
  pg::Attrs conv{{"group", std::int64_t{2}}, {"strides", std::vector<std::int64_t>{2, 2}},
                 {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}};
  pg::Attrs gi = conv, gw = conv;
  gi["input_shape"] = std::vector<std::int64_t>{2, 4, 7, 7};
  gw["weight_shape"] = std::vector<std::int64_t>{6, 2, 3, 3};
  const auto dx = place.out(pg::DType::F16, {2, 4, 7, 7});
  run_op(mem, op_args("ConvGradInput", {place.put(dy), place.put(w)}, {dx}, gi));
  expect_close_f16(fetch(mem, dx), reference(graph_op("ConvGradInput", 2, gi), {&dy, &w}), 4e-3, 4e-3);
  const auto dw = place.out(pg::DType::F16, {6, 2, 3, 3});
  run_op(mem, op_args("ConvGradWeight", {place.put(dy), place.put(x)}, {dw}, gw));
  expect_close_f16(fetch(mem, dw), reference(graph_op("ConvGradWeight", 2, gw), {&dy, &x}), 4e-3, 4e-3);
}

// 1-D and 3-D convolutions train on the chip as 2-D ones do: the gradient kernels take their
// columns from the tap table the forward Conv uses (grouped, strided, padded, dilated).
TEST(Kernels, ConvGradientsOfOneAndThreeSpatialDimsMatchReference) {
  MemStore mem;
  Placer place(mem);
  struct Case {
    pg::Shape x, w, dy;
    pg::Attrs conv;
  };
  const std::vector<Case> cases = {
      {{2, 4, 11}, {6, 2, 3}, {2, 6, 6},
       {{"group", std::int64_t{2}}, {"strides", std::vector<std::int64_t>{2}}, {"pads", std::vector<std::int64_t>{1, 1}}}},
      {{1, 3, 9}, {4, 3, 2}, {1, 4, 7}, {{"dilations", std::vector<std::int64_t>{2}}}},
      {{1, 2, 5, 4, 6}, {3, 2, 3, 2, 3}, {1, 3, 3, 2, 3},
       {{"strides", std::vector<std::int64_t>{2, 2, 2}}, {"pads", std::vector<std::int64_t>{1, 0, 1, 1, 1, 1}}}},
  };
  int seed = 40;
  for (const Case& k : cases) {
    const pg::Tensor x = random_f16(k.x, seed++), w = random_f16(k.w, seed++), dy = random_f16(k.dy, seed++);
    pg::Attrs gi = k.conv, gw = k.conv;
    gi["input_shape"] = std::vector<std::int64_t>(k.x.begin(), k.x.end());
    gw["weight_shape"] = std::vector<std::int64_t>(k.w.begin(), k.w.end());
    const auto dx = place.out(pg::DType::F16, k.x);
    run_op(mem, op_args("ConvGradInput", {place.put(dy), place.put(w)}, {dx}, gi));
    expect_close_f16(fetch(mem, dx), reference(graph_op("ConvGradInput", 2, gi), {&dy, &w}), 4e-3, 4e-3);
    const auto dw = place.out(pg::DType::F16, k.w);
    run_op(mem, op_args("ConvGradWeight", {place.put(dy), place.put(x)}, {dw}, gw));
    expect_close_f16(fetch(mem, dw), reference(graph_op("ConvGradWeight", 2, gw), {&dy, &x}), 4e-3, 4e-3);
  }
}

TEST(Kernels, MatMulGradsFoldBroadcastBatchesIntoK) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor a = random_f16({3, 5, 8}, 30), b = random_f16({8, 6}, 31), dy = random_f16({3, 5, 6}, 32);
  pg::Attrs ga{{"a_shape", std::vector<std::int64_t>{3, 5, 8}}}, gb{{"b_shape", std::vector<std::int64_t>{8, 6}}};
  const auto da = place.out(pg::DType::F16, {3, 5, 8});
  run_op(mem, op_args("MatMulGradA", {place.put(dy), place.put(b)}, {da}, ga));
  expect_close_f16(fetch(mem, da), reference(graph_op("MatMulGradA", 2, ga), {&dy, &b}));
  // dB sums the 3 batches: one accumulation over k = (batch, m), i.e. A'^T @ dY' with A', dY' stacked.
  const auto db = place.out(pg::DType::F16, {8, 6});
  run_op(mem, op_args("MatMulGradB", {place.put(a), place.put(dy)}, {db}, gb));
  const pg::Tensor got = fetch(mem, db);
  std::vector<num::f16> expect(48);
  num::gemm(8, 6, 15, num::GemmOperand{a.data<std::uint16_t>().data(), num::InType::F16, 8, true},
            num::GemmOperand{dy.data<std::uint16_t>().data(), num::InType::F16, 6, false},
            num::GemmOutput{expect.data(), num::OutType::F16, 6});
  for (std::size_t i = 0; i < expect.size(); ++i) ASSERT_EQ(bits(got)[i], expect[i].bits) << "element " << i;
}

TEST(Kernels, VectorOpsRoundFp32ReferenceOnce) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor x = random_f16({4, 33}, 40, -3.0f, 3.0f);
  for (const char* type : {"Relu", "Softmax", "Gelu", "Sigmoid"}) {
    const auto out = place.out(pg::DType::F16, {4, 33});
    run_op(mem, op_args(type, {place.put(x)}, {out}));
    // Exactly one rounding of the FP32 reference result.
    const std::vector<float> ref = reference(graph_op(type, 1), {&x});
    const pg::Tensor y = fetch(mem, out);
    for (std::size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(bits(y)[i], num::to_f16(ref[i]).value.bits) << type << " element " << i;
  }
  // BF16 and FP32 outputs.
  const pg::Tensor xb = random_f16({64}, 41, -2.0f, 2.0f, pg::DType::BF16);
  const auto ob = place.out(pg::DType::BF16, {64});
  run_op(mem, op_args("Tanh", {place.put(xb)}, {ob}));
  const std::vector<float> rb = reference(graph_op("Tanh", 1), {&xb});
  const pg::Tensor yb = fetch(mem, ob);
  for (std::size_t i = 0; i < rb.size(); ++i) ASSERT_EQ(bits(yb)[i], num::to_bf16(rb[i]).value.bits);
}

TEST(Kernels, PrivateFormatsAreConvertedByTheMte) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor a = random_f16({40, 24}, 50), b = random_f16({24, 36}, 51);
  const auto plain = place.out(pg::DType::F16, {40, 36});
  const auto nz = place.out(pg::DType::F16, {40, 36}, pg::Format::FRACTAL_NZ);
  run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {plain}));
  run_op(mem, op_args("MatMul", {place.put(a, pg::Format::FRACTAL_NZ), place.put(b, pg::Format::FRACTAL_NZ)}, {nz}));
  EXPECT_EQ(bits(fetch(mem, plain)), bits(fetch(mem, nz)));

  const pg::Tensor x = random_f16({2, 20, 3, 5}, 52);
  const auto o1 = place.out(pg::DType::F16, {2, 20, 3, 5});
  const auto o2 = place.out(pg::DType::F16, {2, 20, 3, 5}, pg::Format::NC1HWC0);
  run_op(mem, op_args("Relu", {place.put(x)}, {o1}));
  run_op(mem, op_args("Relu", {place.put(x, pg::Format::NC1HWC0)}, {o2}));
  EXPECT_EQ(bits(fetch(mem, o1)), bits(fetch(mem, o2)));
}

TEST(Kernels, FusedMatMulBiasGeluKeepsIntermediatesInFp32) {
  MemStore mem;
  Placer place(mem);
  const std::int64_t M = 16, K = 48, N = 32;
  const pg::Tensor a = random_f16({M, K}, 60), w = random_f16({K, N}, 61), bias = random_f16({N}, 62);
  const auto out = place.out(pg::DType::F16, {M, N});
  ps::OpArgs args = op_args("FusedMatMulBiasGelu", {place.put(a), place.put(w), place.put(bias)}, {out});
  args.num_internal = 2;
  args.fused_body = {{"MatMul", "mm", {}, {0, 1}, {4}}, {"Add", "add", {}, {4, 2}, {5}}, {"Gelu", "gelu", {}, {5}, {3}}};
  auto run = run_op(mem, args);
  // Expected: FP32 GEMM result, FP32 bias add and Gelu on the reference kernels, one rounding.
  std::vector<float> acc(static_cast<std::size_t>(M * N));
  num::gemm(M, N, K, num::GemmOperand{a.data<std::uint16_t>().data(), num::InType::F16, K, false},
            num::GemmOperand{w.data<std::uint16_t>().data(), num::InType::F16, N, false},
            num::GemmOutput{acc.data(), num::OutType::F32, N});
  const pg::Tensor t0 = pg::Tensor::from_f32({M, N}, acc, pg::DType::F32);
  const pg::Tensor bf = pg::Tensor::from_f32({N}, bias.to_f32(), pg::DType::F32);
  const pg::Tensor t1 = pg::run_reference(graph_op("Add", 2), std::vector<const pg::Tensor*>{&t0, &bf},
                                          pg::RefPrecision::F32)[0];
  const std::vector<float> t2 =
      pg::run_reference(graph_op("Gelu", 1), std::vector<const pg::Tensor*>{&t1}, pg::RefPrecision::F32)[0].to_f32();
  const pg::Tensor y = fetch(mem, out);
  for (std::size_t i = 0; i < t2.size(); ++i) ASSERT_EQ(bits(y)[i], num::to_f16(t2[i]).value.bits) << "element " << i;
  expect_only_underflow(run.detection().outputs.at(0), t2);  // Gelu of negative inputs gets tiny
}

// The fused kernel's body as prepare() builds it once per args block gives the same values, flags
// and work as the body rebuilt in each call; a prepared body that does not fit the operands
// (prepared for 16 rows, run on 8) is refused rather than used.
TEST(Kernels, FusedBodyPreparedOnceMatchesTheBodyBuiltPerCall) {
  namespace pk = pc::kernels;
  MemStore mem;
  Placer place(mem);
  auto fused_args = [&](std::int64_t M, const pg::Tensor& a, const pg::Tensor& w, const pg::Tensor& bias) {
    ps::OpArgs args = op_args("FusedMatMulBiasGelu", {place.put(a), place.put(w), place.put(bias)},
                              {place.out(pg::DType::F16, {M, 32})});
    args.num_internal = 2;
    args.fused_body = {{"MatMul", "mm", {}, {0, 1}, {4}}, {"Add", "add", {}, {4, 2}, {5}}, {"Gelu", "gelu", {}, {5}, {3}}};
    return ps::decode_op_args(ps::encode_op_args(args));
  };
  const pg::Tensor a = random_f16({16, 48}, 70), w = random_f16({48, 32}, 71), bias = random_f16({32}, 72);
  const pk::PreparedOp prep(fused_args(16, a, w, bias));
  ASSERT_NE(prep.state, nullptr);
  const std::vector<const pg::Tensor*> ins{&a, &w, &bias};
  const pk::Kernel& kern = *prep.kernel;
  const pk::KernelCall prepared{prep.args, prep.op, ins, prep.out_descs, {}, prep.accum, nullptr, nullptr, nullptr, prep.state.get()};
  const pk::KernelCall built{prep.args, prep.op, ins, prep.out_descs, {}, prep.accum};
  const pk::Computed x = kern.compute(prepared), y = kern.compute(built);
  ASSERT_EQ(x.values.size(), 1u);
  ASSERT_EQ(y.values.size(), 1u);
  ASSERT_EQ(x.values[0].size(), 16u * 32u);
  for (std::size_t i = 0; i < x.values[0].size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(x.values[0][i]), std::bit_cast<std::uint32_t>(y.values[0][i])) << i;
  EXPECT_EQ(x.flags.at(0).flags, y.flags.at(0).flags);
  const pk::OpWork wx = kern.work(prepared), wy = kern.work(built);
  ASSERT_EQ(wx.gemms.size(), 1u);
  ASSERT_EQ(wy.gemms.size(), 1u);
  EXPECT_EQ(std::tie(wx.gemms[0].m, wx.gemms[0].n, wx.gemms[0].k), std::make_tuple(std::int64_t{16}, std::int64_t{32}, std::int64_t{48}));
  EXPECT_EQ(std::tie(wx.gemms[0].m, wx.gemms[0].n, wx.gemms[0].k), std::tie(wy.gemms[0].m, wy.gemms[0].n, wy.gemms[0].k));
  EXPECT_EQ(wx.vector_elems, wy.vector_elems);
  EXPECT_GT(wx.vector_elems, 0u);
  EXPECT_EQ(wx.flops, wy.flops);
  EXPECT_EQ(wx.in_bytes, wy.in_bytes);

  // A Vector body (Add, Gelu) prepared for 16 rows and called with 8: refused by name.
  auto vector_args = [&](std::int64_t M, const pg::Tensor& x) {
    ps::OpArgs args = op_args("FusedBiasGelu", {place.put(x), place.put(bias)}, {place.out(pg::DType::F16, {M, 32})});
    args.num_internal = 1;
    args.fused_body = {{"Add", "add", {}, {0, 1}, {3}}, {"Gelu", "gelu", {}, {3}, {2}}};
    return ps::decode_op_args(ps::encode_op_args(args));
  };
  const pg::Tensor x16 = random_f16({16, 32}, 73), x8 = random_f16({8, 32}, 74);
  const pk::PreparedOp v16(vector_args(16, x16)), v8(vector_args(8, x8));
  const std::vector<const pg::Tensor*> ins8{&x8, &bias};
  const pk::KernelCall misfit{v8.args, v8.op, ins8, v8.out_descs, {}, v8.accum, nullptr, nullptr, nullptr, v16.state.get()};
  try {
    (void)kern.compute(misfit);
    ADD_FAILURE() << "a body prepared for other operands was used";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("body op 0 ('add')"), std::string::npos) << e.what();
  }
  const pk::KernelCall fits{v8.args, v8.op, ins8, v8.out_descs, {}, v8.accum, nullptr, nullptr, nullptr, v8.state.get()};
  EXPECT_EQ(kern.compute(fits).values.at(0).size(), 8u * 32u);
}

TEST(Kernels, UnknownOpTypeAndBadShapesAreErrors) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor a = random_f16({4, 4}, 70);
  EXPECT_THROW(run_op(mem, op_args("NoSuchOp", {place.put(a)}, {place.out(pg::DType::F16, {4, 4})})),
               std::runtime_error);
  EXPECT_THROW(run_op(mem, op_args("Relu", {place.put(a)}, {place.out(pg::DType::F16, {5, 4})})), std::runtime_error);
}

TEST(Kernels, FusedConvBnReluIsCloserToFp32ThanTheUnfusedChain) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor x = random_f16({2, 8, 10, 10}, 90), w = random_f16({16, 8, 3, 3}, 91);
  const pg::Tensor scale = random_f16({16}, 92, 2.0f, 6.0f), bias = random_f16({16}, 93);
  const pg::Tensor mean = random_f16({16}, 94), var = random_f16({16}, 95, 0.05f, 0.3f);
  const pg::Attrs pads{{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}};
  pg::Op conv = graph_op("Conv", 2, pads), bn = graph_op("BatchNormalization", 5), relu = graph_op("Relu", 1);
  conv.inputs = {"x", "w"};
  conv.outputs = {"f/conv:0"};
  bn.inputs = {"f/conv:0", "scale", "b", "mean", "var"};
  bn.outputs = {"f/bn:0"};
  relu.inputs = {"f/bn:0"};
  relu.outputs = {"y"};
  pg::Op fused;
  fused.name = "f";
  fused.type = "FusedConvBnRelu";
  fused.inputs = {"x", "w", "scale", "b", "mean", "var"};
  fused.outputs = {"y"};
  fused.fused_body = {conv, bn, relu};
  const pg::Shape ys{2, 16, 10, 10};
  const std::vector<ps::TensorRef> in{place.put(x), place.put(w), place.put(scale), place.put(bias), place.put(mean),
                                      place.put(var)};
  const auto out = place.out(pg::DType::F16, ys);
  run_op(mem, pc::kernels::args_from_op(fused, in, {out}));
  const std::vector<float> got = fetch(mem, out).to_f32();

  // The same chain unfused: every intermediate is rounded to FP16 in HBM.
  const auto c16 = place.out(pg::DType::F16, ys), b16 = place.out(pg::DType::F16, ys), r16 = place.out(pg::DType::F16, ys);
  run_op(mem, op_args("Conv", {in[0], in[1]}, {c16}, pads));
  run_op(mem, op_args("BatchNormalization", {c16, in[2], in[3], in[4], in[5]}, {b16}));
  run_op(mem, op_args("Relu", {b16}, {r16}));
  const std::vector<float> unfused = fetch(mem, r16).to_f32();

  std::vector<pg::Tensor> f32;
  for (const pg::Tensor* t : {&x, &w, &scale, &bias, &mean, &var})
    f32.push_back(pg::Tensor::from_f32(t->shape(), t->to_f32(), pg::DType::F32));
  std::vector<const pg::Tensor*> ptrs;
  for (const auto& t : f32) ptrs.push_back(&t);
  const std::vector<float> ref = pg::run_fused_body(fused, ptrs, pg::RefPrecision::F32).at(0).to_f32();
  double err_fused = 0, err_unfused = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(got[i], ref[i], 4e-3 + 2e-3 * std::fabs(ref[i])) << "element " << i;
    err_fused += std::fabs(got[i] - ref[i]);
    err_unfused += std::fabs(unfused[i] - ref[i]);
  }
  EXPECT_LT(err_fused, 0.8 * err_unfused);
}

// im2col against its definition, element by element: strides, dilations and paddings that put
// whole rows and parts of rows outside the image, for every element width a kernel passes. The
// other trials are "same" convolutions (unit strides, rows as wide as the image's, packed
// columns), which im2col copies a tap's rows at once, or reads through masks where the rows are
// narrow (the last hundred: rows of 8 to 47 elements, so that every element width has runs of
// whole 32-byte vectors, and rows on both sides of the masked path's limit).
TEST(Kernels, Im2colMatchesItsDefinitionForStridesDilationsAndPads) {
  std::uint32_t seed = 7;
  auto next = [&](std::uint32_t m) { seed = seed * 1664525u + 1013904223u; return (seed >> 8) % m; };
  int same = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const bool same_conv = trial >= 200, wide = trial >= 400;
    pc::kernels::ConvShape g;
    g.c = 1 + next(3), g.h = 1 + next(7), g.w = 1 + next(9), g.kh = 1 + next(3), g.kw = 1 + next(4);
    if (wide) g.h = 1 + next(12), g.w = 8 + next(40);
    g.sh = 1 + next(3), g.sw = 1 + next(3), g.dh = 1 + next(2), g.dw = 1 + next(3);
    g.ph = next(3), g.pw = next(4);
    if (same_conv) {
      g.sh = g.sw = 1;
      g.kw = 1 + 2 * next(3);  // 1, 3, 5: the padding dw (kw - 1) / 2 keeps the width
      g.pw = g.dw * (g.kw - 1) / 2;
    }
    g.oh = (g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
    g.ow = (g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
    if (g.oh < 1 || g.ow < 1) continue;
    same += same_conv && g.ow == g.w;
    // row stride beyond the columns (none for the same convolutions)
    const std::int64_t P = g.cols() + (same_conv ? 0 : static_cast<std::int64_t>(next(3)));
    for (std::size_t elem : {1u, 2u, 4u, 8u}) {
      std::vector<std::byte> img(static_cast<std::size_t>(g.c * g.h * g.w) * elem);
      for (auto& b : img) b = static_cast<std::byte>(1 + next(255));
      std::vector<std::byte> cols(static_cast<std::size_t>(g.rows() * P) * elem, std::byte{0xEE});
      pc::kernels::im2col(g, img.data(), elem, cols.data(), P);
      for (std::int64_t ci = 0; ci < g.c; ++ci)
        for (std::int64_t i = 0; i < g.kh; ++i)
          for (std::int64_t j = 0; j < g.kw; ++j)
            for (std::int64_t y = 0; y < g.oh; ++y)
              for (std::int64_t x = 0; x < g.ow; ++x) {
                const std::int64_t iy = y * g.sh - g.ph + i * g.dh, ix = x * g.sw - g.pw + j * g.dw;
                const std::byte* got = cols.data() + static_cast<std::size_t>(((ci * g.kh + i) * g.kw + j) * P + y * g.ow + x) * elem;
                for (std::size_t b = 0; b < elem; ++b) {
                  const std::byte want = iy < 0 || iy >= g.h || ix < 0 || ix >= g.w
                                             ? std::byte{0}
                                             : img[static_cast<std::size_t>((ci * g.h + iy) * g.w + ix) * elem + b];
                  ASSERT_EQ(got[b], want) << "trial " << trial << " elem " << elem << " ci " << ci << " i " << i << " j "
                                          << j << " y " << y << " x " << x;
                }
              }
      // the row padding beyond the columns is left alone
      for (std::int64_t r = 0; r < g.rows(); ++r)
        for (std::int64_t p = g.cols(); p < P; ++p)
          ASSERT_EQ(cols[static_cast<std::size_t>(r * P + p) * elem], std::byte{0xEE});
    }
  }
  EXPECT_GT(same, 250);
}

// The recurrent ops' Cube GEMMs run in the op's accumulation mode: an FP16 accumulator overflows
// in X W^T where FP32 does not, and the overflow is latched at the LSTM's output although the
// saturating gates leave every output finite. With FP32 accumulation the chip agrees with the
// FP32 reference within FP16 rounding.
TEST(Kernels, LstmGemmsFollowTheAccumulationMode) {
  const std::int64_t S = 3, B = 2, I = 300, H = 8;
  const pg::Tensor x = random_f16({S, B, I}, 11, 0.0f, 1000.0f);  // sums near 75000 > 65504
  const pg::Tensor w = random_f16({1, 4 * H, I}, 12, 0.0f, 1.0f), r = random_f16({1, 4 * H, H}, 13);
  for (auto accum : {ps::AccumDType::FP32, ps::AccumDType::FP16_RN}) {
    MemStore mem;
    Placer place(mem);
    const auto y = place.out(pg::DType::F16, {S, 1, B, H}), yh = place.out(pg::DType::F16, {1, B, H});
    auto args = op_args("LSTM", {place.put(x), place.put(w), place.put(r)}, {y, yh}, {{"hidden_size", std::int64_t{H}}});
    args.accum = accum;
    const auto runner = run_op(mem, args);
    const bool overflow = runner.detection().outputs.at(0).kinds[ps::kExcOverflow].hit();
    EXPECT_EQ(overflow, accum != ps::AccumDType::FP32) << "accum " << int(accum);
    const pg::Tensor got = fetch(mem, y);
    for (float v : got.to_f32()) ASSERT_TRUE(std::isfinite(v));
    if (accum == ps::AccumDType::FP32) {
      const pg::Op op = pc::kernels::op_from_args(args);
      const std::vector<float> want = reference(op, {&x, &w, &r});
      const std::vector<float> have = got.to_f32();
      for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(have[i], want[i], 2e-3 + 2e-3 * std::fabs(want[i])) << i;
    }
  }
}

// The op's work and tile plans are made once per prepared op and equal what the kernel and
// plan_tiles give for the same arguments; a plan is kept per core count and statistics bytes.
TEST(Kernels, PreparedOpKeepsItsWorkAndPlansPerCoreCount) {
  namespace pk = pc::kernels;
  MemStore mem;
  Placer place(mem);
  const pg::Tensor a = random_f16({64, 96}, 80), b = random_f16({96, 48}, 81);
  auto prep = std::make_shared<const pk::PreparedOp>(ps::decode_op_args(ps::encode_op_args(
      op_args("MatMul", {place.put(a), place.put(b)}, {place.out(pg::DType::F16, {64, 48})}))));
  pk::OpRunner first(prep, {}), second(prep, {});
  first.load(mem, nullptr, pc::FaultSite{});
  second.load(mem, nullptr, pc::FaultSite{});
  const std::vector<const pg::Tensor*> ins{&a, &b};
  const pk::OpWork direct = prep->kernel->work(pk::KernelCall{prep->args, prep->op, ins, prep->out_descs, {}, prep->accum});
  for (const pk::OpWork& w : {first.work(), second.work()}) {
    ASSERT_EQ(w.gemms.size(), 1u);
    EXPECT_EQ(std::tie(w.gemms[0].m, w.gemms[0].n, w.gemms[0].k), std::tie(direct.gemms[0].m, direct.gemms[0].n, direct.gemms[0].k));
    EXPECT_EQ(std::tie(w.flops, w.in_bytes, w.out_bytes, w.vector_elems), std::tie(direct.flops, direct.in_bytes, direct.out_bytes, direct.vector_elems));
  }
  pk::CoreTimingParams p;
  pk::OpWork w = first.work();
  const auto p2 = prep->plan(w, p, 2, 64 * 48), p2again = prep->plan(w, p, 2, 64 * 48), p5 = prep->plan(w, p, 5, 64 * 48);
  EXPECT_EQ(p2.get(), p2again.get());
  EXPECT_NE(p2.get(), p5.get());
  for (const auto& [plan, cores] : {std::pair{p2, 2u}, std::pair{p5, 5u}}) {
    const pk::TilePlan fresh = pk::plan_tiles(w, p, cores, 64 * 48);
    ASSERT_EQ(plan->steps.size(), fresh.steps.size());
    EXPECT_EQ(plan->num_tiles, fresh.num_tiles);
    EXPECT_EQ(plan->total_steps(), fresh.total_steps());
    for (std::size_t u = 0; u < fresh.steps.size(); ++u)
      for (std::size_t s = 0; s < fresh.steps[u].size(); ++s)
        EXPECT_EQ(plan->steps[u][s].compute_cycles, fresh.steps[u][s].compute_cycles);
  }
  // Other statistics bytes or other core parameters: another plan.
  w.stats_bytes = 4096;
  EXPECT_NE(prep->plan(w, p, 2, 64 * 48).get(), p2.get());
  w.stats_bytes = 0;
  p.mte_bytes_per_cycle *= 2;
  EXPECT_NE(prep->plan(w, p, 2, 64 * 48).get(), p2.get());
}

// A prepared op knows its operands' stored bytes once: the HBM ranges of the present inputs and
// of the outputs (the padded size for a private format) and each input's stored desc, which the
// loads take instead of building one per execution.
TEST(Kernels, PreparedOpKeepsStoredRangesAndDescs) {
  namespace pk = pc::kernels;
  MemStore mem;
  Placer place(mem);
  const pg::Tensor x = random_f16({2, 20, 3, 5}, 82), y = random_f16({2, 20, 3, 5}, 83);
  ps::OpArgs args = op_args("Add", {place.put(x, pg::Format::NC1HWC0), place.put(y)},
                              {place.out(pg::DType::F16, {2, 20, 3, 5}, pg::Format::NC1HWC0)});
  const pk::PreparedOp prep(args);
  const std::uint64_t padded = 2 * 2 * 3 * 5 * 16 * 2, plain = 2 * 20 * 3 * 5 * 2;  // C1 = 2 blocks of C0 = 16
  ASSERT_EQ(prep.input_ranges.size(), 2u);
  ASSERT_EQ(prep.output_ranges.size(), 1u);
  EXPECT_EQ(prep.input_ranges[0].addr, args.inputs[0].addr);
  EXPECT_EQ(prep.input_ranges[0].bytes, padded);
  EXPECT_EQ(prep.input_ranges[1].addr, args.inputs[1].addr);
  EXPECT_EQ(prep.input_ranges[1].bytes, plain);
  EXPECT_EQ(prep.output_ranges[0].addr, args.outputs[0].addr);
  EXPECT_EQ(prep.output_ranges[0].bytes, padded);
  ASSERT_EQ(prep.input_stored.size(), 2u);
  EXPECT_EQ(prep.input_stored[0], pk::stored_desc(args.inputs[0]));
  EXPECT_EQ(prep.input_stored[0].format, pg::Format::NC1HWC0);
  EXPECT_EQ(prep.input_stored[1], pk::stored_desc(args.inputs[1]));
  ASSERT_EQ(prep.output_stored.size(), 1u);
  EXPECT_EQ(prep.output_stored[0], pk::stored_desc(args.outputs[0]));
  // An absent input has no range, and the loads still see every input in its place.
  args.inputs[1].dtype = ps::kAbsentTensor;
  const pk::PreparedOp one(args);
  EXPECT_EQ(one.input_ranges.size(), 1u);
  EXPECT_EQ(one.input_stored.size(), 2u);
  EXPECT_EQ(one.input_stored[1], pg::TensorDesc{});
}
