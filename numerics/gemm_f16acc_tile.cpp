// The fast FP16-accumulation tile of gemm_f16acc.cpp (see there for the method): R = kF16accRows
// rows (or one) x 16 columns over one K block, in 16 AVX2 registers.
#include <immintrin.h>

#include <cstdint>

#include "numerics/detail/f16acc_ops.h"
#include "numerics/detail/gemm_internal.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t kCols = kPanelB;
constexpr int kRows = kF16accRows;
// Patterns beyond the largest FP16 value, scaled: positive above 65504 * 2^-112 (signed compare),
// negative above -65504 * 2^-112 (unsigned compare).
constexpr int kHugePos = 0x0F7FE000;
constexpr unsigned kHugeNeg = 0x8F7FE000u;

// The accumulators and trackers of an R x 16 tile.
template <int R>
struct TileState {
  __m256 acc[R][2];
  __m256i hi[2];  // signed and unsigned maximum of the rounded patterns (overflow tracking)
};

// RN16 of a scaled FP32 pattern, to nearest even at bit 13: (x + 0xFFF + lsb) & ~0x1FFF.
[[gnu::always_inline]] inline __m256i round_even(__m256i x, __m256i keep) noexcept {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 13), _mm256_set1_epi32(1));
  return _mm256_and_si256(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0xFFF))), keep);
}

// Whether a lane of u0 equals r0 or a lane of u1 equals r1.
[[gnu::always_inline]] inline bool any_equal(__m256i u0, __m256i r0, __m256i u1, __m256i r1) noexcept {
  const __m256i eq = _mm256_or_si256(_mm256_cmpeq_epi32(u0, r0), _mm256_cmpeq_epi32(u1, r1));
  return _mm256_movemask_ps(_mm256_castsi256_ps(eq)) != 0;
}

// The step's results r of one vector with the midpoint lanes `mid` redone; s: RN32(acc + a*b) as
// computed by the FMA.
template <bool kRn>
[[gnu::always_inline]] inline __m256i redo_midpoints(__m256 av, __m256 b, __m256 acc, __m256i s, __m256i r,
                                                     __m256i mid) noexcept {
  __m256i x = s;
  if constexpr (kRn) {
    // Unscaled, so that the operands of TwoSum are normal numbers; scaling back is exact, or flushes
    // (and flags) an FP16-tiny sum like the FMA would.
    const __m256 up = _mm256_set1_ps(kF16accUp);
    const __m256 odd = round_to_odd_sum(_mm256_mul_ps(av, up), b, _mm256_mul_ps(acc, up));
    x = _mm256_castps_si256(_mm256_mul_ps(odd, _mm256_set1_ps(kF16accDown)));
  }
  // Round to nearest even at bit 13 (x is still a midpoint where the sum was exact).
  return _mm256_blendv_epi8(r, round_even(x, _mm256_set1_epi32(~0x1FFF)), mid);
}

// Steps [k, kc) of a tile (R = kRows or 1 rows), its state loaded into registers for the loop and stored
// back after it (a function of its own, so that nothing else competes for the 16 registers; the
// midpoint steps are redone outside it). Returns the step at which row `hit` met a midpoint (rows
// before it have done that step, it and the rows after have not), or kc.
template <int R, bool kRn, bool kTrack>
[[gnu::noinline]] std::int64_t fast_steps(std::int64_t k, std::int64_t kc, const float* a, const float* bp,
                                          TileState<R>& st, int& hit) {
  static_assert(R == 1 || R == kRows);
  // Named registers (not an array) so that the compiler keeps no memory copy of the accumulators.
  __m256 c00 = st.acc[0][0], c01 = st.acc[0][1], c10 = c00, c11 = c01, c20 = c00, c21 = c01, c30 = c00, c31 = c01;
  if constexpr (R == kRows) {
    c10 = st.acc[1][0], c11 = st.acc[1][1], c20 = st.acc[2][0], c21 = st.acc[2][1];
    c30 = st.acc[3][0], c31 = st.acc[3][1];
  }
  __m256i hi0 = st.hi[0], hi1 = st.hi[1];
  const __m256i half = _mm256_set1_epi32(0x1000), keep = _mm256_set1_epi32(~0x1FFF);
  const __m256i even_bias = _mm256_set1_epi32(0xFFF);
  // One row's step; false at a midpoint (Fp16Rn), leaving c0 and c1 as they were.
  auto row = [&](__m256 av, __m256 b0, __m256 b1, __m256& c0, __m256& c1) [[gnu::always_inline]] {
    const __m256i s0 = _mm256_castps_si256(_mm256_fmadd_ps(av, b0, c0));
    const __m256i s1 = _mm256_castps_si256(_mm256_fmadd_ps(av, b1, c1));
    __m256i r0, r1;
    if constexpr (kRn) {
      const __m256i u0 = _mm256_add_epi32(s0, half), u1 = _mm256_add_epi32(s1, half);
      r0 = _mm256_and_si256(u0, keep);
      r1 = _mm256_and_si256(u1, keep);
      if (any_equal(u0, r0, u1, r1)) [[unlikely]] return false;
    } else {  // to nearest even: (s + 0xFFF + lsb) & ~0x1FFF, the lsb off the addition's chain
      const __m256i one = _mm256_set1_epi32(1);
      r0 = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(s0, even_bias),
                                             _mm256_and_si256(_mm256_srli_epi32(s0, 13), one)), keep);
      r1 = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(s1, even_bias),
                                             _mm256_and_si256(_mm256_srli_epi32(s1, 13), one)), keep);
    }
    if constexpr (kTrack) {
      hi0 = _mm256_max_epi32(hi0, _mm256_max_epi32(r0, r1));
      hi1 = _mm256_max_epu32(hi1, _mm256_max_epu32(r0, r1));
    }
    c0 = _mm256_castsi256_ps(r0);
    c1 = _mm256_castsi256_ps(r1);
    return true;
  };
  hit = -1;
  for (; k < kc; ++k) {
    const float* bk = bp + k * kCols;
    const float* ak = a + k * kRows;
    const __m256 b0 = _mm256_load_ps(bk), b1 = _mm256_load_ps(bk + 8);
    if (!row(_mm256_broadcast_ss(ak), b0, b1, c00, c01)) [[unlikely]] {
      hit = 0;
      break;
    }
    if constexpr (R == kRows) {
      if (!row(_mm256_broadcast_ss(ak + 1), b0, b1, c10, c11)) [[unlikely]] {
        hit = 1;
        break;
      }
      if (!row(_mm256_broadcast_ss(ak + 2), b0, b1, c20, c21)) [[unlikely]] {
        hit = 2;
        break;
      }
      if (!row(_mm256_broadcast_ss(ak + 3), b0, b1, c30, c31)) [[unlikely]] {
        hit = 3;
        break;
      }
    }
  }
  st.acc[0][0] = c00, st.acc[0][1] = c01;
  if constexpr (R == kRows) {
    st.acc[1][0] = c10, st.acc[1][1] = c11, st.acc[2][0] = c20, st.acc[2][1] = c21;
    st.acc[3][0] = c30, st.acc[3][1] = c31;
  }
  st.hi[0] = hi0;
  st.hi[1] = hi1;
  return k;
}

// Step k of rows from..R-1, carefully (out of the step loop, on the state in memory).
template <int R, bool kRn, bool kTrack>
[[gnu::noinline]] void careful_steps(TileState<R>& st, int from, std::int64_t k, const float* a, const float* bp) {
  const __m256 b0 = _mm256_load_ps(bp + k * kCols), b1 = _mm256_load_ps(bp + k * kCols + 8);
  for (int i = from; i < R; ++i) {
    const __m256 av = _mm256_broadcast_ss(a + k * kRows + i);
    const __m256i s0 = _mm256_castps_si256(_mm256_fmadd_ps(av, b0, st.acc[i][0]));
    const __m256i s1 = _mm256_castps_si256(_mm256_fmadd_ps(av, b1, st.acc[i][1]));
    const __m256i u0 = _mm256_add_epi32(s0, _mm256_set1_epi32(0x1000)), u1 = _mm256_add_epi32(s1, _mm256_set1_epi32(0x1000));
    const __m256i keep = _mm256_set1_epi32(~0x1FFF);
    __m256i r0 = _mm256_and_si256(u0, keep), r1 = _mm256_and_si256(u1, keep);
    const __m256i m0 = _mm256_cmpeq_epi32(u0, r0), m1 = _mm256_cmpeq_epi32(u1, r1);
    if (!_mm256_testz_si256(m0, m0)) r0 = redo_midpoints<kRn>(av, b0, st.acc[i][0], s0, r0, m0);
    if (!_mm256_testz_si256(m1, m1)) r1 = redo_midpoints<kRn>(av, b1, st.acc[i][1], s1, r1, m1);
    if constexpr (kTrack) {
      st.hi[0] = _mm256_max_epi32(st.hi[0], _mm256_max_epi32(r0, r1));
      st.hi[1] = _mm256_max_epu32(st.hi[1], _mm256_max_epu32(r0, r1));
    }
    st.acc[i][0] = _mm256_castsi256_ps(r0);
    st.acc[i][1] = _mm256_castsi256_ps(r1);
  }
}

bool passed_65504(const __m256i (&hi)[2]) {
  const __m256i big_pos = _mm256_cmpgt_epi32(hi[0], _mm256_set1_epi32(kHugePos));
  const __m256i lim = _mm256_set1_epi32(static_cast<int>(kHugeNeg));  // hi[1] > lim unsigned: max != lim
  const __m256i not_big_neg = _mm256_cmpeq_epi32(_mm256_max_epu32(hi[1], lim), lim);
  return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_andnot_si256(not_big_neg, _mm256_set1_epi32(-1)))) != 0 ||
         _mm256_movemask_ps(_mm256_castsi256_ps(big_pos)) != 0;
}

// R rows x 16 columns over kc steps. a: rows of a scaled A panel (kRows floats per k); bp: a B
// panel (16 floats per k); in (row stride ld) the scaled accumulators before the block, or null
// for zeros; the accumulators after it go to out (16 floats per row), so that `in` still holds the
// state to redo the block from. Returns whether a tracked tile passed 65504.
template <int R, bool kRn, bool kTrack>
bool tile(std::int64_t kc, const float* a, const float* bp, const float* in, std::int64_t ld, float* out) {
  TileState<R> st;
  for (int i = 0; i < R; ++i) {
    st.acc[i][0] = in ? _mm256_load_ps(in + i * ld) : _mm256_setzero_ps();
    st.acc[i][1] = in ? _mm256_load_ps(in + i * ld + 8) : _mm256_setzero_ps();
  }
  st.hi[0] = st.hi[1] = _mm256_setzero_si256();
  std::int64_t k = 0;
  for (;;) {
    int hit = 0;
    k = fast_steps<R, kRn, kTrack>(k, kc, a, bp, st, hit);
    if (k == kc) break;
    careful_steps<R, kRn, kTrack>(st, hit, k, a, bp);
    ++k;
  }
  for (int i = 0; i < R; ++i) {
    _mm256_store_ps(out + i * kCols, st.acc[i][0]);
    _mm256_store_ps(out + i * kCols + 8, st.acc[i][1]);
  }
  return kTrack && passed_65504(st.hi);
}

}  // namespace

const F16accTiles& f16acc_tiles() {
  static const F16accTiles tiles = [] {
    F16accTiles t;
    t.fn[0][0][0] = tile<kRows, false, false>;
    t.fn[0][0][1] = tile<kRows, false, true>;
    t.fn[0][1][0] = tile<1, false, false>;
    t.fn[0][1][1] = tile<1, false, true>;
    t.fn[1][0][0] = tile<kRows, true, false>;
    t.fn[1][0][1] = tile<kRows, true, true>;
    t.fn[1][1][0] = tile<1, true, false>;
    t.fn[1][1][1] = tile<1, true, true>;
    return t;
  }();
  return tiles;
}

}  // namespace probelab::num::detail
