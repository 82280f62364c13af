// Elementwise arithmetic with numpy broadcasting (Add, Sub, Mul, Div), Identity, Scale, and the
// broadcast helpers Expand / SumToShape used by gradients.
#include <functional>
#include <type_traits>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

// --- shape inference ---------------------------------------------------------------------------

std::vector<TensorDesc> infer_binary(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  if (!is_float(in[0].dtype) && !is_integer(in[0].dtype))
    fail(op, "input A must be a float or integer tensor, got {}", dtype_name(in[0].dtype));
  expect_same_dtype(op, in[0], in[1], "inputs A and B");
  Shape s = broadcast_shapes(op, in[0].shape, in[1].shape);
  const Format f = s == in[0].shape ? in[0].format : Format::ND;
  return {TensorDesc{in[0].dtype, std::move(s), f}};
}

std::vector<TensorDesc> infer_unary(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  return {in[0]};
}

std::vector<TensorDesc> infer_identity(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  return {in[0]};
}

std::vector<TensorDesc> infer_expand(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  return {with_shape(in[0], broadcast_shapes(op, in[0].shape, op.attr_ints("shape")))};
}

std::vector<TensorDesc> infer_sum_to_shape(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  Shape target = op.attr_ints("shape");
  if (!broadcastable_to(target, in[0].shape))
    fail(op, "target shape {} does not broadcast to the input shape {}", shape_str(target), shape_str(in[0].shape));
  return {TensorDesc{in[0].dtype, std::move(target), Format::ND}};
}

// --- kernels -------------------------------------------------------------------------------------

template <class T, class F>
void binary(Ins in, Outs out, F f) {
  auto a = cdata<T>(in[0]), b = cdata<T>(in[1]);
  auto y = mdata<T>(out[0]);
  if (in[0]->shape() == in[1]->shape()) {
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<T>(f(a[i], b[i]));
    return;
  }
  // Narrow integers promote to int in f; the result wraps modulo 2^8 as ONNX's uint8 / int8 do.
  for_each_broadcast(out[0].shape(), in[0]->shape(), in[1]->shape(),
                     [&](std::int64_t oa, std::int64_t ob, std::int64_t k) { y[k] = static_cast<T>(f(a[oa], b[ob])); });
}

// Integer division truncates toward zero (C semantics); a zero divisor is an error.
struct Divide {
  const Op* op;
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      if (b == 0) fail(*op, "integer division by zero");
    return a / b;
  }
};

// Reference kernel of a binary op for float tensors (in the reference precision) and int32/int64.
template <class F>
auto binary_ref(F f) {
  return [f](const Op& op, Ins in, Outs out, RefPrecision p) {
    F fn = f;
    if constexpr (std::is_same_v<F, Divide>) fn.op = &op;
    switch (in[0]->dtype()) {
      case DType::I64: binary<std::int64_t>(in, out, fn); break;
      case DType::I32: binary<std::int32_t>(in, out, fn); break;
      case DType::I8: binary<std::int8_t>(in, out, fn); break;
      case DType::U8: binary<std::uint8_t>(in, out, fn); break;
      default:
        if (p == RefPrecision::F32) binary<float>(in, out, fn);
        else binary<double>(in, out, fn);
    }
  };
}

void copy_ref(const Op&, Ins in, Outs out, RefPrecision) {
  auto src = in[0]->bytes();
  std::copy(src.begin(), src.end(), out[0].bytes().begin());
}

template <class T> void scale_ref(const Op& op, Ins in, Outs out) {
  const T alpha = static_cast<T>(AttrReader(op).f("alpha"));
  auto x = cdata<T>(in[0]);
  auto y = mdata<T>(out[0]);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = alpha * x[i];
}

void expand_ref(const Op&, Ins in, Outs out, RefPrecision) {
  const std::size_t es = dtype_size(in[0]->dtype());
  auto x = in[0]->bytes();
  auto y = out[0].bytes();
  const Shape& os = out[0].shape();
  for_each_broadcast(os, in[0]->shape(), os, [&](std::int64_t ox, std::int64_t, std::int64_t k) {
    std::copy_n(x.begin() + ox * static_cast<std::int64_t>(es), es, y.begin() + k * static_cast<std::int64_t>(es));
  });
}

template <class T> void sum_to_shape_ref(const Op&, Ins in, Outs out) {
  auto x = cdata<T>(in[0]);
  auto y = mdata<T>(out[0]);
  std::vector<double> acc(y.size(), 0.0);
  const Shape& xs = in[0]->shape();
  for_each_broadcast(xs, xs, out[0].shape(),
                     [&](std::int64_t ox, std::int64_t oy, std::int64_t) { acc[static_cast<std::size_t>(oy)] += x[ox]; });
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<T>(acc[i]);
}

// --- gradients -----------------------------------------------------------------------------------

Shape out_shape(GradBuilder& b, const Op& op) { return b.desc(op.outputs[0]).shape; }

void add_grad(GradBuilder& b, const Op& op) {
  const std::string dy = b.dy(op);
  const Shape s = out_shape(b, op);
  if (b.needs(op, 0)) b.reduce_to_input(op, 0, dy, s, "a");
  if (b.needs(op, 1)) b.reduce_to_input(op, 1, dy, s, "b");
}

void sub_grad(GradBuilder& b, const Op& op) {
  const std::string dy = b.dy(op);
  const Shape s = out_shape(b, op);
  if (b.needs(op, 0)) b.reduce_to_input(op, 0, dy, s, "a");
  if (b.needs(op, 1)) b.emit_to_input(op, 1, s, "b", "Scale", {dy}, {{"alpha", -1.0}});
}

void mul_grad(GradBuilder& b, const Op& op) {
  const std::string dy = b.dy(op);
  const Shape s = out_shape(b, op);
  if (b.needs(op, 0)) b.emit_to_input(op, 0, s, "a", "Mul", {dy, op.inputs[1]});
  if (b.needs(op, 1)) b.emit_to_input(op, 1, s, "b", "Mul", {dy, op.inputs[0]});
}

void div_grad(GradBuilder& b, const Op& op) {
  const std::string dy = b.dy(op);
  const Shape s = out_shape(b, op);
  if (b.needs(op, 0)) b.emit_to_input(op, 0, s, "a", "Div", {dy, op.inputs[1]});
  if (b.needs(op, 1)) {  // d(a/b)/db = -(a/b)/b
    const std::string t1 = GradBuilder::temp(op, "dy_y"), t2 = GradBuilder::temp(op, "dy_y_b");
    b.emit(op, "dy_y", "Mul", {dy, op.outputs[0]}, {t1});
    b.emit(op, "dy_y_b", "Div", {t1, op.inputs[1]}, {t2});
    b.emit_to_input(op, 1, s, "b", "Scale", {t2}, {{"alpha", -1.0}});
  }
}

void identity_grad(GradBuilder& b, const Op& op) {
  if (b.needs(op, 0)) b.reduce_to_input(op, 0, b.dy(op), out_shape(b, op), "");
}

void scale_grad(GradBuilder& b, const Op& op) {
  if (b.needs(op, 0))
    b.emit(op, "", "Scale", {b.dy(op)}, {b.dx(op, 0)}, {{"alpha", AttrReader(op).f("alpha")}});
}

void expand_grad(GradBuilder& b, const Op& op) {
  if (b.needs(op, 0)) b.reduce_to_input(op, 0, b.dy(op), out_shape(b, op), "");
}

void sum_to_shape_grad(GradBuilder& b, const Op& op) {
  if (b.needs(op, 0))
    b.emit(op, "", "Expand", {b.dy(op)}, {b.dx(op, 0)}, {{"shape", b.desc(op.inputs[0]).shape}});
}

OpDef binary_def(std::string type, std::string doc, decltype(OpDef::reference) ref,
                 decltype(OpDef::gradient) grad) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.min_inputs = d.max_inputs = 2;
  d.input_names = {"A", "B"};
  d.output_names = {"C"};
  d.infer = infer_binary;
  d.reference = std::move(ref);
  d.reference_overwrites = true;  // binary(): y[k] for every k of the broadcast shape
  d.gradient = std::move(grad);
  return d;
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add(binary_def("Add", "C = A + B with numpy broadcasting", binary_ref(std::plus<>()), add_grad));
  r.add(binary_def("Sub", "C = A - B with numpy broadcasting", binary_ref(std::minus<>()), sub_grad));
  r.add(binary_def("Mul", "C = A * B with numpy broadcasting", binary_ref(std::multiplies<>()), mul_grad));
  r.add(binary_def("Div", "C = A / B with numpy broadcasting (integers: truncating)", binary_ref(Divide{nullptr}),
                   div_grad));

  OpDef id;
  id.type = "Identity";
  id.moves_elements = true;
  id.doc = "Y = X (a copy)";
  id.input_names = {"X"};
  id.output_names = {"Y"};
  id.infer = infer_identity;
  id.reference = copy_ref;
  id.gradient = identity_grad;
  r.add(std::move(id));

  OpDef scale;
  scale.type = "Scale";
  scale.doc = "Y = alpha * X";
  scale.attrs = {attr_float("alpha", 1.0, "scale factor")};
  scale.input_names = {"X"};
  scale.output_names = {"Y"};
  scale.infer = infer_unary;
  scale.reference = typed(scale_ref<float>, scale_ref<double>);
  scale.gradient = scale_grad;
  r.add(std::move(scale));

  OpDef expand;
  expand.type = "Expand";
  expand.moves_elements = true;
  expand.doc = "broadcasts X against `shape` (ONNX Expand; the shape input is an attribute)";
  expand.attrs = {attr_nodefault("shape", true, "shape to broadcast against (numpy rules)")};
  expand.input_names = {"input"};
  expand.output_names = {"output"};
  expand.infer = infer_expand;
  expand.reference = expand_ref;
  expand.gradient = expand_grad;
  r.add(std::move(expand));

  OpDef sts;
  sts.type = "SumToShape";
  sts.doc = "sums X over the dimensions along which `shape` was broadcast to X's shape";
  sts.attrs = {attr_nodefault("shape", true, "target shape; must broadcast to X's shape")};
  sts.input_names = {"X"};
  sts.output_names = {"Y"};
  sts.infer = infer_sum_to_shape;
  sts.reference = typed(sum_to_shape_ref<float>, sum_to_shape_ref<double>);
  sts.gradient = sum_to_shape_grad;
  r.add(std::move(sts));
}

}  // namespace probelab::graph::ops
