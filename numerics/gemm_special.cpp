// The elements whose row of A or column of B holds NaN or Inf, for FP16 operands: vectorised across
// columns, with the values and per-element flags of the scalar definition (gemm_scalar.cpp). FP32
// accumulation here; FP16 accumulation by the exact kernel's row_special (gemm_f16acc_exact.cpp).
//
// FP32 accumulation:
// Why plain FMAs give the scalar definition's values: for FP16 inputs every product is exact in
// FP32 and every sum is RN32, as in element_scalar; NaN, once produced, stays NaN (the scalar code
// keeps the default NaN, here any NaN becomes the default NaN at the end); an infinite accumulator
// stays infinite or becomes NaN (Inf - Inf) as IEEE says.
// Why these flags: per step, with p = a*b as FP32 (NaN exactly for NaN inputs and 0*Inf),
//   Invalid   a signaling NaN anywhere in the row of A or the column of B (the scalar code reads
//             every operand); p is NaN with neither input NaN (0*Inf, raised even once the
//             accumulator is NaN); the sum is NaN while neither the accumulator nor p is (Inf - Inf);
//   Overflow  the sum is infinite while neither the accumulator nor p is (a finite overflow).
// With FP16 inputs no sum is tiny (all are multiples of 2^-48), so nothing else can be raised.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "numerics/detail/format.h"
#include "numerics/detail/gemm_internal.h"

namespace probelab::num::detail {
namespace {

constexpr std::uint8_t kInvalid = Flags::bit(Flag::Invalid);
constexpr std::uint8_t kOverflow = Flags::bit(Flag::Overflow);

// The exact FP32 value of an FP16 pattern read through the Mode (NaN and Inf kept).
float value_of(std::uint16_t h, const Mode& mode) {
  if (mode.denormal == DenormalMode::FlushToZero && is_sub_bits<F16>(h)) return (h & 0x8000u) ? -0.0f : 0.0f;
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

std::uint16_t at(const GemmOperand& op, std::int64_t r, std::int64_t c) {
  return op.trans ? op.data[c * op.ld + r] : op.data[r * op.ld + c];
}

inline __m256 is_nan(__m256 v) noexcept { return _mm256_cmp_ps(v, v, _CMP_UNORD_Q); }
inline __m256 is_inf(__m256 v) noexcept {
  const __m256 mag = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
  return _mm256_cmp_ps(mag, _mm256_set1_ps(__builtin_inff()), _CMP_EQ_OQ);
}

// One row of A (a[k * sa], k in [0, K)) against the W columns of bt (row-major K x W, W a multiple
// of 8): accumulators to acc[0..W), flag bits to fl[0..W).
void row_times(std::int64_t K, const float* a, std::int64_t sa, const float* bt, std::int64_t W, float* acc,
               std::uint8_t* fl) {
  for (std::int64_t j = 0; j < W; j += 8) {
    __m256 s = _mm256_setzero_ps(), inv = _mm256_setzero_ps(), ovf = _mm256_setzero_ps();
    for (std::int64_t k = 0; k < K; ++k) {
      const __m256 av = _mm256_broadcast_ss(a + k * sa);
      const __m256 b = _mm256_load_ps(bt + k * W + j);
      const __m256 p = _mm256_mul_ps(av, b);
      const __m256 next = _mm256_fmadd_ps(av, b, s);
      const __m256 p_nan = is_nan(p), in_nan = _mm256_or_ps(is_nan(av), is_nan(b));
      inv = _mm256_or_ps(inv, _mm256_andnot_ps(in_nan, p_nan));                                    // 0 * Inf
      inv = _mm256_or_ps(inv, _mm256_andnot_ps(_mm256_or_ps(is_nan(s), p_nan), is_nan(next)));  // Inf - Inf
      ovf = _mm256_or_ps(ovf, _mm256_andnot_ps(_mm256_or_ps(is_inf(s), is_inf(p)), is_inf(next)));
      s = next;
    }
    _mm256_storeu_ps(acc + j, s);
    const int mi = _mm256_movemask_ps(inv), mo = _mm256_movemask_ps(ovf);
    for (int l = 0; l < 8; ++l) {
      fl[j + l] = static_cast<std::uint8_t>(((mi >> l) & 1 ? kInvalid : 0) | ((mo >> l) & 1 ? kOverflow : 0));
    }
  }
}

}  // namespace

void gemm_special(const GemmOperand& a, const GemmOperand& b, Accum accum, const Mode& mode, std::int64_t M,
                  std::int64_t N, std::int64_t k0, std::int64_t k1, const Packed& A,
                  const std::vector<std::uint8_t>& row_slow, const std::vector<std::uint8_t>& col_slow, float* acc,
                  std::int64_t ld, BulkReport& rep) {
  auto kernel = [&](const float* ap, std::int64_t sa, const float* bt, std::int64_t W, float* out, std::uint8_t* fl) {
    if (accum == Accum::Fp32) row_times(k1 - k0, ap, sa, bt, W, out, fl);
    else gemm_f16acc_row_special(k1 - k0, ap, sa, bt, W, accum, mode, out, fl);
  };
  const std::int64_t K = k1 - k0;
  std::vector<std::int64_t> cols;
  for (std::int64_t n = 0; n < N; ++n) {
    if (col_slow[static_cast<std::size_t>(n)]) cols.push_back(n);
  }
  const bool any_row = std::find(row_slow.begin(), row_slow.end(), 1) != row_slow.end();
  if (!any_row && cols.empty()) return;
  // Signaling NaNs of each row of A and column of B within [k0, k1): Invalid for the whole row/column
  // (a column or row with one is slow).
  auto snan = [](std::uint16_t h) { return is_nan_bits<F16>(h) && (h & 0x0200u) == 0; };
  auto row_snan = [&](std::int64_t m) {
    for (std::int64_t k = k0; k < k1; ++k) {
      if (snan(at(a, m, k))) return true;
    }
    return false;
  };
  std::vector<std::uint8_t> col_has_snan(static_cast<std::size_t>(N), 0);
  for (std::int64_t n : cols) {
    for (std::int64_t k = k0; k < k1 && !col_has_snan[static_cast<std::size_t>(n)]; ++k) {
      col_has_snan[static_cast<std::size_t>(n)] = snan(at(b, k, n));
    }
  }
  const std::int64_t wide = (N + 7) / 8 * 8, narrow = (static_cast<std::int64_t>(cols.size()) + 7) / 8 * 8;
  FloatBuffer bt = aligned_floats(K * std::max(wide, narrow));
  std::vector<float> arow(static_cast<std::size_t>(K)), out(static_cast<std::size_t>(std::max(wide, narrow)));
  std::vector<std::uint8_t> fl(out.size());
  auto finish = [&](std::int64_t m, std::int64_t n, float v, std::uint8_t f, bool snan_row) {
    acc[m * ld + n] = v != v ? std::bit_cast<float>(0x7FC00000u) : v;  // the default NaN
    if (snan_row || col_has_snan[static_cast<std::size_t>(n)]) f |= kInvalid;
    if (f) rep.raise(Flags(f), m * N + n);
  };
  if (any_row) {  // whole rows: all of B with its true values
    for (std::int64_t k = 0; k < K; ++k) {
      for (std::int64_t n = 0; n < wide; ++n) bt[k * wide + n] = n < N ? value_of(at(b, k0 + k, n), mode) : 0.0f;
    }
    for (std::int64_t m = 0; m < M; ++m) {
      if (!row_slow[static_cast<std::size_t>(m)]) continue;
      for (std::int64_t k = 0; k < K; ++k) arow[static_cast<std::size_t>(k)] = value_of(at(a, m, k0 + k), mode);
      kernel(arow.data(), 1, bt.get(), wide, out.data(), fl.data());
      const bool sr = row_snan(m);
      for (std::int64_t n = 0; n < N; ++n) finish(m, n, out[static_cast<std::size_t>(n)], fl[static_cast<std::size_t>(n)], sr);
    }
  }
  if (!cols.empty()) {  // the other rows against the slow columns only
    for (std::int64_t k = 0; k < K; ++k) {
      for (std::int64_t j = 0; j < narrow; ++j) {
        const auto jj = static_cast<std::size_t>(j);
        bt[k * narrow + j] = jj < cols.size() ? value_of(at(b, k0 + k, cols[jj]), mode) : 0.0f;
      }
    }
    for (std::int64_t m = 0; m < M; ++m) {
      if (row_slow[static_cast<std::size_t>(m)]) continue;
      // a tame row: its packed values are its true values
      const float* ap = A.panel(m / kPanelA) + k0 * kPanelA + m % kPanelA;
      kernel(ap, kPanelA, bt.get(), narrow, out.data(), fl.data());
      for (std::size_t j = 0; j < cols.size(); ++j) finish(m, cols[j], out[j], fl[j], false);
    }
  }
}

}  // namespace probelab::num::detail
