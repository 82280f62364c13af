// Integer matrix products of quantized models: MatMulInteger and ConvInteger (int8 / uint8
// operands minus their zero points, accumulated exactly in int32), QLinearMatMul and QLinearConv
// (the same accumulation, plus QLinearConv's int32 bias, requantized: y = saturate(round(acc *
// (scale_a * scale_b / scale_y)) + zero_point_y), the multiplier and the product in FP32 as
// ONNX Runtime's requantization computes them). Inference only.
#include "graph/ops/quantize.h"

namespace probelab::graph::ops {
namespace {

bool is_conv(const Op& op) { return op.type.find("Conv") != std::string::npos; }
bool is_qlinear(const Op& op) { return op.type.starts_with("QLinear"); }

// Input positions of the operands and their parameters.
struct Slots {
  std::size_t a, a_zp, b, b_zp;
  std::size_t a_scale = 0, b_scale = 0, y_scale = 0, y_zp = 0, bias = 0;
};
Slots slots(const Op& op) {
  if (!is_qlinear(op)) return {0, 2, 1, 3};
  return {0, 2, 3, 5, 1, 4, 6, 7, 8};
}

// Zero-point / scale axes: per row of A and per column of B; per output channel of W.
std::int64_t a_axis(const Op&) { return -2; }
std::int64_t b_axis(const Op& op) { return is_conv(op) ? 0 : -1; }

using quant::integer_float_op;

void check_param(const Op& op, Descs in, std::size_t i, const Shape& x, std::int64_t axis, const TensorDesc* like,
                 const char* what) {
  if (!has_input(op, i)) return;
  if (like) {
    expect_same_dtype(op, *like, in[i], what);
  } else {
    expect_float(op, in[i], what);
  }
  if (is_conv(op) && axis != 0 && numel(in[i].shape) != 1) fail(op, "{} must be a scalar (per tensor)", what);
  quant::expect_param(op, x, in[i], axis, what);
}

std::vector<TensorDesc> infer_integer(const Op& op, Descs in) {
  const Slots s = slots(op);
  if (is_qlinear(op)) expect_inputs(op, in, 8, is_conv(op) ? 9 : 8);
  else expect_inputs(op, in, 2, 4);
  quant::expect_quantized(op, in[s.a], is_conv(op) ? "input x" : "input A");
  quant::expect_quantized(op, in[s.b], is_conv(op) ? "weight w" : "input B");
  const Shape& a = in[s.a].shape;
  const Shape& b = in[s.b].shape;
  if (!is_conv(op) && a.size() < 2 && has_input(op, s.a_zp) && numel(in[s.a_zp].shape) != 1)
    fail(op, "a per-row zero point needs A of rank >= 2, got {}", shape_str(a));
  check_param(op, in, s.a_zp, a, is_conv(op) ? 1 : a_axis(op), &in[s.a], "the zero point of A / x");
  check_param(op, in, s.b_zp, b, b_axis(op), &in[s.b], "the zero point of B / w");
  const Op f = integer_float_op(op);
  const TensorDesc fa{DType::F32, a, Format::ND}, fb{DType::F32, b, Format::ND};
  const std::vector<TensorDesc> fin{fa, fb};
  Shape y = OpRegistry::instance().get(f.type).infer(f, fin).at(0).shape;
  if (!is_qlinear(op)) return {TensorDesc{DType::I32, std::move(y), Format::ND}};
  check_param(op, in, s.a_scale, a, is_conv(op) ? 1 : a_axis(op), nullptr, "the scale of A / x");
  if (numel(in[s.a_scale].shape) != 1) fail(op, "the scale of A / x must be a scalar (per tensor)");
  check_param(op, in, s.b_scale, b, b_axis(op), nullptr, "the scale of B / w");
  if (numel(in[s.y_scale].shape) != 1 || numel(in[s.y_zp].shape) != 1)
    fail(op, "y_scale and y_zero_point must be scalars (per tensor)");
  expect_float(op, in[s.y_scale], "y_scale");
  quant::expect_quantized(op, in[s.y_zp], "y_zero_point");
  if (is_conv(op) && has_input(op, s.bias)) {
    if (in[s.bias].dtype != DType::I32) fail(op, "bias B must be an int32 tensor, got {}", dtype_name(in[s.bias].dtype));
    if (in[s.bias].shape != Shape{b.at(0)}) fail(op, "bias B must have shape [{}], got {}", b.at(0), shape_str(in[s.bias].shape));
  }
  return {TensorDesc{in[s.y_zp].dtype, std::move(y), Format::ND}};
}

const Tensor* opt(const Op& op, Ins in, std::size_t i) { return has_input(op, i) ? in[i] : nullptr; }

void integer_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Slots s = slots(op);
  const Tensor a = quant::centered(*in[s.a], opt(op, in, s.a_zp), is_conv(op) ? 1 : a_axis(op));
  const Tensor b = quant::centered(*in[s.b], opt(op, in, s.b_zp), b_axis(op));
  const std::vector<const Tensor*> ptrs{&a, &b};
  // Sums of products of 9-bit integers: exact in FP64 up to 2^53, far beyond any int32 result.
  const Tensor exact = run_reference(integer_float_op(op), ptrs, RefPrecision::F64).at(0);
  auto acc = exact.data<double>();
  if (!is_qlinear(op)) {
    auto y = mdata<std::int32_t>(out[0]);
    for (std::size_t k = 0; k < y.size(); ++k) y[k] = static_cast<std::int32_t>(quant::wrap_i32(acc[k]));
    return;
  }
  const std::vector<double> sa = quant::values(in[s.a_scale]), sb = quant::values(in[s.b_scale]);
  const auto sy = static_cast<float>(quant::values(in[s.y_scale])[0]);
  const double zy = quant::values(in[s.y_zp])[0];
  const std::vector<double> bias = quant::values(is_conv(op) ? opt(op, in, s.bias) : nullptr);
  // Per output column of a MatMul, per output channel of a Conv.
  const Shape& ys = out[0].shape();
  const quant::ParamIndex col(ys, is_conv(op) ? 1 : -1, static_cast<std::int64_t>(std::max(sb.size(), bias.size())));
  std::vector<double> q(acc.size());
  for (std::size_t k = 0; k < q.size(); ++k) {
    const std::size_t c = col(static_cast<std::int64_t>(k));
    const double sum = quant::wrap_i32(acc[k] + bias[bias.size() == 1 ? 0 : c]);
    const float m = static_cast<float>(sa[0]) * static_cast<float>(sb[sb.size() == 1 ? 0 : c]) / sy;
    q[k] = quant::quantize(static_cast<double>(static_cast<float>(sum) * m), zy, out[0].dtype());
  }
  out[0] = Tensor::from_f64(ys, q, out[0].dtype());
}

OpDef integer_def(const OpRegistry& r, std::string type, std::string doc, std::vector<std::string> ins,
                  int min_inputs, bool conv) {
  OpDef d = quant::op_def(std::move(type), std::move(doc), std::move(ins), min_inputs);
  if (conv) d.attrs = r.get("Conv").attrs;  // registered before this family
  d.infer = infer_integer;
  d.reference = integer_ref;
  return d;
}

}  // namespace

namespace quant {

// The float op computes the accumulation's shape and values (on exact FP64 operands).
Op integer_float_op(const Op& op) {
  Op f = op;
  f.type = is_conv(op) ? "Conv" : "MatMul";
  f.inputs = {"a", "b"};
  if (!is_conv(op)) f.attrs.clear();
  return f;
}

IntegerOperands integer_operands(const Op& op) {
  const Slots s = slots(op);
  return {s.a, s.b};
}

}  // namespace quant

void register_integer_gemm_ops(OpRegistry& r) {
  r.add(integer_def(r, "MatMulInteger",
                    "int32 Y = (A - a_zero_point) @ (B - b_zero_point) for int8 / uint8 A and B, zero points per "
                    "tensor, per row of A or per column of B (ONNX MatMulInteger)",
                    {"A", "B", "a_zero_point?", "b_zero_point?"}, 2, false));
  r.add(integer_def(r, "ConvInteger",
                    "int32 y = Conv(x - x_zero_point, w - w_zero_point), w's zero point per tensor or per output "
                    "channel (ONNX ConvInteger)",
                    {"x", "w", "x_zero_point?", "w_zero_point?"}, 2, true));
  r.add(integer_def(r, "QLinearMatMul",
                    "MatMulInteger requantized: y = saturate(round(acc * a_scale * b_scale / y_scale) + y_zero_point) "
                    "(ONNX QLinearMatMul)",
                    {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"}, 8,
                    false));
  r.add(integer_def(r, "QLinearConv",
                    "ConvInteger plus an int32 bias, requantized: y = saturate(round((acc + B) * x_scale * w_scale / "
                    "y_scale) + y_zero_point), w's scale and zero point per tensor or per output channel (ONNX "
                    "QLinearConv)",
                    {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point", "B?"},
                    8, true));
}

}  // namespace probelab::graph::ops
