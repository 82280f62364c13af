// Quantization attributes of a Cube op's args block (spec/op_args.h): the host sets them on a
// MatMul, Gemm or Conv (or on such an op inside a fused body) to have the kernel quantize its
// operands on the chip, as a low-bit datapath does (chip_model/kernels/quant_kernel.h).
//
//   quant.weights              str  format of input 1 (the weights): int8 | int4 | e4m3 | e5m2
//   quant.weights.per_channel  i64  1: one scale per output channel; 0 (default): per tensor
//   quant.weights.symmetric    i64  1 (default) | 0 (asymmetric, INT formats only)
//   quant.activations          str  format of input 0 (per tensor)
//   quant.activations.symmetric i64 1 (default) | 0
//   quant.activations.scale    f64  > 0: a fixed scale (calibrated scaling) instead of the
//                                   current tensor's amax
// Delayed scaling (numerics/quant.h, Transformer Engine's recipe), per operand <p> =
// quant.activations | quant.weights (per tensor, symmetric):
//   <p>.scaling         str  current (default: the tensor's own amax) | delayed
//   <p>.amax_history    i64  history length (>= 1)
//   <p>.amax_algorithm  str  max | most_recent
//   <p>.margin          i64  >= 0: the scale leaves 2^margin of headroom
//   <p>.meta            i64  HBM address of the operand's state, FP32 [multiplier, history[0..L)]
//                            (newest first; initially [1, 0, ..., 0]); the kernel reads it before
//                            quantizing and writes it back updated (the host, which owns the
//                            buffer, may give a tensor name here: the executor sends its address)
// An absent format key leaves that operand in its stored dtype.
#pragma once

namespace probelab::spec {

inline constexpr const char* kQuantWeights = "quant.weights";
inline constexpr const char* kQuantWeightsPerChannel = "quant.weights.per_channel";
inline constexpr const char* kQuantWeightsSymmetric = "quant.weights.symmetric";
inline constexpr const char* kQuantActivations = "quant.activations";
inline constexpr const char* kQuantActivationsSymmetric = "quant.activations.symmetric";
inline constexpr const char* kQuantActivationsScale = "quant.activations.scale";
inline constexpr const char* kQuantScalingSuffix = ".scaling";
inline constexpr const char* kQuantHistorySuffix = ".amax_history";
inline constexpr const char* kQuantAlgorithmSuffix = ".amax_algorithm";
inline constexpr const char* kQuantMarginSuffix = ".margin";
inline constexpr const char* kQuantMetaSuffix = ".meta";

}  // namespace probelab::spec
