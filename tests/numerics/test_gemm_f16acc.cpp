// FP16-accumulation GEMM against an exact (__int128) reference on data that drives every path of the
// kernel (numerics/gemm_f16acc.cpp): FP16 midpoints, exact and inexact (the careful step); tiny and
// subnormal accumulators (the flush-to-zero detection and the exact redo of a K block); overflow in
// tiles whose norm bound fails (tracked) beside tiles where it holds, in saturation mode coming back
// into range; NaN, Inf and signaling NaN inputs and subnormal inputs (the special-element path);
// every Mode; and the caller's MXCSR (flush-to-zero, DAZ) neither changing the results nor being
// changed.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "numerics/fp16.h"
#include "numerics/gemm.h"
#include "tests/numerics/common.h"
#include "tests/numerics/gemm_util.h"
#include "tests/numerics/reference.h"

namespace probelab::num {
namespace {

using testing::GemmRun;
using testing::kModes;
using testing::Mat;
using testing::mode_name;
using testing::run;

bool subnormal16(std::uint16_t h) { return (h & 0x7C00u) == 0 && (h & 0x3FFu) != 0; }

// One element's FP16 accumulation, step by step, as gemm.h defines it.
struct ElementRef {
  Accum accum;
  Mode mode;
  std::uint16_t acc = 0;
  Flags flags{};
  // RN16(RN32(acc + a*b)) through the Mode: the FP32 sum of the operands read through the Mode
  // (special cases as ref::Fast::fma), then rounded to FP16 (a NaN sum: the default NaN, or +0 when
  // saturating; an infinite one: +-Inf or +-max, without flags).
  ref::Out via_fp32(std::uint16_t a, std::uint16_t b) const {
    using F = ref::Fast;
    Flags fl;
    const F::Val va = F::decode(ref::kF16, a, mode, fl), vb = F::decode(ref::kF16, b, mode, fl);
    const F::Val vc = F::decode(ref::kF16, acc, mode, fl);
    const ref::Out nan{mode.overflow == OverflowMode::Saturation ? 0u : ref::kF16.qnan(), {}};
    if ((va.inf && !vb.nan && vb.zero()) || (vb.inf && !va.nan && va.zero())) return {nan.bits, fl | Flag::Invalid};
    if (va.nan || vb.nan || vc.nan) return {nan.bits, fl};
    const bool p_inf = va.inf || vb.inf, p_neg = va.neg != vb.neg;
    if (p_inf && vc.inf && p_neg != vc.neg) return {nan.bits, fl | Flag::Invalid};
    if (p_inf || vc.inf) {
      F::Val inf;
      inf.inf = true;
      inf.neg = p_inf ? p_neg : vc.neg;
      return F::round(ref::kF16, inf, mode, fl);
    }
    const ref::Out t = F::round(ref::kF32, F::exact_add(F::exact_mul(va, vb), vc), Mode{}, fl);
    Flags ignored;
    return F::round(ref::kF16, F::decode(ref::kF32, t.bits, Mode{}, ignored), mode, t.flags);
  }
  void step(std::uint16_t a, std::uint16_t b) {
    ref::Out r;
    if (accum == Accum::Fp16Rn) {
      r = ref::Fast::fma(ref::kF16, a, b, acc, mode);
    } else {
      r = via_fp32(a, b);
    }
    flags |= r.flags & ~(Flag::Inexact | Flag::DenormalIn);
    acc = static_cast<std::uint16_t>(r.bits);
  }
};

struct Expected {
  std::vector<std::uint32_t> out;  // FP16 patterns
  GemmReport rep;
};

Expected reference(const Mat& A, const Mat& B, Accum accum, const Mode& mode) {
  const std::int64_t M = A.rows, N = B.cols, K = A.cols;
  Expected e;
  e.out.resize(static_cast<std::size_t>(M * N));
  std::vector<bool> row_den(static_cast<std::size_t>(M)), col_den(static_cast<std::size_t>(N));
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t k = 0; k < K; ++k) row_den[m] = row_den[m] || subnormal16(A.at(m, k));
  }
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t k = 0; k < K; ++k) col_den[n] = col_den[n] || subnormal16(B.at(k, n));
  }
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t n = 0; n < N; ++n) {
      ElementRef el{accum, mode};
      for (std::int64_t k = 0; k < K; ++k) el.step(A.at(m, k), B.at(k, n));
      Flags f = el.flags;
      if (row_den[m] || col_den[n]) f |= Flag::DenormalIn;
      const std::int64_t idx = m * N + n;
      e.out[static_cast<std::size_t>(idx)] = el.acc;
      e.rep.flags |= f;
      for (Flag k : kAllFlags) {
        auto& first = e.rep.first[static_cast<int>(k)];
        if (f.has(k) && first < 0) first = idx;
      }
      const bool nan = (el.acc & 0x7C00u) == 0x7C00u && (el.acc & 0x3FFu) != 0;
      const bool inf = (el.acc & 0x7FFFu) == 0x7C00u;
      if (nan && e.rep.first_nan_out < 0) e.rep.first_nan_out = idx;
      if (inf && e.rep.first_inf_out < 0) e.rep.first_inf_out = idx;
    }
  }
  return e;
}

// Checks gemm (FP16 output) against the reference in every Mode, both accumulations.
void check_all(const Mat& A, const Mat& B, const std::string& what) {
  for (Accum accum : {Accum::Fp16Rn, Accum::Fp16ViaFp32}) {
    for (const Mode& mode : kModes) {
      const Expected want = reference(A, B, accum, mode);
      GemmOptions o;
      o.accum = accum;
      o.mode = mode;
      const GemmRun got = run(A, B, OutType::F16, o);
      const std::string ctx = what + " " + (accum == Accum::Fp16Rn ? "rn " : "via-fp32 ") + mode_name(mode);
      for (std::size_t i = 0; i < want.out.size(); ++i) {
        ASSERT_EQ(got.out[i], want.out[i]) << ctx << " element " << i / B.cols << "," << i % B.cols;
      }
      testing::expect_report(got.rep, want.rep, ctx);
      EXPECT_EQ(got.rep.first_nan_out, want.rep.first_nan_out) << ctx;
      EXPECT_EQ(got.rep.first_inf_out, want.rep.first_inf_out) << ctx;
    }
  }
}

Mat filled(std::int64_t rows, std::int64_t cols, bool trans, std::uint64_t seed,
           const std::function<float(std::mt19937_64&, std::int64_t, std::int64_t)>& gen) {
  Mat m = testing::random_mat(rows, cols, InType::F16, trans, seed);
  std::mt19937_64 rng(seed * 7 + 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) m.at(r, c) = to_f16(gen(rng, r, c)).value.bits;
  }
  return m;
}

// Values with few significant bits: sums land exactly on FP16 midpoints often, and with the odd
// 11-bit value in between, inexactly too.
float few_bits(std::mt19937_64& rng) {
  const int kind = static_cast<int>(rng() % 4);
  const float sign = (rng() & 1) ? -1.0f : 1.0f;
  if (kind == 0) return sign * static_cast<float>(1 + rng() % 2047) / 1024.0f;  // 11 bits
  if (kind == 1) return sign * static_cast<float>(rng() % 64) * 0.125f;
  if (kind == 2) return sign * std::ldexp(1.0f, static_cast<int>(rng() % 12) - 4);
  return sign * static_cast<float>(1 + 2 * (rng() % 8)) * std::ldexp(1.0f, static_cast<int>(rng() % 9) - 8);
}

// Every test with each instruction set of the tile (gemm.h GemmIsa; same bits): AVX-512 where the
// CPU has it, else that case is skipped.
class GemmF16Acc : public ::testing::TestWithParam<GemmIsa> {
 protected:
  void SetUp() override {
    saved_ = gemm_isa();
    if (!set_gemm_isa(GetParam())) GTEST_SKIP() << "this CPU has no AVX-512 (F, VL, BW, DQ)";
  }
  void TearDown() override { set_gemm_isa(saved_); }

 private:
  GemmIsa saved_ = GemmIsa::Avx2;
};

INSTANTIATE_TEST_SUITE_P(Isa, GemmF16Acc, ::testing::Values(GemmIsa::Avx2, GemmIsa::Avx512),
                         [](const ::testing::TestParamInfo<GemmIsa>& i) {
                           return std::string(i.param == GemmIsa::Avx2 ? "Avx2" : "Avx512");
                         });

TEST_P(GemmF16Acc, MidpointsExactAndInexact) {
  // K spans several K blocks; M = 9 is two 4-row tiles and a single row; N = 37 pads its last panel.
  const Mat A = filled(9, 300, false, 1, [](std::mt19937_64& g, std::int64_t, std::int64_t) { return few_bits(g); });
  const Mat B = filled(300, 37, true, 2, [](std::mt19937_64& g, std::int64_t, std::int64_t) { return few_bits(g); });
  check_all(A, B, "few-bit values");
}

TEST_P(GemmF16Acc, TinyAndSubnormalAccumulatorsInLaterBlocks) {
  // Small products whose sums cross zero: accumulators are tiny and subnormal here and there,
  // in the first K block and in later ones.
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Mat A = filled(8, 700, false, 3, [&](std::mt19937_64& g, std::int64_t, std::int64_t) { return 0.02f * nd(g); });
  const Mat B = filled(700, 19, false, 4, [&](std::mt19937_64& g, std::int64_t, std::int64_t) { return 0.02f * nd(g); });
  check_all(A, B, "tiny sums");
}

TEST_P(GemmF16Acc, OverflowInTrackedTilesBesideBoundedOnes) {
  // Rows 0-3 are small (their tile's norm bound holds: no range test), rows 4-8 large: their
  // partial sums overflow, and in saturation mode they come back from +-65504.
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Mat A = filled(9, 260, false, 5, [&](std::mt19937_64& g, std::int64_t r, std::int64_t) {
    return (r < 4 ? 0.5f : 60.0f) * nd(g);
  });
  const Mat B = filled(260, 21, false, 6, [&](std::mt19937_64& g, std::int64_t, std::int64_t c) {
    return (c % 3 == 0 ? 40.0f : 1.0f) * nd(g) + (c % 5 == 0 ? 30.0f : 0.0f);
  });
  check_all(A, B, "overflow");
}

TEST_P(GemmF16Acc, SpecialAndSubnormalInputs) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Mat A = filled(10, 90, false, 7, [&](std::mt19937_64& g, std::int64_t, std::int64_t) { return 3.0f * nd(g); });
  Mat B = filled(90, 18, true, 8, [&](std::mt19937_64& g, std::int64_t, std::int64_t) { return 3.0f * nd(g); });
  A.at(2, 5) = 0x7E00;   // quiet NaN
  A.at(6, 70) = 0x7C00;  // +Inf
  B.at(70, 3) = 0;       // Inf * 0 at (6, 3)
  A.at(7, 10) = 0xFC00;  // -Inf
  A.at(7, 11) = 0x7C00;  // Inf - Inf along row 7
  B.at(40, 9) = 0x7C01;  // signaling NaN: Invalid for column 9
  B.at(12, 15) = 0x0003; // subnormal inputs
  A.at(9, 0) = 0x8201;
  check_all(A, B, "specials");
}

TEST_P(GemmF16Acc, RandomMixOfPathsAtLargerSize) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Mat A = filled(23, 517, false, 9, [&](std::mt19937_64& g, std::int64_t r, std::int64_t) {
    return r % 5 == 0 ? few_bits(g) : nd(g);
  });
  const Mat B = filled(517, 41, true, 10, [&](std::mt19937_64& g, std::int64_t, std::int64_t) { return nd(g); });
  check_all(A, B, "mix");
}

TEST_P(GemmF16Acc, DenseInfinitiesAndNaNsInRowsAndColumns) {
  // Inputs scaled past FP16's range (a bad loss scale): many infinities, with NaNs, zeros and a
  // signaling NaN; most rows and columns are slow, so the special-element path computes them.
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto gen = [&](std::mt19937_64& g, std::int64_t, std::int64_t) {
    const auto r = g() % 20;
    if (r == 0) return std::numeric_limits<float>::quiet_NaN();
    if (r == 1) return 0.0f;
    return 8192.0f * nd(g);  // |x| > 8 overflows to +-Inf
  };
  Mat A = filled(7, 60, false, 15, gen);
  Mat B = filled(60, 26, true, 16, gen);
  A.at(3, 4) = 0x7D00;  // signaling NaN
  check_all(A, B, "dense specials");
}

TEST_P(GemmF16Acc, EachInvalidCauseAloneIsTheFirstElement) {
  // One cause of Invalid per matrix, at a chosen element, nothing else invalid: Inf - Inf in the
  // accumulator; 0 * Inf; a signaling NaN; 0 * Inf after the accumulator is already NaN.
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto base = [&](std::uint64_t seed) {
    return filled(6, 20, false, seed, [&](std::mt19937_64& g, std::int64_t, std::int64_t) { return nd(g); });
  };
  const Mat B = filled(20, 9, false, 31, [&](std::mt19937_64& g, std::int64_t, std::int64_t) { return 0.5f + std::abs(nd(g)); });
  Mat A = base(32);
  A.at(4, 3) = 0x7C00;
  A.at(4, 7) = 0xFC00;  // row 4: +Inf then -Inf: Inf - Inf in every column
  check_all(A, B, "inf - inf");
  Mat A2 = base(33);
  Mat B2 = B;
  A2.at(2, 5) = 0x7C00;
  B2.at(5, 6) = 0;  // 0 * Inf at (2, 6) only; the rest of row 2 is infinite
  check_all(A2, B2, "0 * inf");
  Mat A3 = base(34);
  A3.at(5, 0) = 0x7E00;  // a quiet NaN first, then 0 * Inf in column 6: Invalid on a NaN accumulator
  A3.at(5, 5) = 0x7C00;
  check_all(A3, B2, "0 * inf after nan");
}

// Operands that put about a third of all steps' FP32 sums exactly on an FP16 midpoint: after a first
// step of +-1536 (and, in some rows, a pair of large products that cancel, so that the tile's norm
// bound fails and the tile is tracked, or that overflow), the accumulators stay in [1024, 2048), where the
// FP16 unit is 1, and the products are +-0.5, +-1.5 and +-2.5 (exact ties), +-0.5 * (1 - 2^-20)
// (an FP32 sum that rounds onto the midpoint from one side or the other: inexact), or not midpoints.
Mat midpoint_operand(std::int64_t rows, std::int64_t cols, bool trans, bool is_a, std::uint64_t seed) {
  Mat m = testing::random_mat(rows, cols, InType::F16, trans, seed);
  std::mt19937_64 rng(seed);
  const float a_set[] = {0.5f, 1.5f, 2.5f, 0.5f * (1.0f + 0x1p-10f), 1.0f};
  const float b_set[] = {1.0f, 1.0f - 0x1p-10f, 1.0f, 2.0f};
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t k = is_a ? c : r, i = is_a ? r : c;  // step and row (of A) or column (of B)
      const float sign = (rng() & 1) ? -1.0f : 1.0f;
      float x = is_a ? sign * a_set[rng() % 5] : sign * b_set[rng() % 4];
      if (k == 0) x = is_a ? (i % 2 ? -48.0f : 48.0f) : 32.0f;
      if (k == 1 || k == 2) {  // rows 5 (mod 8) and 12: +-40000, tracked; rows 6 (mod 8): overflow
        const float big = i % 8 == 5 || i == 12 ? 200.0f : i % 8 == 6 ? 400.0f : 0.0f;
        x = is_a ? (k == 1 ? big : -big) : 200.0f;
      }
      m.at(r, c) = to_f16(x).value.bits;
    }
  }
  return m;
}

// The steps of the Fp16Rn accumulation (default Mode) whose FP32 sum is an FP16 midpoint: all of
// them, and those where the FP32 sum is inexact.
std::pair<std::int64_t, std::int64_t> midpoint_steps(const Mat& A, const Mat& B) {
  std::int64_t mids = 0, inexact = 0;
  for (std::int64_t m = 0; m < A.rows; ++m) {
    for (std::int64_t n = 0; n < B.cols; ++n) {
      ElementRef el{Accum::Fp16Rn, Mode{}};
      for (std::int64_t k = 0; k < A.cols; ++k) {
        const float a = to_float(f16{A.at(m, k)}), b = to_float(f16{B.at(k, n)});
        const float acc = to_float(f16{el.acc});
        const float s = std::fma(a, b, acc);
        std::uint32_t bits = 0;
        std::memcpy(&bits, &s, sizeof bits);
        if (std::isfinite(s) && std::abs(s) >= 0x1p-14f && std::abs(s) < 65504.0f && (bits & 0x1FFFu) == 0x1000u) {
          ++mids;
          if (static_cast<double>(s) != static_cast<double>(a) * b + acc) ++inexact;
        }
        el.step(A.at(m, k), B.at(k, n));
      }
    }
  }
  return {mids, inexact};
}

TEST_P(GemmF16Acc, ManyMidpointStepsAtEveryTileShape) {
  // Sizes with single-row tiles (M % 4 != 0), padded column panels (N % 16 != 0), a partial last K
  // block and transposed storage; then the same operands with NaN, Inf, zero * Inf and subnormal
  // inputs in a few rows and columns.
  struct Size {
    std::int64_t M, N, K;
    bool trans_a, trans_b;
  };
  for (const Size& z : {Size{9, 37, 300, false, true}, Size{6, 16, 65, true, false}, Size{13, 50, 130, false, false}}) {
    const auto seed = static_cast<std::uint64_t>(z.M * 1000 + z.N);
    Mat A = midpoint_operand(z.M, z.K, z.trans_a, true, seed);
    Mat B = midpoint_operand(z.K, z.N, z.trans_b, false, seed + 1);
    const std::string what = "midpoints " + std::to_string(z.M) + "x" + std::to_string(z.N) + "x" + std::to_string(z.K);
    const auto [mids, inexact] = midpoint_steps(A, B);
    const std::int64_t steps = z.M * z.N * z.K;
    EXPECT_GT(mids * 4, steps) << what << ": " << mids << " midpoint steps of " << steps;
    EXPECT_GT(inexact * 40, steps) << what << ": " << inexact << " inexact midpoint steps of " << steps;
    check_all(A, B, what);
    A.at(2, 7) = 0x7E00;   // NaN
    A.at(4, 20) = 0xFC00;  // -Inf: row 4
    B.at(20, 1) = 0;       // 0 * Inf at (4, 1)
    B.at(11, 5) = 0x7C00;  // +Inf: column 5
    B.at(13, 9) = 0x0001;  // a subnormal input
    check_all(A, B, what + " with specials");
  }
}

TEST_P(GemmF16Acc, CallerFlushToZeroNeitherChangesResultsNorIsChanged) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Mat A = filled(5, 150, false, 13, [&](std::mt19937_64& g, std::int64_t, std::int64_t) { return 0.01f * nd(g); });
  Mat B = filled(150, 9, false, 14, [&](std::mt19937_64& g, std::int64_t, std::int64_t) { return 0.01f * nd(g); });
  B.at(3, 2) = 0x0001;  // a subnormal input: its scaled value is an FP32 subnormal inside the kernel
  for (Accum accum : {Accum::Fp16Rn, Accum::Fp16ViaFp32}) {
    GemmOptions o;
    o.accum = accum;
    const GemmRun plain = run(A, B, OutType::F16, o);
    const unsigned saved = _mm_getcsr();
    const unsigned caller = (saved | 0x8040u) & ~0x3Fu;  // FTZ and DAZ on, flags clear
    _mm_setcsr(caller);
    const GemmRun flushed = run(A, B, OutType::F16, o);
    const unsigned after = _mm_getcsr();
    _mm_setcsr(saved);
    EXPECT_EQ(after & ~0x3Fu, caller & ~0x3Fu) << "the caller's MXCSR controls changed";
    EXPECT_EQ(flushed.out, plain.out);
    testing::expect_report(flushed.rep, plain.rep, "caller FTZ/DAZ");
    const Expected want = reference(A, B, accum, Mode{});
    EXPECT_EQ(plain.out, want.out);
  }
}

}  // namespace
}  // namespace probelab::num
