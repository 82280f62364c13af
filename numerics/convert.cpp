// Scalar conversions between FP32/FP64 and FP16, BF16, FP8 (fp16.h, bf16.h, fp8.h, fp32.h).
#include <immintrin.h>

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
