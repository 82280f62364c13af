// FP32 (binary32) helpers with flags: rounding from FP64 and passing an FP32 value through a Mode.
#pragma once

#include "numerics/mode.h"
#include "numerics/types.h"

namespace probelab::num {

bool is_subnormal(float x) noexcept;

// Round to nearest even from the exact argument, with all flags (see flags.h). NaN: sign and the
// upper 22 payload bits kept, quiet bit set; a signaling NaN raises Invalid.
Result<float> to_f32(double x, const Mode& mode = {});

// Apply the Mode to an FP32 result as the datapath delivers it: FLUSH_TO_ZERO replaces a
// subnormal by a signed zero (DenormalOut|Underflow|Inexact; in PRESERVE mode a subnormal only
// raises DenormalOut), SATURATION maps +-Inf -> +-FLT_MAX and NaN -> +0 (no flags).
Result<float> deliver(float x, const Mode& mode = {});

}  // namespace probelab::num
