// FP16-accumulation GEMM kernel (gemm.h, Accum::Fp16Rn and Accum::Fp16ViaFp32) for FP16 operands.
// Each lane carries one FP16 accumulator as an exact FP32 value. Fp16Rn: the exact sum acc + a*b
// (a*b is exact in FP32) is represented by its FP32 round-to-odd via TwoSum and rounded to FP16
// with F16C, which is the correctly rounded RN16(acc + a*b) (24 >= 11 + 2). Fp16ViaFp32: one FP32
// FMA (= RN32(acc + a*b)) then RN16. While an accumulator stays in the plain range
// [2^-14, 65520) or at an exact zero, no Mode effect and no flag can occur; a lane that leaves it
// at any step is marked for the caller's scalar recomputation (values and flags).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "numerics/detail/gemm_internal.h"
#include "numerics/detail/simd.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t kCols = kPanelB;

// Per lane: lo = min over steps of (|bits| - 1) as unsigned (zero wraps to the maximum, so exact
// zeros never count as tiny), hi = max over steps of |bits|. A lane needs the scalar path iff some
// step had 0 < |x| < 2^-14 (lo < bits(2^-14) - 1) or |x| >= 65520 (hi >= bits(65520)).
struct Range {
  __m256i lo, hi;
};

template <bool kRn>
inline __m256 step(__m256 a, __m256 b, __m256 acc, Range& range) noexcept {
  __m256 pre;
  if constexpr (kRn) {
    const __m256 p = _mm256_mul_ps(a, b);
    const __m256 s = _mm256_add_ps(acc, p);
    const __m256 bv = _mm256_sub_ps(s, acc);
    const __m256 err = _mm256_add_ps(_mm256_sub_ps(acc, _mm256_sub_ps(s, bv)), _mm256_sub_ps(p, bv));
    // Round to odd: truncate toward zero (one ulp down in magnitude when |exact| < |s|), set the
    // last bit; only where the sum was inexact.
    const __m256i bits = _mm256_castps_si256(s);
    const __m256i toward = _mm256_srai_epi32(_mm256_xor_si256(_mm256_castps_si256(err), bits), 31);
    const __m256i odd = _mm256_or_si256(_mm256_add_epi32(bits, toward), _mm256_set1_epi32(1));
    const __m256 inexact = _mm256_cmp_ps(err, _mm256_setzero_ps(), _CMP_NEQ_OQ);
    pre = _mm256_blendv_ps(s, _mm256_castsi256_ps(odd), inexact);
  } else {
    pre = _mm256_fmadd_ps(a, b, acc);
  }
  const __m256i mag = _mm256_and_si256(_mm256_castps_si256(pre), _mm256_set1_epi32(0x7FFFFFFF));
  range.lo = _mm256_min_epu32(range.lo, _mm256_sub_epi32(mag, _mm256_set1_epi32(1)));
  range.hi = _mm256_max_epi32(range.hi, mag);
  return _mm256_cvtph_ps(_mm256_cvtps_ph(pre, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Lanes whose range left the plain interval.
inline int bad_lanes(const Range& r) noexcept {
  const __m256i tiny = _mm256_cmpeq_epi32(
      _mm256_min_epu32(r.lo, _mm256_set1_epi32(0x387FFFFE)), r.lo);  // lo <= bits(2^-14) - 2
  const __m256i huge = _mm256_cmpgt_epi32(r.hi, _mm256_set1_epi32(0x477FEFFF));  // hi >= bits(65520)
  return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(tiny, huge)));
}

// R rows x 16 columns. a: rows of an A panel (kPanelA floats per k); bp: a B panel (16 per k).
template <int R, bool kRn>
void tile(std::int64_t K, const float* a, const float* bp, std::uint16_t* out, std::int64_t N, std::int64_t ncols,
          std::uint8_t* attention) {
  __m256 acc[R][2];
  Range range[R];
  for (int i = 0; i < R; ++i) {
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    range[i] = {_mm256_set1_epi32(-1), _mm256_setzero_si256()};
  }
  for (std::int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_load_ps(bp + k * kCols);
    const __m256 b1 = _mm256_load_ps(bp + k * kCols + 8);
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + k * kPanelA + i);
      acc[i][0] = step<kRn>(av, b0, acc[i][0], range[i]);
      acc[i][1] = step<kRn>(av, b1, acc[i][1], range[i]);
    }
  }
  for (int i = 0; i < R; ++i) {
    alignas(32) std::uint16_t h[kCols];
    _mm_store_si128(reinterpret_cast<__m128i*>(h), _mm256_cvtps_ph(acc[i][0], _MM_FROUND_TO_NEAREST_INT));
    _mm_store_si128(reinterpret_cast<__m128i*>(h + 8), _mm256_cvtps_ph(acc[i][1], _MM_FROUND_TO_NEAREST_INT));
    std::copy(h, h + ncols, out + i * N);
    const int mask = bad_lanes(range[i]);
    if (mask == 0) continue;
    for (int j = 0; j < 8; ++j) {
      if (!((mask >> j) & 1)) continue;
      if (j < ncols) attention[i * N + j] = 1;
      if (j + 8 < ncols) attention[i * N + j + 8] = 1;
    }
  }
}

template <bool kRn>
void run(std::int64_t M, std::int64_t N, const Packed& A, const Packed& B, std::uint16_t* R,
         std::uint8_t* attention) {
  const std::int64_t K = A.K;
  for (std::int64_t n0 = 0; n0 < N; n0 += kCols) {
    const std::int64_t nc = std::min(kCols, N - n0);
    const float* bp = B.panel(n0 / kCols);
    for (std::int64_t m = 0; m < M; m += 3) {  // two 3-row halves per 6-row A panel
      const float* a = A.panel(m / kPanelA) + m % kPanelA;
      std::uint16_t* out = R + m * N + n0;
      std::uint8_t* att = attention + m * N + n0;
      const std::int64_t rows = std::min<std::int64_t>(3, M - m);
      if (rows == 3) tile<3, kRn>(K, a, bp, out, N, nc, att);
      else if (rows == 2) tile<2, kRn>(K, a, bp, out, N, nc, att);
      else tile<1, kRn>(K, a, bp, out, N, nc, att);
    }
  }
}

}  // namespace

void gemm_f16acc_kernel(std::int64_t M, std::int64_t N, const Packed& A, const Packed& B, Accum accum,
                        std::uint16_t* R, std::vector<std::uint8_t>& attention) {
  attention.assign(static_cast<std::size_t>(M * N), 0);
  if (accum == Accum::Fp16Rn) run<true>(M, N, A, B, R, attention.data());
  else run<false>(M, N, A, B, R, attention.data());
}

}  // namespace probelab::num::detail
