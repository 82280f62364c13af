// Internal: round to odd of an FP32 sum, shared by the FP16-accumulation kernels.
#pragma once

#include <immintrin.h>

namespace probelab::num::detail {
namespace {

// RN32(acc + a*b) moved one ulp towards the exact sum when it is inexact (round to odd), for a*b
// exact in FP32 (FP16 operands) and no overflow. Rounding that once more to a format of at most
// 22 bits gives the correctly rounded sum (24 >= p + 2).
[[gnu::always_inline]] inline __m256 round_to_odd_sum(__m256 a, __m256 b, __m256 acc) noexcept {
  const __m256 p = _mm256_mul_ps(a, b);
  const __m256 s = _mm256_add_ps(acc, p);
  const __m256 bv = _mm256_sub_ps(s, acc);
  const __m256 err = _mm256_add_ps(_mm256_sub_ps(acc, _mm256_sub_ps(s, bv)), _mm256_sub_ps(p, bv));
  // Truncate toward zero (one ulp down in magnitude when |exact| < |s|), set the last bit; only
  // where the sum was inexact.
  const __m256i bits = _mm256_castps_si256(s);
  const __m256i toward = _mm256_srai_epi32(_mm256_xor_si256(_mm256_castps_si256(err), bits), 31);
  const __m256i odd = _mm256_or_si256(_mm256_add_epi32(bits, toward), _mm256_set1_epi32(1));
  const __m256 inexact = _mm256_cmp_ps(err, _mm256_setzero_ps(), _CMP_NEQ_OQ);
  return _mm256_blendv_ps(s, _mm256_castsi256_ps(odd), inexact);
}

}  // namespace
}  // namespace probelab::num::detail
