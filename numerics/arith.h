// Scalar arithmetic in FP16, BF16 and FP32 with IEEE 754 round-to-nearest-even results and flags.
//
// Every operation is correctly rounded (one rounding of the exact result) for every input,
// including subnormal results, and returns {value, flags} (flag meanings in flags.h). Operands are
// first read through the Mode (DenormalIn; FLUSH_TO_ZERO reads subnormals as signed zeros), the
// IEEE result is computed, then the Mode is applied to the result (flush, saturation; mode.h).
//
// How exactness is achieved: operands are widened exactly to binary64; the exact result r is then
// represented by a binary64 value rounded to odd (the nearest binary64 values with an odd last
// bit, or r itself when representable): + - use the TwoSum error term, * is exact in binary64
// (2x24 <= 53 bits), / and sqrt use the exact FMA remainder, fma uses the exact product plus
// TwoSum. Rounding a round-to-odd binary64 value once more to a format of precision p <= 51 gives
// the correctly rounded result (Boldo & Melquiond, "When double rounding is odd"), so there is no
// double-rounding error for any format here, including FP32 fma (for which std::fma in binary64
// followed by a rounding to binary32 would be wrong in rare cases). For + - * / sqrt of FP16,
// BF16 and FP32 plain binary64 round-to-nearest would also be innocuous (53 >= 2p+2, Figueroa),
// but the round-to-odd form covers fma with the same code.
//
// NaN results: the default NaN of the format (types.h), never a propagated payload. Signaling NaN
// operands raise Invalid. Special cases:
//   add/sub   Inf - Inf -> Invalid. An exact zero sum is +0 (x + (-x) = +0; -0 + -0 = -0).
//   mul       0 * Inf -> Invalid.
//   div       0/0, Inf/Inf -> Invalid; finite non-zero / 0 -> +-Inf with DivByZero.
//   sqrt      negative non-zero (including -Inf) -> Invalid; sqrt(-0) = -0.
//   fma       a*b + c with a single rounding. 0*Inf raises Invalid even when c is a quiet NaN;
//             (a*b = +-Inf) + (c = -+Inf) -> Invalid.
//   min/max   IEEE 754-2019 minimum/maximum: NaN if either operand is NaN; -0 < +0. Only
//             Invalid (signaling NaN) and DenormalIn can be raised; the result is an operand
//             (after input flushing), never rounded.
//   min_num/max_num  IEEE 754-2019 minimumNumber/maximumNumber: a NaN operand is ignored unless
//             both are NaN; -0 < +0.
//   compare_quiet      IEEE compareQuiet*: Invalid only for a signaling NaN operand.
//   compare_signaling  IEEE compareSignaling*: Invalid for any NaN operand.
//   Both return Unordered iff an operand is NaN; -0 == +0; flushed subnormals compare as zero.
#pragma once

#include "numerics/mode.h"
#include "numerics/types.h"

namespace probelab::num {

Result<f16> add(f16 a, f16 b, const Mode& mode = {});
Result<f16> sub(f16 a, f16 b, const Mode& mode = {});
Result<f16> mul(f16 a, f16 b, const Mode& mode = {});
Result<f16> div(f16 a, f16 b, const Mode& mode = {});
Result<f16> sqrt(f16 a, const Mode& mode = {});
Result<f16> fma(f16 a, f16 b, f16 c, const Mode& mode = {});
Result<f16> min(f16 a, f16 b, const Mode& mode = {});
Result<f16> max(f16 a, f16 b, const Mode& mode = {});
Result<f16> min_num(f16 a, f16 b, const Mode& mode = {});
Result<f16> max_num(f16 a, f16 b, const Mode& mode = {});
Result<Cmp> compare_quiet(f16 a, f16 b, const Mode& mode = {});
Result<Cmp> compare_signaling(f16 a, f16 b, const Mode& mode = {});

Result<bf16> add(bf16 a, bf16 b, const Mode& mode = {});
Result<bf16> sub(bf16 a, bf16 b, const Mode& mode = {});
Result<bf16> mul(bf16 a, bf16 b, const Mode& mode = {});
Result<bf16> div(bf16 a, bf16 b, const Mode& mode = {});
Result<bf16> sqrt(bf16 a, const Mode& mode = {});
Result<bf16> fma(bf16 a, bf16 b, bf16 c, const Mode& mode = {});
Result<bf16> min(bf16 a, bf16 b, const Mode& mode = {});
Result<bf16> max(bf16 a, bf16 b, const Mode& mode = {});
Result<bf16> min_num(bf16 a, bf16 b, const Mode& mode = {});
Result<bf16> max_num(bf16 a, bf16 b, const Mode& mode = {});
Result<Cmp> compare_quiet(bf16 a, bf16 b, const Mode& mode = {});
Result<Cmp> compare_signaling(bf16 a, bf16 b, const Mode& mode = {});

Result<float> add(float a, float b, const Mode& mode = {});
Result<float> sub(float a, float b, const Mode& mode = {});
Result<float> mul(float a, float b, const Mode& mode = {});
Result<float> div(float a, float b, const Mode& mode = {});
Result<float> sqrt(float a, const Mode& mode = {});
Result<float> fma(float a, float b, float c, const Mode& mode = {});
Result<float> min(float a, float b, const Mode& mode = {});
Result<float> max(float a, float b, const Mode& mode = {});
Result<float> min_num(float a, float b, const Mode& mode = {});
Result<float> max_num(float a, float b, const Mode& mode = {});
Result<Cmp> compare_quiet(float a, float b, const Mode& mode = {});
Result<Cmp> compare_signaling(float a, float b, const Mode& mode = {});

}  // namespace probelab::num
