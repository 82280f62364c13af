// BF16 classification and conversions to/from FP32/FP64. NaN payload handling mirrors fp16.h:
// FP32 -> BF16 keeps the sign and the upper 6 payload bits (fraction >> 16) and sets the quiet bit;
// BF16 -> FP32 shifts the payload up (fraction << 16) and sets the quiet bit. Signaling NaNs raise
// Invalid and are quieted.
#pragma once

#include "numerics/mode.h"
#include "numerics/types.h"

namespace probelab::num {

constexpr bool is_nan(bf16 x) noexcept { return (x.bits & 0x7F80u) == 0x7F80u && (x.bits & 0x007Fu) != 0; }
constexpr bool is_snan(bf16 x) noexcept { return is_nan(x) && (x.bits & 0x0040u) == 0; }
constexpr bool is_inf(bf16 x) noexcept { return (x.bits & 0x7FFFu) == 0x7F80u; }
constexpr bool is_finite(bf16 x) noexcept { return (x.bits & 0x7F80u) != 0x7F80u; }
constexpr bool is_zero(bf16 x) noexcept { return (x.bits & 0x7FFFu) == 0; }
constexpr bool is_subnormal(bf16 x) noexcept { return (x.bits & 0x7F80u) == 0 && (x.bits & 0x007Fu) != 0; }
constexpr bool sign_bit(bf16 x) noexcept { return (x.bits & 0x8000u) != 0; }

// Exact widening without flags or flushing. Never fails.
float to_float(bf16 x) noexcept;

// Exact widening with flags: Invalid (signaling NaN), DenormalIn (flushed in FLUSH_TO_ZERO mode).
Result<float> to_f32(bf16 x, const Mode& mode = {});

// Round to nearest even from the exact argument, with all flags (see flags.h).
Result<bf16> to_bf16(float x, const Mode& mode = {});
Result<bf16> to_bf16(double x, const Mode& mode = {});

}  // namespace probelab::num
