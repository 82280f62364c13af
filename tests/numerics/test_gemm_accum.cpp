// GEMM with FP16 accumulation (both modes) against an exact reference at every step, and split-K
// with FP16 partial sums against the scalar operations.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "numerics/arith.h"
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
using testing::random_mat;
using testing::run;

// Exact FP16-accumulation reference: the accumulator is kept as an exact integer multiple of 2^-48
// (every FP16 value and product is one), each step rounds the exact sum.
struct F16AccRef {
  Accum accum;
  Mode mode;
  Flags flags;
  std::uint16_t acc = 0;
  void step(std::uint16_t a, std::uint16_t b) {
    Flags ignored;
    const ref::Fast::Val va = decode(a), vb = decode(b), vc = ref::Fast::decode(ref::kF16, acc, mode, ignored);
    if (vc.inf) return;  // an infinite accumulator stays infinite: products are finite here
    const ref::Fast::Val exact = ref::Fast::exact_add(ref::Fast::exact_mul(va, vb), vc);
    ref::Out r;
    if (accum == Accum::Fp16Rn) {
      r = ref::Fast::round(ref::kF16, exact, mode, {});
    } else {
      const ref::Out t = ref::Fast::round(ref::kF32, exact, Mode{}, {});
      Flags ignored;
      const ref::Fast::Val vt = ref::Fast::decode(ref::kF32, t.bits, Mode{}, ignored);
      r = ref::Fast::round(ref::kF16, vt, mode, t.flags);
    }
    flags |= r.flags & ~(Flag::Inexact | Flag::DenormalIn);
    acc = static_cast<std::uint16_t>(r.bits);
  }
  ref::Fast::Val decode(std::uint16_t x) {
    Flags f;
    const ref::Fast::Val v = ref::Fast::decode(ref::kF16, x, mode, f);
    flags |= f & Flags(Flag::DenormalIn);
    return v;
  }
};

TEST(GemmAccum, Fp16AccumulationEveryStepMatchesExactReference) {
  const std::int64_t M = 5, N = 7, K = 40;
  for (Accum acc : {Accum::Fp16Rn, Accum::Fp16ViaFp32}) {
    for (const Mode& m : kModes) {
      // scale chosen so that accumulators visit large, small and subnormal magnitudes
      for (float scale : {30.0f, 0.02f, 180.0f}) {
        const Mat A = random_mat(M, K, InType::F16, false, 100 + int(acc), scale);
        const Mat B = random_mat(K, N, InType::F16, true, 200 + int(acc), scale);
        std::vector<F16AccRef> refs(static_cast<std::size_t>(M * N), F16AccRef{acc, m, {}});
        for (std::int64_t kp = 1; kp <= K; ++kp) {  // every prefix of K = every accumulation step
          Mat Ap = A, Bp = B;
          Ap.cols = kp;
          Bp.rows = kp;
          GemmOptions o;
          o.accum = acc;
          o.mode = m;
          const GemmRun r = run(Ap, Bp, OutType::F16, o);
          Flags all;
          for (std::int64_t i = 0; i < M; ++i) {
            for (std::int64_t j = 0; j < N; ++j) {
              F16AccRef& e = refs[static_cast<std::size_t>(i * N + j)];
              e.step(A.at(i, kp - 1), B.at(kp - 1, j));
              ASSERT_EQ(r.out[static_cast<std::size_t>(i * N + j)], e.acc)
                  << "step " << kp << " element " << i << "," << j << " scale " << scale << " " << mode_name(m)
                  << std::hex << " a=" << A.at(i, kp - 1) << " b=" << B.at(kp - 1, j);
              all |= e.flags;
            }
          }
          ASSERT_EQ(r.rep.flags, all) << "step " << kp << " " << to_string(r.rep.flags) << " vs " << to_string(all);
        }
      }
    }
  }
}

TEST(GemmAccum, Fp16AccumulationModesDifferAndMatchReferenceAtK1024) {
  const std::int64_t M = 16, N = 16, K = 1024;
  const Mat A = random_mat(M, K, InType::F16, false, 7, 1.0f);
  const Mat B = random_mat(K, N, InType::F16, false, 8, 1.0f);
  std::vector<std::uint32_t> outs[2];
  int idx = 0;
  for (Accum acc : {Accum::Fp16Rn, Accum::Fp16ViaFp32}) {
    GemmOptions o;
    o.accum = acc;
    const GemmRun r = run(A, B, OutType::F32, o);
    for (std::int64_t i = 0; i < M; ++i) {
      for (std::int64_t j = 0; j < N; ++j) {
        F16AccRef e{acc, Mode{}, {}};
        for (std::int64_t k = 0; k < K; ++k) e.step(A.at(i, k), B.at(k, j));
        ASSERT_EQ(r.out[static_cast<std::size_t>(i * N + j)], std::bit_cast<std::uint32_t>(to_float(f16{e.acc})))
            << i << "," << j << " accum " << int(acc);
      }
    }
    outs[idx++] = r.out;
  }
  int differ = 0;
  for (std::size_t i = 0; i < outs[0].size(); ++i) differ += outs[0][i] != outs[1][i];
  EXPECT_GT(differ, 0) << "double rounding never mattered: the two modes are not distinguished";
}

TEST(GemmAccum, SplitKWithFp16Partials) {
  const std::int64_t M = 9, N = 21, K = 100;
  const Mat A = random_mat(M, K, InType::F16, false, 12, 8.0f);
  const Mat B = random_mat(K, N, InType::F16, false, 13, 8.0f);
  for (const Mode& m : kModes) {
    for (std::int64_t ks : {1, 7, 32, 100, 150}) {
      GemmOptions o;
      o.split_k = ks;
      o.mode = m;
      const GemmRun r = run(A, B, OutType::F16, o);
      Flags all;
      for (std::int64_t i = 0; i < M; ++i) {
        for (std::int64_t j = 0; j < N; ++j) {
          f16 sum{0};
          for (std::int64_t k0 = 0; k0 < K; k0 += ks) {
            float acc = 0.0f;
            for (std::int64_t k = k0; k < std::min(K, k0 + ks); ++k) {
              acc = std::fmaf(to_float(f16{A.at(i, k)}), to_float(f16{B.at(k, j)}), acc);
            }
            const Result<f16> p = to_f16(acc, m);
            const Result<f16> s = add(sum, p.value, m);
            all |= (p.flags | s.flags) & ~(Flag::Inexact | Flag::DenormalIn);
            sum = s.value;
          }
          ASSERT_EQ(r.out[static_cast<std::size_t>(i * N + j)], sum.bits) << i << "," << j << " ks=" << ks;
        }
      }
      EXPECT_EQ(r.rep.flags, all) << "ks=" << ks << " " << mode_name(m);
    }
  }
}

}  // namespace
}  // namespace probelab::num
