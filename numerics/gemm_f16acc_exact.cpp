// The exact FP16-accumulation kernel (gemm.h, Accum::Fp16Rn and Accum::Fp16ViaFp32) for one row of
// A against a 16-column panel of B: every lane is rounded by F16C (IEEE: subnormals to their
// quantum, overflow to infinity), the Mode applies (saturation, flush to zero), and the flags of
// each element are kept per lane. gemm_f16acc.cpp sends the tiles and K blocks its fast kernel
// cannot finish here.
#include <immintrin.h>

#include "numerics/detail/f16acc_ops.h"
#include "numerics/detail/gemm_internal.h"
#include "numerics/detail/simd.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t kCols = kPanelB;

inline __m256 round16(__m256 s) noexcept {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

struct LaneFlags {
  __m256 ovf, unf, dno;  // Overflow, Underflow, DenormalOut per lane (all-ones masks)
};

// One step of one vector: pre is RN32(acc + a*b) (Fp16ViaFp32) or its round to odd (Fp16Rn, so
// that one more rounding to FP16 is RN16 of the exact sum); the result is RN16(pre) through the Mode,
// with the flags of gemm.h / flags.h (tininess after rounding: below 2^-14 (1 - 2^-12)). An infinite
// or NaN pre (from infinite or NaN operands) raises nothing here; a NaN result is the default NaN
// (+0 when saturating), an infinite one +-65504 when saturating.
inline __m256 exact_step(__m256 pre, const Mode& mode, LaneFlags& f) noexcept {
  const __m256 r = round16(pre);  // IEEE: subnormals rounded to their quantum, overflow to +-Inf
  const __m256 ap = abs_ps(pre), ar = abs_ps(r);
  const __m256 finite = _mm256_cmp_ps(ap, _mm256_set1_ps(__builtin_inff()), _CMP_LT_OQ);
  const __m256 inexact = _mm256_and_ps(finite, _mm256_cmp_ps(pre, r, _CMP_NEQ_UQ));
  const __m256 ovf = _mm256_and_ps(finite, _mm256_cmp_ps(ap, _mm256_set1_ps(65520.0f), _CMP_GE_OQ));
  const __m256 tiny = _mm256_cmp_ps(ap, _mm256_set1_ps(0x1.ffep-15f), _CMP_LT_OQ);
  const __m256 dno = _mm256_andnot_ps(is_zero_ps(r), _mm256_cmp_ps(ar, _mm256_set1_ps(0x1p-14f), _CMP_LT_OQ));
  f.ovf = _mm256_or_ps(f.ovf, ovf);
  f.unf = _mm256_or_ps(f.unf, _mm256_and_ps(inexact, tiny));
  f.dno = _mm256_or_ps(f.dno, dno);
  const __m256 sign = _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)), r);
  const __m256 nan = _mm256_cmp_ps(r, r, _CMP_UNORD_Q);
  __m256 out = _mm256_blendv_ps(r, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), nan);  // default NaN
  if (mode.denormal == DenormalMode::FlushToZero) {  // a subnormal result becomes a signed zero
    out = _mm256_blendv_ps(out, sign, dno);
    f.unf = _mm256_or_ps(f.unf, dno);
  }
  if (mode.overflow == OverflowMode::Saturation) {  // +-Inf becomes +-65504, NaN +0
    const __m256 inf = _mm256_cmp_ps(ar, _mm256_set1_ps(__builtin_inff()), _CMP_EQ_OQ);
    out = _mm256_blendv_ps(out, _mm256_or_ps(sign, _mm256_set1_ps(65504.0f)), inf);
    out = _mm256_blendv_ps(out, _mm256_setzero_ps(), nan);
  }
  return out;
}

// Per-lane flag bits (Flags encoding) of 8 lanes, ORed into flags[0..n).
void or_flags(const LaneFlags& f, std::int64_t n, std::uint8_t* flags) {
  const int ovf = _mm256_movemask_ps(f.ovf), unf = _mm256_movemask_ps(f.unf), dno = _mm256_movemask_ps(f.dno);
  for (int j = 0; j < 8 && j < n; ++j) {
    std::uint8_t b = 0;
    if ((ovf >> j) & 1) b |= Flags::bit(Flag::Overflow);
    if ((unf >> j) & 1) b |= Flags::bit(Flag::Underflow);
    if ((dno >> j) & 1) b |= Flags::bit(Flag::DenormalOut);
    flags[j] = static_cast<std::uint8_t>(flags[j] | b);
  }
}

// R rows interleaved (independent dependency chains).
template <int R, bool kRn>
void block(std::int64_t kc, const float* a, std::int64_t a_stride, float a_scale, const float* bp, const Mode& mode,
           float* acc_io, std::uint8_t* flags, std::int64_t ld_flags, std::int64_t ncols) {
  const __m256 scale = _mm256_set1_ps(a_scale);
  __m256 acc[R][2];
  LaneFlags f[R][2];
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < 2; ++j) {
      acc[i][j] = _mm256_load_ps(acc_io + i * kCols + 8 * j);
      f[i][j] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    }
  }
  for (std::int64_t k = 0; k < kc; ++k) {
    const __m256 b[2] = {_mm256_load_ps(bp + k * kCols), _mm256_load_ps(bp + k * kCols + 8)};
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_mul_ps(_mm256_broadcast_ss(a + k * a_stride + i), scale);
      for (int j = 0; j < 2; ++j) {
        const __m256 pre = kRn ? round_to_odd_sum(av, b[j], acc[i][j]) : _mm256_fmadd_ps(av, b[j], acc[i][j]);
        acc[i][j] = exact_step(pre, mode, f[i][j]);
      }
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < 2; ++j) {
      _mm256_store_ps(acc_io + i * kCols + 8 * j, acc[i][j]);
      or_flags(f[i][j], ncols - 8 * j, flags + i * ld_flags + 8 * j);
    }
  }
}

template <bool kRn>
void block_rows(int rows, std::int64_t kc, const float* a, std::int64_t a_stride, float a_scale, const float* bp,
                const Mode& mode, float* acc, std::uint8_t* flags, std::int64_t ld_flags, std::int64_t ncols) {
  switch (rows) {
    case 4: block<4, kRn>(kc, a, a_stride, a_scale, bp, mode, acc, flags, ld_flags, ncols); break;
    case 3: block<3, kRn>(kc, a, a_stride, a_scale, bp, mode, acc, flags, ld_flags, ncols); break;
    case 2: block<2, kRn>(kc, a, a_stride, a_scale, bp, mode, acc, flags, ld_flags, ncols); break;
    default: block<1, kRn>(kc, a, a_stride, a_scale, bp, mode, acc, flags, ld_flags, ncols); break;
  }
}

inline __m256 is_nan(__m256 v) noexcept { return _mm256_cmp_ps(v, v, _CMP_UNORD_Q); }

template <bool kRn>
void row_special(std::int64_t K, const float* a, std::int64_t sa, const float* bt, std::int64_t W, const Mode& mode,
                 float* out, std::uint8_t* fl) {
  for (std::int64_t j = 0; j < W; j += 8) {
    __m256 acc = _mm256_setzero_ps(), inv = _mm256_setzero_ps();
    LaneFlags f{_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (std::int64_t k = 0; k < K; ++k) {
      const __m256 av = _mm256_broadcast_ss(a + k * sa);
      const __m256 b = _mm256_load_ps(bt + k * W + j);
      const __m256 p = _mm256_mul_ps(av, b);  // NaN exactly for NaN inputs and 0 * Inf
      const __m256 pre = kRn ? round_to_odd_sum(av, b, acc) : _mm256_fmadd_ps(av, b, acc);
      const __m256 p_nan = is_nan(p);
      inv = _mm256_or_ps(inv, _mm256_andnot_ps(_mm256_or_ps(is_nan(av), is_nan(b)), p_nan));   // 0 * Inf
      inv = _mm256_or_ps(inv, _mm256_andnot_ps(_mm256_or_ps(is_nan(acc), p_nan), is_nan(pre)));  // Inf - Inf
      acc = exact_step(pre, mode, f);
    }
    _mm256_storeu_ps(out + j, acc);
    const int mi = _mm256_movemask_ps(inv);
    for (int l = 0; l < 8; ++l) fl[j + l] = (mi >> l) & 1 ? Flags::bit(Flag::Invalid) : 0;
    or_flags(f, 8, fl + j);
  }
}

}  // namespace

void gemm_f16acc_row_special(std::int64_t K, const float* a, std::int64_t sa, const float* bt, std::int64_t W,
                             Accum accum, const Mode& mode, float* out, std::uint8_t* fl) {
  if (accum == Accum::Fp16Rn) row_special<true>(K, a, sa, bt, W, mode, out, fl);
  else row_special<false>(K, a, sa, bt, W, mode, out, fl);
}

void gemm_f16acc_block_exact(int rows, std::int64_t kc, const float* a, std::int64_t a_stride, float a_scale,
                             const float* bp, Accum accum, const Mode& mode, float* acc, std::uint8_t* flags,
                             std::int64_t ld_flags, std::int64_t ncols) {
  if (accum == Accum::Fp16Rn) block_rows<true>(rows, kc, a, a_stride, a_scale, bp, mode, acc, flags, ld_flags, ncols);
  else block_rows<false>(rows, kc, a, a_stride, a_scale, bp, mode, acc, flags, ld_flags, ncols);
}

}  // namespace probelab::num::detail
