// NaN/Inf/subnormal scans (bulk.h), 16 (FP16/BF16) or 8 (FP32) elements per AVX2 step, and the
// replacement of delivered NaNs by the default NaN.
#include <immintrin.h>

#include <bit>
#include <cmath>

#include "numerics/bf16.h"
#include "numerics/bulk.h"
#include "numerics/fp16.h"
#include "numerics/detail/format.h"

namespace probelab::num {
namespace {

void note(std::int64_t& count, std::int64_t& first, unsigned mask, std::int64_t base, int bytes_per_lane) {
  if (mask == 0) return;
  count += std::popcount(mask) / bytes_per_lane;
  if (first < 0) first = base + std::countr_zero(mask) / bytes_per_lane;
}

template <class F>
void scan_scalar(const std::uint16_t* x, std::size_t lo, std::size_t hi, ScanReport& r) {
  for (std::size_t i = lo; i < hi; ++i) {
    const auto idx = static_cast<std::int64_t>(i);
    if (detail::is_nan_bits<F>(x[i])) note(r.nan_count, r.first_nan, 1u, idx, 1);
    else if (detail::is_inf_bits<F>(x[i])) note(r.inf_count, r.first_inf, 1u, idx, 1);
    else if (detail::is_sub_bits<F>(x[i])) note(r.subnormal_count, r.first_subnormal, 1u, idx, 1);
  }
}

template <class F>
ScanReport scan16(const std::uint16_t* x, std::size_t n) {
  ScanReport r;
  const __m256i em = _mm256_set1_epi16(static_cast<short>(F::exp_mask));
  const __m256i fm = _mm256_set1_epi16(static_cast<short>(F::frac_mask));
  const __m256i zero = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i e = _mm256_and_si256(v, em);
    const __m256i f_zero = _mm256_cmpeq_epi16(_mm256_and_si256(v, fm), zero);
    const __m256i e_top = _mm256_cmpeq_epi16(e, em);
    const __m256i e_zero = _mm256_cmpeq_epi16(e, zero);
    const auto nan = static_cast<unsigned>(_mm256_movemask_epi8(_mm256_andnot_si256(f_zero, e_top)));
    const auto inf = static_cast<unsigned>(_mm256_movemask_epi8(_mm256_and_si256(f_zero, e_top)));
    const auto sub = static_cast<unsigned>(_mm256_movemask_epi8(_mm256_andnot_si256(f_zero, e_zero)));
    if ((nan | inf | sub) == 0) continue;
    const auto base = static_cast<std::int64_t>(i);
    note(r.nan_count, r.first_nan, nan, base, 2);
    note(r.inf_count, r.first_inf, inf, base, 2);
    note(r.subnormal_count, r.first_subnormal, sub, base, 2);
  }
  scan_scalar<F>(x, i, n, r);
  return r;
}

}  // namespace

ScanReport scan(std::span<const f16> x) {
  return scan16<detail::F16>(reinterpret_cast<const std::uint16_t*>(x.data()), x.size());
}

ScanReport scan(std::span<const bf16> x) {
  return scan16<detail::BF16>(reinterpret_cast<const std::uint16_t*>(x.data()), x.size());
}

namespace {

template <bool Limit>
LimitScan scan32(std::span<const float> x, float limit) {
  LimitScan out;
  ScanReport& r = out.scan;
  const std::size_t n = x.size();
  // Magnitudes compare as the integer patterns of non-negative floats.
  const std::uint32_t lim_bits = std::bit_cast<std::uint32_t>(limit);
  const __m256i lim_m1 = _mm256_set1_epi32(static_cast<int>(lim_bits - 1));
  const __m256i abs_m = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i em = _mm256_set1_epi32(0x7F800000);
  const __m256i fm = _mm256_set1_epi32(0x007FFFFF);
  const __m256i zero = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.data() + i));
    const __m256i e = _mm256_and_si256(v, em);
    const __m256i f_zero = _mm256_cmpeq_epi32(_mm256_and_si256(v, fm), zero);
    const __m256i e_top = _mm256_cmpeq_epi32(e, em);
    const __m256i e_zero = _mm256_cmpeq_epi32(e, zero);
    auto mm = [](__m256i m) { return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(m))); };
    const unsigned nan = mm(_mm256_andnot_si256(f_zero, e_top));
    const unsigned inf = mm(_mm256_and_si256(f_zero, e_top));
    const unsigned sub = mm(_mm256_andnot_si256(f_zero, e_zero));
    unsigned beyond = 0;
    if constexpr (Limit) {
      const __m256i a = _mm256_and_si256(v, abs_m);
      beyond = mm(_mm256_and_si256(_mm256_cmpgt_epi32(a, lim_m1), _mm256_cmpgt_epi32(em, a)));
    }
    if ((nan | inf | sub | beyond) == 0) continue;
    const auto base = static_cast<std::int64_t>(i);
    note(r.nan_count, r.first_nan, nan, base, 1);
    note(r.inf_count, r.first_inf, inf, base, 1);
    note(r.subnormal_count, r.first_subnormal, sub, base, 1);
    if constexpr (Limit) note(out.beyond_count, out.first_beyond, beyond, base, 1);
  }
  for (; i < n; ++i) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(x[i]);
    const auto idx = static_cast<std::int64_t>(i);
    if (detail::is_nan_bits<detail::F32>(b)) note(r.nan_count, r.first_nan, 1u, idx, 1);
    else if (detail::is_inf_bits<detail::F32>(b)) note(r.inf_count, r.first_inf, 1u, idx, 1);
    else if (detail::is_sub_bits<detail::F32>(b)) note(r.subnormal_count, r.first_subnormal, 1u, idx, 1);
    if constexpr (Limit) {
      const std::uint32_t a = b & 0x7FFFFFFFu;
      if (a >= lim_bits && a < 0x7F800000u) note(out.beyond_count, out.first_beyond, 1u, idx, 1);
    }
  }
  return out;
}

}  // namespace

ScanReport scan(std::span<const float> x) { return scan32<false>(x, 1.0f).scan; }

LimitScan scan(std::span<const float> x, float limit) { return scan32<true>(x, limit); }

namespace {

template <class T, class IsNan>
std::int64_t replace_nans(std::span<T> x, T default_nan, IsNan nan) {
  std::int64_t n = 0;
  for (T& v : x)
    if (nan(v)) {
      v = default_nan;
      ++n;
    }
  return n;
}

}  // namespace

std::int64_t canonicalize_nans(std::span<float> x) {
  return replace_nans(x, std::bit_cast<float>(kF32DefaultNaNBits), [](float v) { return std::isnan(v); });
}
std::int64_t canonicalize_nans(std::span<f16> x) {
  return replace_nans(x, kF16DefaultNaN, [](f16 v) { return is_nan(v); });
}
std::int64_t canonicalize_nans(std::span<bf16> x) {
  return replace_nans(x, kBF16DefaultNaN, [](bf16 v) { return is_nan(v); });
}

}  // namespace probelab::num
