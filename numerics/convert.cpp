// Conversions (of one value; to_f16_values: of many) between FP32/FP64 and FP16, BF16, FP8 (fp16.h, bf16.h, fp8.h, fp32.h).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "numerics/bf16.h"
#include "numerics/detail/ops.h"
#include "numerics/fp16.h"
#include "numerics/fp32.h"
#include "numerics/fp8.h"

namespace probelab::num {
namespace {

template <class T, class F>
Result<T> wrap(detail::Rounded<F> r) {
  return {T{static_cast<decltype(T{}.bits)>(r.bits)}, r.flags};
}
Result<float> wrap_f32(detail::Rounded<detail::F32> r) {
  return {std::bit_cast<float>(r.bits), r.flags};
}
template <class F>
float widen(std::uint32_t b) noexcept {
  if (detail::is_nan_bits<F>(b)) return static_cast<float>(detail::nan_to_double<F>(b));
  if (detail::is_inf_bits<F>(b)) return (b & F::sign_mask) ? -INFINITY : INFINITY;
  return static_cast<float>(detail::decode_finite<F>(b));
}

}  // namespace

float to_float(f16 x) noexcept { return widen<detail::F16>(x.bits); }
float to_float(bf16 x) noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16 |
                                                              (is_nan(x) ? 0x00400000u : 0u)); }
float to_float(fp8_e4m3 x) noexcept { return widen<detail::E4M3>(x.bits); }
float to_float(fp8_e5m2 x) noexcept { return widen<detail::E5M2>(x.bits); }

Result<float> to_f32(f16 x, const Mode& mode) {
  validate(mode);
  return wrap_f32(detail::convert_op<detail::F16, detail::F32>(x.bits, mode));
}
Result<float> to_f32(bf16 x, const Mode& mode) {
  validate(mode);
  return wrap_f32(detail::convert_op<detail::BF16, detail::F32>(x.bits, mode));
}
Result<float> to_f32(fp8_e4m3 x, const Mode& mode) {
  validate(mode);
  return wrap_f32(detail::convert_op<detail::E4M3, detail::F32>(x.bits, mode));
}
Result<float> to_f32(fp8_e5m2 x, const Mode& mode) {
  validate(mode);
  return wrap_f32(detail::convert_op<detail::E5M2, detail::F32>(x.bits, mode));
}
Result<float> to_f32(double x, const Mode& mode) {
  validate(mode);
  return wrap_f32(detail::convert_double<detail::F32>(x, mode));
}

Result<f16> to_f16(float x, const Mode& mode) {
  validate(mode);
  return wrap<f16>(detail::convert_op<detail::F32, detail::F16>(std::bit_cast<std::uint32_t>(x), mode));
}
Result<f16> to_f16(double x, const Mode& mode) {
  validate(mode);
  return wrap<f16>(detail::convert_double<detail::F16>(x, mode));
}
f16 to_f16_value(double x) noexcept {
  if (std::isnan(x)) return to_f16(x).value;
  float f = static_cast<float>(x);
  const double back = f;
  if (back != x && std::isfinite(f)) {  // inexact: truncate, then set the last bit
    std::uint32_t b = std::bit_cast<std::uint32_t>(f);
    if (std::fabs(back) > std::fabs(x)) --b;
    f = std::bit_cast<float>(b | 1u);
  }
  return f16{static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))};
}

namespace {

// Round to odd of four doubles to FP32 as to_f16_value does it (no NaN among them).
__m128 round_to_odd_f32(__m256d x) noexcept {
  const __m128 f = _mm256_cvtpd_ps(x);
  const __m256d back = _mm256_cvtps_pd(f);
  const __m256d sign = _mm256_set1_pd(-0.0);
  const __m256d inexact = _mm256_cmp_pd(back, x, _CMP_NEQ_UQ);
  const __m256d larger = _mm256_and_pd(inexact, _mm256_cmp_pd(_mm256_andnot_pd(sign, back), _mm256_andnot_pd(sign, x), _CMP_GT_OQ));
  // The 64-bit masks as 32-bit lanes (the low half of each is all ones or all zeros).
  const __m256i pick = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
  const auto narrow = [&](__m256d m) {
    return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(m), pick));
  };
  const __m128i finite = _mm_castps_si128(_mm_cmp_ps(_mm_andnot_ps(_mm_set1_ps(-0.0f), f), _mm_set1_ps(INFINITY), _CMP_LT_OQ));
  const __m128i dec = _mm_and_si128(narrow(larger), finite), odd = _mm_and_si128(narrow(inexact), finite);
  __m128i b = _mm_add_epi32(_mm_castps_si128(f), dec);  // dec lanes are -1: truncation toward zero
  b = _mm_or_si128(b, _mm_and_si128(odd, _mm_set1_epi32(1)));
  return _mm_castsi128_ps(b);
}

bool any_nan(__m256d x) noexcept { return _mm256_movemask_pd(_mm256_cmp_pd(x, x, _CMP_UNORD_Q)) != 0; }

}  // namespace

void to_f16_values(std::span<const double> x, std::span<f16> out) noexcept {
  const std::size_t n = std::min(x.size(), out.size());
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d lo = _mm256_loadu_pd(x.data() + i), hi = _mm256_loadu_pd(x.data() + i + 4);
    if (any_nan(lo) || any_nan(hi)) {
      for (std::size_t k = i; k < i + 8; ++k) out[k] = to_f16_value(x[k]);
      continue;
    }
    const __m256 f = _mm256_set_m128(round_to_odd_f32(hi), round_to_odd_f32(lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data() + i),
                     _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) out[i] = to_f16_value(x[i]);
}

Result<bf16> to_bf16(float x, const Mode& mode) {
  validate(mode);
  return wrap<bf16>(detail::convert_op<detail::F32, detail::BF16>(std::bit_cast<std::uint32_t>(x), mode));
}
Result<bf16> to_bf16(double x, const Mode& mode) {
  validate(mode);
  return wrap<bf16>(detail::convert_double<detail::BF16>(x, mode));
}
Result<fp8_e4m3> to_e4m3(double x, const Mode& mode) {
  validate(mode);
  return wrap<fp8_e4m3>(detail::convert_double<detail::E4M3>(x, mode));
}
Result<fp8_e5m2> to_e5m2(double x, const Mode& mode) {
  validate(mode);
  return wrap<fp8_e5m2>(detail::convert_double<detail::E5M2>(x, mode));
}

bool is_subnormal(float x) noexcept {
  return detail::is_sub_bits<detail::F32>(std::bit_cast<std::uint32_t>(x));
}

Result<float> deliver(float x, const Mode& mode) {
  validate(mode);
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  if (detail::is_nan_bits<detail::F32>(b)) return {std::bit_cast<float>(detail::nan_result(b, mode)), {}};
  if (detail::is_inf_bits<detail::F32>(b)) {
    return {std::bit_cast<float>(detail::inf_result<detail::F32>((b & detail::F32::sign_mask) != 0, mode)), {}};
  }
  if (!detail::is_sub_bits<detail::F32>(b)) return {x, {}};
  if (mode.denormal == DenormalMode::FlushToZero) {
    return {std::bit_cast<float>(b & detail::F32::sign_mask), Flag::DenormalOut | Flag::Underflow | Flag::Inexact};
  }
  return {x, Flag::DenormalOut};
}

}  // namespace probelab::num
