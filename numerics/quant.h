// Low-bit quantization as the datapath does it: FP8 (OCP E4M3 / E5M2) and integer (INT8 / INT4)
// codes with a scale, per tensor or per channel, symmetric or asymmetric, with flags.
//
// A quantized value is  real = scale * (q - zero_point), q a code of the format. What each step
// computes (all rounding is round to nearest, ties to even; no global state):
//  - choose_scale(format, symmetric, lo, hi) from the observed range [lo, hi] (lo <= 0 <= hi is
//    enforced by widening the range to include 0, so that 0 is exactly representable):
//      symmetric:  amax = max(|lo|, |hi|); scale = fp32(amax / qmax) where qmax is 127 (INT8),
//                  7 (INT4), 448 (E4M3), 57344 (E5M2); zero_point = 0. INT codes are the
//                  restricted range [-qmax, qmax] (the TensorRT / Ascend AMCT convention).
//      asymmetric: INT only: scale = fp32((hi - lo) / (qmax_u - qmin_u)) with [qmin_u, qmax_u] =
//                  [-128, 127] (INT8) or [-8, 7] (INT4); zero_point = clamp(rne(qmin_u - lo /
//                  scale)). FP8 formats are symmetric only (std::invalid_argument otherwise).
//    A zero range (all values 0) or a non-finite bound gives scale 1 (a non-finite bound raises
//    Invalid in the returned flags, the tensor is then quantized with scale 1).
//    inv_scale = fp32(1 / scale) is the multiplier the datapath uses.
//  - quantize(x, format, params): v = fp32(x * inv_scale) (the FP32 multiply of the Vector unit),
//    then v is converted to the format:
//      INT: q = rne(v) + zero_point; outside [qmin, qmax] the code saturates (clamped) and raises
//           Overflow|Inexact; a rounded value raises Inexact; NaN becomes code zero_point (real 0)
//           and raises Invalid (the real float->int conversion's behaviour); +-Inf saturates
//           with Overflow.
//      FP8: the OCP *saturating* conversion (fp8.h in SATURATION mode for finite and infinite
//           inputs: a value beyond the largest finite number becomes +-max with Overflow|Inexact,
//           an infinite one +-max with Overflow; a subnormal result raises DenormalOut);
//           NaN stays NaN (flags none; a later GEMM propagates it).
//    The returned `offset` is q - zero_point (INT) or the FP8 value itself: the number the Cube
//    multiplies. It is exact in FP16 and BF16 for every format (|q - zp| <= 255, FP8 values are
//    FP16 values), so a GEMM on offsets with FP32 accumulation is the low-bit GEMM.
//  - dequantize(offset, params) = fp32(scale * offset).
// Per channel: one QuantParams per channel, each chosen from that channel's range.
//
// Delayed scaling (Transformer Engine's DelayedScaling recipe, FP8 formats and INT alike): the
// scale used at step t comes from the amax *history* of the tensor at earlier steps, not from the
// tensor itself, so one quantization pass needs no reduction before the cast:
//   amax_h = max(history) (algorithm max) or history[0] (most_recent; history[0] is the newest);
//   multiplier = fp32(fp32(qmax / amax_h) / 2^margin)   (TE's `scale`; qmax as above)
//   scale      = fp32(1 / multiplier)                   (TE's `scale_inv`, what dequantizes)
// kept from the previous step when amax_h is 0 or not finite (TE's rule); the first step, with an
// empty history, uses multiplier 1. After the tensor is quantized its amax is pushed at the front
// of the history (the oldest entry drops out) and the next multiplier is computed from it. So the
// scale always lags the data by one step: a tensor whose amax jumps at step t saturates at step t
// whatever the history length, and with `max` a spike keeps the scale large for `length` steps.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "numerics/types.h"

namespace probelab::num {

enum class QuantFormat : std::uint8_t { Int8 = 0, Int4 = 1, E4M3 = 2, E5M2 = 3 };

/// "int8", "int4", "e4m3", "e5m2".
std::string_view quant_format_name(QuantFormat f);
/// Inverse of quant_format_name; throws std::invalid_argument listing the names.
QuantFormat parse_quant_format(std::string_view name);
bool is_fp8(QuantFormat f);
/// Largest code magnitude of the symmetric range (127, 7, 448, 57344).
double quant_qmax(QuantFormat f);
/// Code range [qmin, qmax] of the format for the given symmetry (FP8: [-max, max]).
double quant_code_min(QuantFormat f, bool symmetric);
double quant_code_max(QuantFormat f, bool symmetric);

struct QuantParams {
  QuantFormat format = QuantFormat::Int8;
  bool symmetric = true;
  float scale = 1.0f;
  float inv_scale = 1.0f;
  std::int32_t zero_point = 0;
};

/// Scale and zero point for the observed range [lo, hi] (see above); flags: Invalid when a bound
/// is not finite.
Result<QuantParams> choose_scale(QuantFormat f, bool symmetric, double lo, double hi);
/// Params with a given scale (scale > 0 and finite; zero point 0), e.g. a delayed-scaling scale.
QuantParams params_with_scale(QuantFormat f, float scale);

/// One element: the GEMM operand (q - zero_point, or the FP8 value) and the flags raised.
Result<float> quantize(float x, const QuantParams& p);
/// The integer code q itself (INT formats) or the FP8 bit pattern (FP8 formats), for storage.
Result<std::int32_t> quantize_code(float x, const QuantParams& p);
float dequantize(float offset, const QuantParams& p);

/// Counts of one bulk quantization.
struct QuantStats {
  std::uint64_t elements = 0;
  std::uint64_t saturated = 0;  // codes clamped to the range (Overflow raised)
  std::uint64_t invalid = 0;    // NaN inputs (INT: became zero_point)
  std::uint64_t inexact = 0;
  std::uint64_t underflow = 0;  // finite non-zero inputs whose code is zero (flushed by the scale)
  std::uint64_t subnormal = 0;  // FP8 codes that are subnormal (DenormalOut: reduced precision)
  double amax = 0.0;            // largest finite |x| seen
  std::int64_t first_saturated = -1;  // index of the first saturated element; -1: none
  float first_saturated_value = 0.0f; // its value before quantization
  Flags flags;                  // OR of every element's flags
};

enum class AmaxAlgorithm : std::uint8_t { Max = 0, MostRecent = 1 };
/// "max", "most_recent".
std::string_view amax_algorithm_name(AmaxAlgorithm a);
/// Inverse of amax_algorithm_name; throws std::invalid_argument listing the names.
AmaxAlgorithm parse_amax_algorithm(std::string_view name);

/// Delayed-scaling state of one tensor (see above): the multiplier in effect and the history,
/// newest first. `history.size()` is the history length (>= 1).
struct DelayedScalingState {
  float multiplier = 1.0f;
  std::vector<float> history;
};
/// Params of the next quantization from the state (symmetric, zero point 0).
QuantParams delayed_params(QuantFormat f, const DelayedScalingState& s);
/// Pushes `amax` (the amax just observed) into the history and computes the next multiplier.
void delayed_update(QuantFormat f, DelayedScalingState& s, float amax, AmaxAlgorithm a, int margin);

/// Quantizes `x` in place into offsets (see quantize). `params` has one entry (per tensor) or one
/// per channel; channel of element i is (i / inner) % params.size(), so a row-major tensor with
/// the channel axis c has inner = product of the dims after c. Throws std::invalid_argument on an
/// empty params or inner < 1.
QuantStats quantize_span(std::span<float> x, std::span<const QuantParams> params, std::int64_t inner);

/// Per-tensor or per-channel params from the data (range of each channel, see quantize_span for
/// the channel of an element). `channels` = 1 gives one per-tensor entry.
std::vector<QuantParams> choose_params(std::span<const float> x, QuantFormat f, bool symmetric, std::int64_t channels,
                                       std::int64_t inner, Flags* flags = nullptr);

}  // namespace probelab::num
