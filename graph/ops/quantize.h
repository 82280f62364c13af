// Shared arithmetic of ONNX's linear quantization ops (graph/ops/quantize.cpp and
// graph/ops/integer_gemm.cpp): zero points and scales per tensor or along one axis, round half to
// even and saturation to int8 / uint8.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "graph/ops/op_util.h"

namespace probelab::graph::ops::quant {

/// Smallest and largest value of quantized dtype t (int8 or uint8; int32 for DequantizeLinear's
/// int32 input).
double qmin(DType t);
double qmax(DType t);

/// round(v) half to even, clamped to t's range; NaN gives 0.
inline double saturate(double v, DType t) {
  if (std::isnan(v)) return 0.0;
  return std::fmin(std::fmax(std::nearbyint(v), qmin(t)), qmax(t));
}

/// The quantized value of quotient q = x / scale: round(q) half to even, plus the zero point,
/// clamped to t's range (rounded before the zero point is added, so a tie does not depend on
/// the zero point's parity). NaN gives the zero point (the value that stands for 0): the input
/// scan flags it as a NaN input.
inline double quantize(double q, double zero_point, DType t) {
  if (std::isnan(q)) return zero_point;
  return std::fmin(std::fmax(std::nearbyint(q) + zero_point, qmin(t)), qmax(t));
}

/// Fails unless `d` is int8 or uint8 (`what` names the input).
void expect_quantized(const Op& op, const TensorDesc& d, const char* what);

/// A quantization parameter (scale or zero point) of a tensor of shape `x`: a scalar or [1] (per
/// tensor), or 1-D of x's size along `axis` (per axis). Fails naming `what` otherwise.
void expect_param(const Op& op, const Shape& x, const TensorDesc& p, std::int64_t axis, const char* what);

/// Maps an element of a tensor of shape `x` to its parameter index: 0 per tensor, else the
/// element's coordinate along `axis`.
struct ParamIndex {
  std::int64_t inner = 1, dim = 1;  // elements below `axis`; x's size along it (1: per tensor)
  ParamIndex(const Shape& x, std::int64_t axis, std::int64_t param_numel);
  std::size_t operator()(std::int64_t k) const { return dim == 1 ? 0 : static_cast<std::size_t>(k / inner % dim); }
};

/// Values of a parameter tensor (nullptr: absent -> {0}) as doubles.
std::vector<double> values(const Tensor* t);

/// The integer tensor t minus its zero point, per tensor or along `axis` (a zero-point tensor of
/// t's shape without that axis broadcast), as an exact FP64 tensor.
Tensor centered(const Tensor& t, const Tensor* zero_point, std::int64_t axis);

/// An int32 accumulator value: `exact` (an integer) wrapped modulo 2^32 as the Cube's INT32
/// accumulator wraps.
inline double wrap_i32(double exact) {
  return static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::int64_t>(exact))));
}

/// The OpDef skeleton of a quantization op: one output "y", inputs named as given (a trailing "?"
/// marks an optional one), at least `min_inputs` of them.
OpDef op_def(std::string type, std::string doc, std::vector<std::string> ins, int min_inputs);

/// The integer matrix-product ops (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv): the
/// float op whose geometry and attributes they share ("MatMul" or "Conv", reading inputs "a" and
/// "b"), and where their operands A (x) and B (w) sit among their inputs.
Op integer_float_op(const Op& op);
struct IntegerOperands {
  std::size_t a, b;
};
IntegerOperands integer_operands(const Op& op);

}  // namespace probelab::graph::ops::quant
