// The fast FP16-accumulation tile of gemm_f16acc.cpp with AVX-512: the same steps as the AVX2 tile
// (gemm_f16acc_tile.cpp, same bits), one zmm register per 16-column row and the midpoint test one
// mask compare per row. Compiled with AVX-512 (numerics/CMakeLists.txt); chosen at run time where
// the CPU runs 512-bit operations at full width (f16acc_tiles()).
// GCC 12's AVX-512 intrinsics (srli/srai/max) start from _mm512_undefined_epi32(), which
// -Wuninitialized reports as used uninitialized at every inlined call.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "numerics/detail/gemm_internal.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t kCols = kPanelB;
constexpr int kRows = kF16accRows;
constexpr int kHugePos = 0x0F7FE000;  // as in gemm_f16acc_tile.cpp
constexpr unsigned kHugeNeg = 0x8F7FE000u;

// RN16 of the scaled FP32 pattern RN32(acc + a*b) where some lane's sum is an FP16 midpoint: round
// to odd of the unscaled sum (f16acc_ops.h, here on 16 lanes), scaled back, to nearest even at bit
// 13, as the AVX2 tile does it. (On two 8-lane halves with the AVX2 code the whole GEMM ran 9 %
// slower: the midpoint rows are one in 60.)
template <int kRow>
[[gnu::noinline]] __m512i rn_row_with_midpoints(const float* ak, const float* bk, __m512 acc) noexcept {
  const __m512 av = _mm512_set1_ps(ak[kRow]), b = _mm512_loadu_ps(bk);
  const __m512i keep = _mm512_set1_epi32(~0x1FFF);
  const __m512i u = _mm512_add_epi32(_mm512_castps_si512(_mm512_fmadd_ps(av, b, acc)), _mm512_set1_epi32(0x1000));
  const __m512i r = _mm512_and_si512(u, keep);
  const __m512 up = _mm512_set1_ps(kF16accUp);
  const __m512 a = _mm512_mul_ps(av, up), c = _mm512_mul_ps(acc, up);
  const __m512 p = _mm512_mul_ps(a, b), s = _mm512_add_ps(c, p), bv = _mm512_sub_ps(s, c);
  const __m512 err = _mm512_add_ps(_mm512_sub_ps(c, _mm512_sub_ps(s, bv)), _mm512_sub_ps(p, bv));
  const __m512i bits = _mm512_castps_si512(s);
  const __m512i toward = _mm512_srai_epi32(_mm512_xor_si512(_mm512_castps_si512(err), bits), 31);
  const __m512i odd = _mm512_or_si512(_mm512_add_epi32(bits, toward), _mm512_set1_epi32(1));
  const __mmask16 inexact = _mm512_cmp_ps_mask(err, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  const __m512 to_odd = _mm512_mask_blend_ps(inexact, s, _mm512_castsi512_ps(odd));
  const __m512i x = _mm512_castps_si512(_mm512_mul_ps(to_odd, _mm512_set1_ps(kF16accDown)));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 13), _mm512_set1_epi32(1));
  const __m512i even = _mm512_and_si512(_mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0xFFF))), keep);
  return _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(u, r), r, even);
}

// The kc steps of an R-row tile (R = kRows or 1), accumulators in registers.
template <int R, bool kRn, bool kTrack>
[[gnu::noinline]] void fast_steps(std::int64_t kc, const float* a, const float* bp, __m512 (&acc)[kRows],
                                  __m512i (&hi)[2]) {
  static_assert(R == 1 || R == kRows);
  __m512 c0 = acc[0], c1 = c0, c2 = c0, c3 = c0;
  if constexpr (R == kRows) c1 = acc[1], c2 = acc[2], c3 = acc[3];
  __m512i hs = hi[0], hu = hi[1];
  const __m512i half = _mm512_set1_epi32(0x1000), keep = _mm512_set1_epi32(~0x1FFF);
  const __m512i even_bias = _mm512_set1_epi32(0xFFF), one = _mm512_set1_epi32(1);
  auto row = [&](auto i, const float* ak, const float* bk, __m512 b, __m512& c) [[gnu::always_inline]] {
    const __m512 av = _mm512_set1_ps(ak[decltype(i)::value]);
    const __m512i s = _mm512_castps_si512(_mm512_fmadd_ps(av, b, c));
    __m512i r;
    if constexpr (kRn) {
      const __m512i u = _mm512_add_epi32(s, half);
      r = _mm512_and_si512(u, keep);
      if (_mm512_cmpeq_epi32_mask(u, r) != 0) [[unlikely]]
        r = rn_row_with_midpoints<decltype(i)::value>(ak, bk, c);
    } else {
      r = _mm512_and_si512(
          _mm512_add_epi32(_mm512_add_epi32(s, even_bias), _mm512_and_si512(_mm512_srli_epi32(s, 13), one)), keep);
    }
    if constexpr (kTrack) {
      hs = _mm512_max_epi32(hs, r);
      hu = _mm512_max_epu32(hu, r);
    }
    c = _mm512_castsi512_ps(r);
  };
  for (std::int64_t k = 0; k < kc; ++k) {
    const float* bk = bp + k * kCols;
    const float* ak = a + k * kRows;
    const __m512 b = _mm512_loadu_ps(bk);
    row(std::integral_constant<int, 0>{}, ak, bk, b, c0);
    if constexpr (R == kRows) {
      row(std::integral_constant<int, 1>{}, ak, bk, b, c1);
      row(std::integral_constant<int, 2>{}, ak, bk, b, c2);
      row(std::integral_constant<int, 3>{}, ak, bk, b, c3);
    }
  }
  acc[0] = c0;
  if constexpr (R == kRows) acc[1] = c1, acc[2] = c2, acc[3] = c3;
  hi[0] = hs;
  hi[1] = hu;
}

template <int R, bool kRn, bool kTrack>
bool tile(std::int64_t kc, const float* a, const float* bp, const float* in, std::int64_t ld, float* out) {
  __m512 acc[kRows];
  for (int i = 0; i < R; ++i) acc[i] = in ? _mm512_loadu_ps(in + i * ld) : _mm512_setzero_ps();
  __m512i hi[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  fast_steps<R, kRn, kTrack>(kc, a, bp, acc, hi);
  for (int i = 0; i < R; ++i) _mm512_storeu_ps(out + i * kCols, acc[i]);
  if constexpr (!kTrack) return false;
  const __mmask16 big_pos = _mm512_cmpgt_epi32_mask(hi[0], _mm512_set1_epi32(kHugePos));
  const __mmask16 big_neg = _mm512_cmpgt_epu32_mask(hi[1], _mm512_set1_epi32(static_cast<int>(kHugeNeg)));
  return (big_pos | big_neg) != 0;
}

}  // namespace

const F16accTiles& f16acc_tiles_avx512() {
  static const F16accTiles tiles = make_f16acc_tiles([]<int R, bool kRn, bool kTrack>() { return &tile<R, kRn, kTrack>; });
  return tiles;
}

}  // namespace probelab::num::detail
