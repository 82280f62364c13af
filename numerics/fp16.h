// FP16 (binary16) classification and conversions to/from FP32/FP64.
//
// NaN payloads in conversions (same as the x86 F16C instructions VCVTPS2PH / VCVTPH2PS):
//   FP32 -> FP16: sign kept, quiet bit set, payload = the upper 9 payload bits of the FP32 NaN
//                 (fraction >> 13); a signaling NaN raises Invalid and is quieted.
//   FP16 -> FP32: sign kept, quiet bit set, payload shifted up (fraction << 13); a signaling NaN
//                 raises Invalid and is quieted.
// Arithmetic operations (arith.h) never propagate payloads: they return the default NaN.
// In SATURATION mode a NaN conversion result is +0 and an infinite one is +-max finite.
#pragma once

#include <cstdint>
#include <span>

#include "numerics/mode.h"
#include "numerics/types.h"

namespace probelab::num {

constexpr bool is_nan(f16 x) noexcept { return (x.bits & 0x7C00u) == 0x7C00u && (x.bits & 0x03FFu) != 0; }
constexpr bool is_snan(f16 x) noexcept { return is_nan(x) && (x.bits & 0x0200u) == 0; }
constexpr bool is_inf(f16 x) noexcept { return (x.bits & 0x7FFFu) == 0x7C00u; }
constexpr bool is_finite(f16 x) noexcept { return (x.bits & 0x7C00u) != 0x7C00u; }
constexpr bool is_zero(f16 x) noexcept { return (x.bits & 0x7FFFu) == 0; }
constexpr bool is_subnormal(f16 x) noexcept { return (x.bits & 0x7C00u) == 0 && (x.bits & 0x03FFu) != 0; }
constexpr bool sign_bit(f16 x) noexcept { return (x.bits & 0x8000u) != 0; }

// Exact widening without flags or flushing (NaNs as described above). Never fails.
float to_float(f16 x) noexcept;

// Exact widening with flags: Invalid (signaling NaN), DenormalIn (subnormal input; flushed to a
// signed zero in FLUSH_TO_ZERO mode). SATURATION maps Inf -> +-FLT_MAX and NaN -> +0.
Result<float> to_f32(f16 x, const Mode& mode = {});

// Round to nearest even once from the exact argument, with all flags (see flags.h). The argument
// is an operand of its own format: DenormalIn (and flushing) apply to FP32 resp. FP64 subnormals.
Result<f16> to_f16(float x, const Mode& mode = {});
Result<f16> to_f16(double x, const Mode& mode = {});
// to_f16(x).value in the default Mode, without the flags: round to odd to FP32 (one hardware
// conversion and its check), then to nearest even by F16C, which is one correct rounding of x
// (24 >= 11 + 2); NaNs take to_f16. About twenty times faster than to_f16(double).
f16 to_f16_value(double x) noexcept;
// to_f16_value of every element (x and out of one length), four to eight at a time.
void to_f16_values(std::span<const double> x, std::span<f16> out) noexcept;

}  // namespace probelab::num
