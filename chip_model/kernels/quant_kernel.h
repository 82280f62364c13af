// Quantized Cube ops: a MatMul, Gemm or Conv whose args carry quantization attributes
// (spec/quant_args.h) runs as the low-bit datapath does:
//  1. the operands are quantized on the core (numerics/quant.h): activations (input 0) per
//     tensor, weights (input 1) per tensor or per output channel (Conv: W axis 0; MatMul: the
//     last axis of B; Gemm: axis 1 of B, axis 0 with transB), scales from the tensor's current
//     range (amax) unless a fixed activation scale is given;
//  2. the Cube multiplies the integer offsets q - zero_point (or the FP8 values) with FP32
//     accumulation — these are exact in the operands' FP16/BF16/FP32 dtype, so this is the INT8 /
//     FP8 GEMM with FP32 accumulation, k order as the op's own kernel documents;
//  3. the FP32 result is dequantized: y = fp32(acc * fp32(scale_a * scale_w[channel])) (a Gemm's
//     alpha is applied to acc first); then the bias (Conv B[m], Gemm beta * C) is added in FP32.
// Quantization flags (saturation = Overflow|Inexact, NaN inputs of INT formats = Invalid) are
// counted per operand in a QuantOpRecord (kernel.h), appended to KernelCall::quant when given;
// the OpRunner reports saturation to the detection circuit as an overflow of the operand.
// Delayed scaling (spec/quant_args.h) takes the operand's scale from its state in
// KernelCall::quant->meta (loaded from HBM by the OpRunner) and updates that state.
#pragma once

#include <cstdint>
#include <string>

#include "chip_model/kernels/kernel.h"
#include "chip_model/spec/op_args.h"
#include "numerics/quant.h"

namespace probelab::chip::kernels {

/// True when the attrs ask for quantization of either operand.
bool is_quantized(const spec::OpAttrs& attrs);

/// Computes a quantized Cube op with kernel `k` (see above). Throws std::runtime_error naming the
/// op for an op type other than MatMul, Gemm, Conv, a bad attribute value, or a delayed-scaling
/// state missing from c.quant. `record` (may be null) receives what the quantization did.
Computed compute_quantized(const Kernel& k, const KernelCall& c, QuantOpRecord* record = nullptr);

}  // namespace probelab::chip::kernels
