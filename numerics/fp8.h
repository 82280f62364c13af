// OCP OFP8 (E4M3, E5M2) conversions, a start for low-precision work. Encodings in types.h.
//
// To FP8 (round to nearest even from the exact argument, flags as in flags.h):
//   E5M2: IEEE-like: overflow -> +-Inf (INF_NAN) or +-57344 (SATURATION).
//   E4M3: has no infinity. A finite value whose rounding exceeds 448 (i.e. |x| > 464) raises
//         Overflow|Inexact and becomes NaN (INF_NAN, the OCP non-saturating conversion) or +-448
//         (SATURATION, the OCP saturating conversion). An infinite input raises Overflow and becomes
//         NaN (INF_NAN) or +-448 (SATURATION).
//   NaN inputs become a quiet NaN with the input's sign (E4M3: S.1111.111; E5M2: S.11111.1p, p the
//   top payload bit of the input), or +0 in SATURATION mode; a signaling NaN input raises Invalid.
// From FP8 the widening to FP32 is exact (DenormalIn for subnormal inputs, flushed in
// FLUSH_TO_ZERO mode; SATURATION maps Inf -> +-FLT_MAX and NaN -> +0).
#pragma once

#include "numerics/mode.h"
#include "numerics/types.h"

namespace probelab::num {

constexpr bool is_nan(fp8_e4m3 x) noexcept { return (x.bits & 0x7Fu) == 0x7Fu; }
constexpr bool is_nan(fp8_e5m2 x) noexcept { return (x.bits & 0x7Cu) == 0x7Cu && (x.bits & 0x03u) != 0; }
constexpr bool is_inf(fp8_e5m2 x) noexcept { return (x.bits & 0x7Fu) == 0x7Cu; }

float to_float(fp8_e4m3 x) noexcept;
float to_float(fp8_e5m2 x) noexcept;
Result<float> to_f32(fp8_e4m3 x, const Mode& mode = {});
Result<float> to_f32(fp8_e5m2 x, const Mode& mode = {});

Result<fp8_e4m3> to_e4m3(double x, const Mode& mode = {});
Result<fp8_e5m2> to_e5m2(double x, const Mode& mode = {});

}  // namespace probelab::num
