// Internal: AVX2/F16C helpers shared by the bulk and GEMM kernels (x86-64-v3 floor).
#pragma once

#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "numerics/bulk.h"

namespace probelab::num::detail {

inline __m256 abs_ps(__m256 v) noexcept {
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
}
inline int mask8(__m256 m) noexcept { return _mm256_movemask_ps(m); }

// Lanes with |v| in [lo, hi) (false for NaN).
inline __m256 in_range(__m256 absv, float lo, float hi) noexcept {
  return _mm256_and_ps(_mm256_cmp_ps(absv, _mm256_set1_ps(lo), _CMP_GE_OQ),
                       _mm256_cmp_ps(absv, _mm256_set1_ps(hi), _CMP_LT_OQ));
}
inline __m256 is_zero_ps(__m256 v) noexcept { return _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_EQ_OQ); }

// 8 x 16-bit patterns: lanes that are NaN, Inf or a non-zero subnormal (all special to conversion).
inline int special16(__m128i h, std::uint16_t exp_mask) noexcept {
  const __m128i em = _mm_set1_epi16(static_cast<short>(exp_mask));
  const __m128i e = _mm_and_si128(h, em);
  const __m128i mag = _mm_and_si128(h, _mm_set1_epi16(0x7FFF));
  const __m128i top = _mm_cmpeq_epi16(e, em);
  const __m128i sub = _mm_andnot_si128(_mm_cmpeq_epi16(mag, _mm_setzero_si128()),
                                       _mm_cmpeq_epi16(e, _mm_setzero_si128()));
  return _mm_movemask_epi8(_mm_or_si128(top, sub));
}
// 8 x 32-bit float lanes that are NaN, Inf or a non-zero subnormal.
inline int special32(__m256 v) noexcept {
  const __m256 a = abs_ps(v);
  const __m256 ok = _mm256_or_ps(in_range(a, 0x1p-126f, INFINITY), is_zero_ps(v));
  return ~mask8(ok) & 0xFF;
}

// Round-to-odd of s + err given err's sign (as in detail::to_odd), lane-wise; `inexact` = err != 0.
inline __m256 to_odd_ps(__m256 s, __m256 inexact, __m256 away) noexcept {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i bits = _mm256_castps_si256(s);
  const __m256i even = _mm256_cmpeq_epi32(_mm256_and_si256(bits, one), _mm256_setzero_si256());
  const __m256i adjust = _mm256_and_si256(even, _mm256_castps_si256(inexact));
  const __m256i delta = _mm256_blendv_epi8(_mm256_set1_epi32(-1), one, _mm256_castps_si256(away));
  return _mm256_castsi256_ps(_mm256_add_epi32(bits, _mm256_and_si256(adjust, delta)));
}
// Lanes where x and y have the same sign.
inline __m256 same_sign(__m256 x, __m256 y) noexcept {
  const __m256i d = _mm256_xor_si256(_mm256_castps_si256(x), _mm256_castps_si256(y));
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(d, _mm256_set1_epi32(-1)));
}

inline __m256 bf16_to_ps(__m128i h) noexcept {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
// RNE FP32 -> BF16 for finite lanes that do not overflow; returns the 8 patterns.
inline __m128i ps_to_bf16(__m256 v) noexcept {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, _mm256_setzero_si256()), 0x08);
  return _mm256_castsi256_si128(packed);
}
// Lanes whose low 16 bits are non-zero (FP32 -> BF16 is inexact there).
inline int bf16_inexact(__m256 v) noexcept {
  const __m256i low = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0xFFFF));
  return ~_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(low, _mm256_setzero_si256()))) & 0xFF;
}

// Records flag f for the lowest lane set in `mask`. Blocks are visited in increasing order, so a
// flag whose first index is already known needs no work.
inline void raise_mask(BulkReport& rep, Flag f, int mask, std::int64_t base) noexcept {
  if (mask != 0 && rep.first_index(f) < 0) rep.raise(Flags(f), base + std::countr_zero(static_cast<unsigned>(mask)));
}

}  // namespace probelab::num::detail
