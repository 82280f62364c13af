// ONNX linear quantization: QuantizeLinear (y = saturate(round(x / scale) + zero_point), per
// tensor or per axis, to int8 or uint8), DequantizeLinear (y = (x - zero_point) * scale) and
// DynamicQuantizeLinear (uint8 with the scale and zero point of x's range). Inference only: the
// outputs of the first and last are integers, and quantization-aware training fakes them.
#include "graph/ops/quantize.h"

#include <algorithm>
#include <limits>

namespace probelab::graph::ops {
namespace quant {

double qmin(DType t) {
  return t == DType::I8 ? -128.0 : t == DType::U8 ? 0.0 : static_cast<double>(std::numeric_limits<std::int32_t>::min());
}
double qmax(DType t) {
  return t == DType::I8 ? 127.0 : t == DType::U8 ? 255.0 : static_cast<double>(std::numeric_limits<std::int32_t>::max());
}

void expect_quantized(const Op& op, const TensorDesc& d, const char* what) {
  if (d.dtype != DType::I8 && d.dtype != DType::U8)
    fail(op, "{} must be an int8 or uint8 tensor, got {}", what, dtype_name(d.dtype));
}

void expect_param(const Op& op, const Shape& x, const TensorDesc& p, std::int64_t axis, const char* what) {
  const std::int64_t n = numel(p.shape);
  if (p.shape.empty() || (p.shape.size() == 1 && n == 1)) return;
  const auto a = static_cast<std::size_t>(norm_axis(op, axis, static_cast<std::int64_t>(x.size())));
  if (p.shape.size() != 1 || p.shape[0] != x[a])
    fail(op, "{} must be a scalar or have shape [{}] (one per index of axis {} of {}), got {}", what, x[a], a,
         shape_str(x), shape_str(p.shape));
}

ParamIndex::ParamIndex(const Shape& x, std::int64_t axis, std::int64_t param_numel) {
  if (param_numel <= 1 || x.empty()) return;
  const auto a = static_cast<std::size_t>(axis < 0 ? axis + static_cast<std::int64_t>(x.size()) : axis);
  inner = prod(x, a + 1, x.size());
  dim = x[a];
}

std::vector<double> values(const Tensor* t) { return t ? t->to_f64() : std::vector<double>{0.0}; }

Tensor centered(const Tensor& t, const Tensor* zero_point, std::int64_t axis) {
  const std::vector<double> x = t.to_f64(), zp = values(zero_point);
  const ParamIndex at(t.shape(), axis, static_cast<std::int64_t>(zp.size()));
  Tensor out = Tensor::for_overwrite(TensorDesc{DType::F64, t.shape(), Format::ND});
  auto y = out.data<double>();
  for (std::size_t k = 0; k < x.size(); ++k) y[k] = x[k] - zp[at(static_cast<std::int64_t>(k))];
  return out;
}

OpDef op_def(std::string type, std::string doc, std::vector<std::string> ins, int min_inputs) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.min_inputs = min_inputs;
  d.max_inputs = static_cast<int>(ins.size());
  d.input_names = std::move(ins);
  d.output_names = {"y"};
  return d;
}

}  // namespace quant

namespace {

using quant::expect_param;

std::int64_t axis_of(const Op& op) { return op.has_attr("axis") ? op.attr_int("axis") : 1; }

// --- QuantizeLinear(x, y_scale, y_zero_point?) -> y ----------------------------------------------

std::vector<TensorDesc> infer_quantize(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 3);
  expect_float(op, in[0], "input x");
  expect_float(op, in[1], "y_scale");
  expect_param(op, in[0].shape, in[1], axis_of(op), "y_scale");
  DType out = DType::U8;
  if (has_input(op, 2)) {
    quant::expect_quantized(op, in[2], "y_zero_point");
    if (in[2].shape != in[1].shape)
      fail(op, "y_zero_point {} must have y_scale's shape {}", shape_str(in[2].shape), shape_str(in[1].shape));
    out = in[2].dtype;
  }
  return {TensorDesc{out, in[0].shape, Format::ND}};
}

template <class T> void quantize_ref(const Op& op, Ins in, Outs out) {
  auto x = cdata<T>(in[0]);
  const std::vector<double> scale = quant::values(in[1]), zp = quant::values(has_input(op, 2) ? in[2] : nullptr);
  const quant::ParamIndex at(in[0]->shape(), axis_of(op), static_cast<std::int64_t>(scale.size()));
  const DType t = out[0].dtype();
  std::vector<double> q(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) {
    const std::size_t p = at(static_cast<std::int64_t>(k));
    // The quotient in the input's precision, as the op defines it; then one rounding to integer.
    q[k] = quant::quantize(static_cast<double>(x[k] / static_cast<T>(scale[p])), zp[p], t);
  }
  out[0] = Tensor::from_f64(out[0].shape(), q, t);
}

// --- DequantizeLinear(x, x_scale, x_zero_point?) -> y ----------------------------------------------

std::vector<TensorDesc> infer_dequantize(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 3);
  if (in[0].dtype != DType::I32) quant::expect_quantized(op, in[0], "input x");
  expect_float(op, in[1], "x_scale");
  expect_param(op, in[0].shape, in[1], axis_of(op), "x_scale");
  if (has_input(op, 2)) {
    expect_same_dtype(op, in[0], in[2], "x and x_zero_point");
    if (in[2].shape != in[1].shape)
      fail(op, "x_zero_point {} must have x_scale's shape {}", shape_str(in[2].shape), shape_str(in[1].shape));
  }
  return {TensorDesc{in[1].dtype, in[0].shape, Format::ND}};
}

template <class T> void dequantize_ref(const Op& op, Ins in, Outs out) {
  const Tensor c = quant::centered(*in[0], has_input(op, 2) ? in[2] : nullptr, axis_of(op));
  auto x = c.data<double>();
  auto scale = cdata<T>(in[1]);
  const quant::ParamIndex at(in[0]->shape(), axis_of(op), static_cast<std::int64_t>(scale.size()));
  auto y = mdata<T>(out[0]);
  for (std::size_t k = 0; k < y.size(); ++k) y[k] = static_cast<T>(x[k]) * scale[at(static_cast<std::int64_t>(k))];
}

// --- DynamicQuantizeLinear(x) -> y (uint8), y_scale, y_zero_point (uint8) ---------------------------

std::vector<TensorDesc> infer_dynamic(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input x");
  return {TensorDesc{DType::U8, in[0].shape, Format::ND}, TensorDesc{in[0].dtype, {}, Format::ND},
          TensorDesc{DType::U8, {}, Format::ND}};
}

template <class T> void dynamic_ref(const Op&, Ins in, Outs out) {
  auto x = cdata<T>(in[0]);
  // The range always includes 0 (so that 0 is exact); NaNs do not take part in it.
  T lo = 0, hi = 0;
  for (T v : x) {
    lo = std::fmin(lo, v);
    hi = std::fmax(hi, v);
  }
  const T scale = (hi == lo ? T(1) : hi - lo) / T(255);
  const double zp = quant::saturate(static_cast<double>(T(0) - lo / scale), DType::U8);
  std::vector<double> q(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) q[k] = quant::quantize(static_cast<double>(x[k] / scale), zp, DType::U8);
  out[0] = Tensor::from_f64(out[0].shape(), q, DType::U8);
  mdata<T>(out[1])[0] = scale;
  mdata<std::uint8_t>(out[2])[0] = static_cast<std::uint8_t>(zp);
}

}  // namespace

void register_quantize_ops(OpRegistry& r) {
  const AttrSpec axis = attr_int("axis", 1, "axis of a per-axis scale and zero point (negative counts from the end)");
  OpDef q = quant::op_def("QuantizeLinear",
                      "y = saturate(round_half_even(x / y_scale) + y_zero_point) to int8 or uint8 (the zero "
                      "point's dtype; uint8 without one), per tensor or along axis (ONNX QuantizeLinear)",
                      {"x", "y_scale", "y_zero_point?"}, 2);
  q.attrs = {axis};
  q.infer = infer_quantize;
  q.reference = typed(quantize_ref<float>, quantize_ref<double>);
  r.add(std::move(q));

  OpDef dq = quant::op_def("DequantizeLinear",
                       "y = (x - x_zero_point) * x_scale for int8, uint8 or int32 x, per tensor or along axis (ONNX "
                       "DequantizeLinear)",
                       {"x", "x_scale", "x_zero_point?"}, 2);
  dq.attrs = {axis};
  dq.infer = infer_dequantize;
  dq.reference = typed(dequantize_ref<float>, dequantize_ref<double>);
  r.add(std::move(dq));

  OpDef dyn = quant::op_def("DynamicQuantizeLinear",
                        "uint8 quantization with scale = (max(x, 0) - min(x, 0)) / 255 and the zero point that "
                        "maps 0 exactly (ONNX DynamicQuantizeLinear)",
                        {"x"}, 1);
  dyn.num_outputs = 3;
  dyn.output_names = {"y", "y_scale", "y_zero_point"};
  dyn.infer = infer_dynamic;
  dyn.reference = typed(dynamic_ref<float>, dynamic_ref<double>);
  r.add(std::move(dyn));
}

}  // namespace probelab::graph::ops
