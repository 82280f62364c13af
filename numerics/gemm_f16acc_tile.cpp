// The fast FP16-accumulation tile of gemm_f16acc.cpp (see there for the method): R = kF16accRows
// rows (or one) x 16 columns over one K block, in 16 AVX2 registers.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

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

// One vector's Fp16Rn step (RN16 of acc + a*b as a scaled FP32 pattern) when some lane's FP32 sum is
// an FP16 midpoint: out of line, and with the operands read from memory (ak: kRows floats of the
// scaled A, bk: 16 floats of B), so that the step loop keeps nothing extra in registers for it.
template <int kRow, int kCol>
[[gnu::noinline]] __m256i rn_step_with_midpoints(const float* ak, const float* bk, __m256 acc) noexcept {
  const __m256 av = _mm256_broadcast_ss(ak + kRow), b = _mm256_load_ps(bk + kCol);
  const __m256i u = _mm256_add_epi32(_mm256_castps_si256(_mm256_fmadd_ps(av, b, acc)), _mm256_set1_epi32(0x1000));
  const __m256i r = _mm256_and_si256(u, _mm256_set1_epi32(~0x1FFF));
  // Unscaled, so that the operands of TwoSum are normal numbers; scaling back is exact, or flushes
  // (and flags) an FP16-tiny sum like the FMA would.
  const __m256 up = _mm256_set1_ps(kF16accUp);
  const __m256 odd = round_to_odd_sum(_mm256_mul_ps(av, up), b, _mm256_mul_ps(acc, up));
  const __m256i x = _mm256_castps_si256(_mm256_mul_ps(odd, _mm256_set1_ps(kF16accDown)));
  // Round to nearest even at bit 13 (x is still a midpoint where the sum was exact).
  return _mm256_blendv_epi8(r, round_even(x, _mm256_set1_epi32(~0x1FFF)), _mm256_cmpeq_epi32(u, r));
}

// The kc steps of a tile (R = kRows or 1 rows), its state loaded into registers for the loop and
// stored back after it (a function of its own, so that nothing else competes for the 16 registers).
// A row's step whose sum is an FP16 midpoint in some lane (Fp16Rn) is finished by an out-of-line call
// that takes the operands from memory (so the loop holds nothing extra in registers for it); the
// loop goes on. The branch is taken in about one iteration in 13 on normally distributed data; what
// the loop pays for is mostly the test itself (a compare per vector, an OR and a mask per row).
template <int R, bool kRn, bool kTrack>
[[gnu::noinline]] void fast_steps(std::int64_t kc, const float* a, const float* bp, TileState<R>& st) {
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
  // One row's step.
  auto row = [&](auto i, const float* ak, const float* bk, __m256 b0, __m256 b1, __m256& c0, __m256& c1)
                 [[gnu::always_inline]] {
    const __m256 av = _mm256_broadcast_ss(ak + decltype(i)::value);
    const __m256i s0 = _mm256_castps_si256(_mm256_fmadd_ps(av, b0, c0));
    const __m256i s1 = _mm256_castps_si256(_mm256_fmadd_ps(av, b1, c1));
    __m256i r0, r1;
    if constexpr (kRn) {
      const __m256i u0 = _mm256_add_epi32(s0, half), u1 = _mm256_add_epi32(s1, half);
      r0 = _mm256_and_si256(u0, keep);
      r1 = _mm256_and_si256(u1, keep);
      if (any_equal(u0, r0, u1, r1)) [[unlikely]] {
        r0 = rn_step_with_midpoints<decltype(i)::value, 0>(ak, bk, c0);
        r1 = rn_step_with_midpoints<decltype(i)::value, 8>(ak, bk, c1);
      }
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
  };
  for (std::int64_t k = 0; k < kc; ++k) {
    const float* bk = bp + k * kCols;
    const float* ak = a + k * kRows;
    const __m256 b0 = _mm256_load_ps(bk), b1 = _mm256_load_ps(bk + 8);
    row(std::integral_constant<int, 0>{}, ak, bk, b0, b1, c00, c01);
    if constexpr (R == kRows) {
      row(std::integral_constant<int, 1>{}, ak, bk, b0, b1, c10, c11);
      row(std::integral_constant<int, 2>{}, ak, bk, b0, b1, c20, c21);
      row(std::integral_constant<int, 3>{}, ak, bk, b0, b1, c30, c31);
    }
  }
  st.acc[0][0] = c00, st.acc[0][1] = c01;
  if constexpr (R == kRows) {
    st.acc[1][0] = c10, st.acc[1][1] = c11, st.acc[2][0] = c20, st.acc[2][1] = c21;
    st.acc[3][0] = c30, st.acc[3][1] = c31;
  }
  st.hi[0] = hi0;
  st.hi[1] = hi1;
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
  fast_steps<R, kRn, kTrack>(kc, a, bp, st);
  for (int i = 0; i < R; ++i) {
    _mm256_store_ps(out + i * kCols, st.acc[i][0]);
    _mm256_store_ps(out + i * kCols + 8, st.acc[i][1]);
  }
  return kTrack && passed_65504(st.hi);
}

}  // namespace

const F16accTiles& f16acc_tiles() {
  static const F16accTiles tiles = make_f16acc_tiles([]<int R, bool kRn, bool kTrack>() { return &tile<R, kRn, kTrack>; });
  return tiles;
}

}  // namespace probelab::num::detail
