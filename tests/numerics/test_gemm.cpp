// GEMM with FP32 accumulation: bit-exact against plain scalar loops in the documented order,
// per-element flags and first offending elements against an element-wise model built from the
// (separately tested) scalar ops, bad API use.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "numerics/arith.h"
#include "numerics/bf16.h"
#include "numerics/fp16.h"
#include "numerics/fp32.h"
#include "numerics/gemm.h"
#include "tests/numerics/common.h"
#include "tests/numerics/gemm_util.h"

namespace probelab::num {
namespace {

using testing::GemmRun;
using testing::kModes;
using testing::Mat;
using testing::mode_name;
using testing::random_mat;
using testing::run;
using testing::expect_report;

inline float widen(std::uint16_t b, InType t) { return t == InType::F16 ? to_float(f16{b}) : to_float(bf16{b}); }
inline Result<float> read_in(std::uint16_t b, InType t, const Mode& m) {
  const Mode in{OverflowMode::InfNan, m.denormal};
  return t == InType::F16 ? to_f32(f16{b}, in) : to_f32(bf16{b}, in);
}

// The output of the plain scalar loop: acc = +0; for k = 0..K-1: acc = fmaf(a, b, acc); NaN is the
// default NaN (FP32 accumulation, IEEE inputs, no flushing).
std::vector<float> plain_loop(const Mat& A, const Mat& B) {
  std::vector<float> C(static_cast<std::size_t>(A.rows * B.cols));
  for (std::int64_t m = 0; m < A.rows; ++m) {
    for (std::int64_t n = 0; n < B.cols; ++n) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < A.cols; ++k) acc = std::fmaf(widen(A.at(m, k), A.type), widen(B.at(k, n), B.type), acc);
      C[static_cast<std::size_t>(m * B.cols + n)] = std::isnan(acc) ? std::bit_cast<float>(0x7FC00000u) : acc;
    }
  }
  return C;
}

// Element-wise model of value and flags for FP32 accumulation, from the scalar operations.
struct Model {
  std::vector<std::uint32_t> out;  // output bit patterns
  GemmReport rep;
};

Model model_fp32(const Mat& A, const Mat& B, OutType ot, const Mode& mode) {
  const std::int64_t M = A.rows, N = B.cols, K = A.cols;
  Model r;
  r.out.resize(static_cast<std::size_t>(M * N));
  auto raise = [&](Flags f, std::int64_t idx) {
    r.rep.flags |= f;
    for (Flag k : kAllFlags) {
      auto& first = r.rep.first[static_cast<int>(k)];
      if (f.has(k) && (first < 0 || idx < first)) first = idx;
    }
  };
  const Flags keep = ~(Flag::Inexact | Flag::DenormalIn);
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      Flags fl;
      for (std::int64_t k = 0; k < K; ++k) {
        const Result<float> a = read_in(A.at(m, k), A.type, mode);
        const Result<float> b = read_in(B.at(k, n), B.type, mode);
        const Result<float> s = fma(a.value, b.value, acc);
        fl |= ((a.flags | b.flags) & (Flag::Invalid | Flag::DenormalIn)) | (s.flags & keep);
        acc = s.value;
      }
      std::uint32_t bits;
      if (ot == OutType::F32) {
        const Result<float> o = deliver(acc, mode);
        bits = std::bit_cast<std::uint32_t>(o.value);
        fl |= o.flags;
      } else if (ot == OutType::F16) {
        const Result<f16> o = to_f16(acc, mode);
        bits = o.value.bits;
        fl |= o.flags;
      } else {
        const Result<bf16> o = to_bf16(acc, mode);
        bits = o.value.bits;
        fl |= o.flags;
      }
      r.out[static_cast<std::size_t>(m * N + n)] = bits;
      if (fl.any()) raise(fl, m * N + n);
    }
  }
  return r;
}

// Runs the GEMM (FP32 accumulation) and checks values and report against the model.
GemmRun check_model(const Mat& A, const Mat& B, OutType ot, const Mode& m, const std::string& what) {
  const Model want = model_fp32(A, B, ot, m);
  GemmOptions o;
  o.mode = m;
  const GemmRun got = run(A, B, ot, o);
  for (std::size_t i = 0; i < want.out.size(); ++i) {
    if (got.out[i] == want.out[i]) continue;
    ADD_FAILURE() << what << " element " << i << ": " << got.out[i] << " vs " << want.out[i];
    break;
  }
  expect_report(got.rep, want.rep, what);
  return got;
}

TEST(Gemm, Fp32AccumulationBitExactWithPlainLoop) {
  struct Shape { std::int64_t M, N, K; bool ta, tb; };
  for (const Shape& s : {Shape{1, 1, 1, false, false}, Shape{37, 53, 300, false, false}, Shape{130, 70, 600, false, true},
                         Shape{13, 200, 257, true, false}, Shape{100, 33, 40, true, true},
                         Shape{8, 32, 300, false, false}, Shape{15, 16, 513, false, false}}) {  // edge panels of 2, 3 rows
    for (InType t : {InType::F16, InType::BF16}) {
      const Mat A = random_mat(s.M, s.K, t, s.ta, s.M * 7 + s.K);
      const Mat B = random_mat(s.K, s.N, t, s.tb, s.N * 11 + s.K);
      const std::vector<float> want = plain_loop(A, B);
      const GemmRun r = run(A, B, OutType::F32, {});
      ASSERT_EQ(r.out.size(), want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(r.out[i], std::bit_cast<std::uint32_t>(want[i])) << "element " << i << " M=" << s.M << " K=" << s.K;
      }
      EXPECT_TRUE((r.rep.flags & ~Flags(Flag::DenormalIn)).none()) << to_string(r.rep.flags);
      // FP16 output = plain loop then one conversion
      const GemmRun h = run(A, B, OutType::F16, {});
      for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(h.out[i], to_f16(want[i]).value.bits) << i;
    }
  }
}

// Matrices with specials in chosen places: NaN (quiet and signaling), Inf, subnormals, BF16
// extremes, large values that overflow FP16 outputs or FP32 accumulators.
TEST(Gemm, FlagsAndFirstOffendingElementsMatchModel) {
  const std::int64_t M = 23, N = 29, K = 41;
  for (InType t : {InType::F16, InType::BF16}) {
    for (bool tb : {true, false}) {  // B stored transposed, or by rows (one panel of 16, a partial one)
      const bool f16in = t == InType::F16;
      Mat A = random_mat(M, K, t, false, 5, 4.0f);
      Mat B = random_mat(K, N, t, tb, 6, 4.0f);
      const std::uint16_t big = f16in ? 0x7800 : 0x7E80;    // 32768 / 8.5e37
      const std::uint16_t sub = f16in ? 0x0003 : 0x0003;
      const std::uint16_t qnan = f16in ? 0x7E00 : 0x7FC0, snan = f16in ? 0x7C01 : 0x7F81;
      const std::uint16_t inf = f16in ? 0x7C00 : 0x7F80, tiny = f16in ? 0x0400 : 0x0080;
      for (std::int64_t k = 0; k < K; ++k) { A.at(9, k) = big; B.at(k, 13) = big; }  // (9,13) overflows
      A.at(4, 7) = sub;
      B.at(3, 20) = sub;
      A.at(12, 2) = qnan;
      B.at(5, 8) = snan;
      A.at(15, 0) = inf;
      B.at(0, 3) = 0;  // Inf * 0 -> Invalid at (15, 3)
      A.at(17, 1) = inf;
      A.at(17, 2) = static_cast<std::uint16_t>(inf | 0x8000);  // Inf - Inf along row 17 where B > 0
      for (std::int64_t k = 0; k < K; ++k) { A.at(20, k) = tiny; B.at(k, 25) = tiny; }  // tiny products
      for (const Mode& m : kModes) {
        for (OutType ot : {OutType::F32, OutType::F16, OutType::BF16}) {
          const std::string what = std::string(f16in ? "f16 " : "bf16 ") + mode_name(m) + " out=" + std::to_string(int(ot)) +
                                   (tb ? ", B transposed" : ", B by rows");
          const GemmRun got = check_model(A, B, ot, m, what);
          EXPECT_EQ(got.rep.first_nan_a, 12 * K + 2) << what;
          EXPECT_EQ(got.rep.first_nan_b, 5 * N + 8) << what;
          EXPECT_TRUE(got.rep.flags.has(Flag::Invalid)) << what;
          EXPECT_TRUE(got.rep.flags.has(Flag::DenormalIn)) << what;
          if (m.overflow == OverflowMode::InfNan) {
            EXPECT_EQ(got.rep.first_nan_out, 5 * 0 + 8) << what;  // column 8 is NaN from row 0 on
          } else {
            EXPECT_EQ(got.rep.first_nan_out, -1) << what;
            EXPECT_EQ(got.rep.first_inf_out, -1) << what;
          }
        }
      }
    }
  }
}

// Most rows and columns hold infinities or NaNs (inputs past FP16's range): the special-element
// path against the element-wise model.
TEST(Gemm, DenseSpecialsMatchModel) {
  const std::int64_t M = 11, N = 27, K = 33;
  for (bool tb : {true, false}) {  // B stored transposed, or by rows
    Mat A = random_mat(M, K, InType::F16, false, 21, 4.0f);
    Mat B = random_mat(K, N, InType::F16, tb, 22, 4.0f);
    std::mt19937_64 rng(23);
    for (std::int64_t m = 0; m < M; ++m) {
      for (std::int64_t k = 0; k < K; ++k) {
        const auto r = rng() % 10;
        if (r == 0) A.at(m, k) = (rng() & 1) ? 0x7C00 : 0xFC00;
        else if (r == 1) A.at(m, k) = 0;
        else if (r == 2) A.at(m, k) = 0x7E01;
      }
    }
    for (std::int64_t k = 0; k < K; ++k) {
      for (std::int64_t n = 0; n < N; ++n) {
        const auto r = rng() % 12;
        if (r == 0) B.at(k, n) = (rng() & 1) ? 0x7C00 : 0xFC00;
        else if (r == 1) B.at(k, n) = 0x8000;
      }
    }
    B.at(5, 6) = 0x7C02;  // signaling NaN
    A.at(1, 2) = 0x0005;  // subnormal
    for (const Mode& m : kModes) {
      for (OutType ot : {OutType::F32, OutType::F16, OutType::BF16}) {
        check_model(A, B, ot, m, mode_name(m) + " out=" + std::to_string(int(ot)) + (tb ? ", B transposed" : ", B by rows"));
      }
    }
  }
}

// Inf - Inf in the accumulator as the only cause of Invalid: the first Invalid element is its row's first.
TEST(Gemm, InfMinusInfAloneIsTheFirstInvalidElement) {
  const std::int64_t M = 6, N = 9, K = 20;
  Mat A = random_mat(M, K, InType::F16, false, 41, 1.0f);
  Mat B = random_mat(K, N, InType::F16, false, 42, 1.0f);
  for (std::int64_t k = 0; k < K; ++k) {
    for (std::int64_t n = 0; n < N; ++n) B.at(k, n) = to_f16(0.5f + std::abs(to_float(f16{B.at(k, n)}))).value.bits;
  }
  A.at(4, 3) = 0x7C00;
  A.at(4, 7) = 0xFC00;
  for (const Mode& m : kModes) {
    const GemmRun got = check_model(A, B, OutType::F32, m, mode_name(m));
    EXPECT_EQ(got.rep.first_index(Flag::Invalid), 4 * N) << mode_name(m);
  }
}

TEST(Gemm, Fp16OutputOverflowFirstElement) {
  const std::int64_t M = 8, N = 8, K = 4;
  Mat A = random_mat(M, K, InType::F16, false, 1, 0.1f, 0);
  Mat B = random_mat(K, N, InType::F16, false, 2, 0.1f, 0);
  for (std::int64_t k = 0; k < K; ++k) {
    A.at(3, k) = to_f16(200.0f).value.bits;
    A.at(7, k) = to_f16(-200.0f).value.bits;
    B.at(k, 5) = to_f16(200.0f).value.bits;
    B.at(k, 1) = to_f16(200.0f).value.bits;
  }
  for (const Mode& m : {kModes[0], kModes[1]}) {
    GemmOptions o;
    o.mode = m;
    const GemmRun r = run(A, B, OutType::F16, o);
    EXPECT_TRUE(r.rep.flags.has(Flag::Overflow));
    EXPECT_EQ(r.rep.first_index(Flag::Overflow), 3 * N + 1);
    const std::uint16_t want = m.overflow == OverflowMode::InfNan ? 0x7C00 : 0x7BFF;
    EXPECT_EQ(r.out[3 * N + 5], want);
    EXPECT_EQ(r.out[7 * N + 5], want | 0x8000);
    EXPECT_EQ(r.rep.first_inf_out, m.overflow == OverflowMode::InfNan ? 3 * N + 1 : -1);
  }
}

TEST(Gemm, Bf16AccumulatorOverflowIsSticky) {
  const std::int64_t M = 2, N = 3, K = 6;
  Mat A = random_mat(M, K, InType::BF16, false, 3, 0.01f, 0);
  Mat B = random_mat(K, N, InType::BF16, false, 4, 0.01f, 0);
  for (std::int64_t k = 0; k < K; ++k) { A.at(1, k) = 0x7F00; B.at(k, 2) = 0x7F00; }  // 2^127 * 2^127
  B.at(K - 1, 2) = 0xFF00;                                                              // last product negative
  const GemmRun r = run(A, B, OutType::F32, {});
  EXPECT_EQ(r.out[1 * N + 2], 0x7F800000u);
  EXPECT_EQ(r.rep.first_index(Flag::Overflow), 1 * N + 2);
  GemmOptions sat;
  sat.mode = kSaturationMode;
  EXPECT_EQ(run(A, B, OutType::F32, sat).out[1 * N + 2], 0x7F7FFFFFu);
}

TEST(Gemm, EmptyShapes) {
  const Mat A = random_mat(3, 0, InType::F16, false, 1, 1.0f, 1);
  const Mat B = random_mat(0, 4, InType::F16, false, 1, 1.0f, 4);
  const GemmRun r = run(A, B, OutType::F32, {});
  for (std::uint32_t x : r.out) EXPECT_EQ(x, 0u);
  EXPECT_TRUE(r.rep.flags.none());
  EXPECT_NO_THROW(gemm(0, 0, 5, GemmOperand{}, GemmOperand{}, GemmOutput{}, {}));
}

TEST(Gemm, BadApiUseThrows) {
  std::vector<std::uint16_t> a(64), b(64);
  std::vector<float> c(64);
  const GemmOperand A{a.data(), InType::F16, 8, false}, B{b.data(), InType::F16, 8, false};
  const GemmOutput C{c.data(), OutType::F32, 8};
  EXPECT_NO_THROW(gemm(8, 8, 8, A, B, C));
  EXPECT_THROW(gemm(8, 8, 9, A, B, C), std::invalid_argument);          // lda < K
  EXPECT_THROW(gemm(-1, 8, 8, A, B, C), std::invalid_argument);
  EXPECT_THROW(gemm(8, 8, 8, GemmOperand{nullptr, InType::F16, 8, false}, B, C), std::invalid_argument);
  EXPECT_THROW(gemm(8, 8, 8, A, GemmOperand{b.data(), InType::BF16, 8, false}, C), std::invalid_argument);
  EXPECT_THROW(gemm(8, 8, 8, GemmOperand{a.data(), static_cast<InType>(7), 8, false}, B, C), std::invalid_argument);
  EXPECT_THROW(gemm(8, 8, 8, A, B, GemmOutput{c.data(), static_cast<OutType>(9), 8}), std::invalid_argument);
  EXPECT_THROW(gemm(8, 8, 8, A, B, GemmOutput{c.data(), OutType::F32, 4}), std::invalid_argument);
  GemmOptions o;
  o.accum = static_cast<Accum>(5);
  EXPECT_THROW(gemm(8, 8, 8, A, B, C, o), std::invalid_argument);
  o.accum = Accum::Fp16Rn;
  o.split_k = 4;
  EXPECT_THROW(gemm(8, 8, 8, A, B, C, o), std::invalid_argument);
  o = {};
  o.mode.denormal = static_cast<DenormalMode>(3);
  EXPECT_THROW(gemm(8, 8, 8, A, B, C, o), std::invalid_argument);
  try {
    gemm(8, 8, 9, A, B, C);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("A.ld"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace probelab::num
