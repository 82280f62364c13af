// Pointwise activations (Relu, Gelu, Sigmoid, Tanh) and their backward ops.
#include <cmath>
#include <numbers>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

std::vector<TensorDesc> infer_unary(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  return {in[0]};
}

// Backward ops take (dY, S) with S = X or Y of the forward op; both have the gradient's shape.
std::vector<TensorDesc> infer_unary_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  expect_same_dtype(op, in[0], in[1], "inputs dY and the saved tensor");
  if (in[0].shape != in[1].shape)
    fail(op, "dY {} and the saved tensor {} must have the same shape", shape_str(in[0].shape), shape_str(in[1].shape));
  return {in[0]};
}

template <class T, class F>
void map1(Ins in, Outs out, F f) {
  auto x = cdata<T>(in[0]);
  auto y = mdata<T>(out[0]);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = f(x[i]);
}

template <class T, class F>
void map2(Ins in, Outs out, F f) {
  auto a = cdata<T>(in[0]), s = cdata<T>(in[1]);
  auto y = mdata<T>(out[0]);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = f(a[i], s[i]);
}

bool gelu_tanh(const Op& op) {
  const std::string a = AttrReader(op).s("approximate");
  if (a != "none" && a != "tanh") fail(op, "attribute 'approximate' must be \"none\" or \"tanh\", got \"{}\"", a);
  return a == "tanh";
}

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

template <class T> void relu_ref(const Op&, Ins in, Outs out) {
  map1<T>(in, out, [](T x) { return x < T(0) ? T(0) : x; });  // NaN propagates
}
template <class T> void relu_grad_ref(const Op&, Ins in, Outs out) {
  map2<T>(in, out, [](T dy, T x) { return x <= T(0) ? T(0) : dy; });
}

template <class T> void gelu_ref(const Op& op, Ins in, Outs out) {
  if (gelu_tanh(op))
    map1<T>(in, out, [](T x) {
      const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
      return T(0.5) * x * (T(1) + num::tanh(u));
    });
  else
    map1<T>(in, out, [](T x) { return T(0.5) * x * (T(1) + num::erf(x * T(std::numbers::sqrt2 / 2))); });
}
template <class T> void gelu_grad_ref(const Op& op, Ins in, Outs out) {
  if (gelu_tanh(op))
    map2<T>(in, out, [](T dy, T x) {
      const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
      const T t = num::tanh(u);
      const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
      return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
    });
  else
    map2<T>(in, out, [](T dy, T x) {
      const T cdf = T(0.5) * (T(1) + num::erf(x * T(std::numbers::sqrt2 / 2)));
      const T pdf = num::exp(T(-0.5) * x * x) * T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
      return dy * (cdf + x * pdf);
    });
}

template <class T> void sigmoid_ref(const Op&, Ins in, Outs out) {
  // Both branches avoid overflow of exp for large |x|.
  map1<T>(in, out, [](T x) {
    if (x >= T(0)) return T(1) / (T(1) + num::exp(-x));
    const T e = num::exp(x);
    return e / (T(1) + e);
  });
}
template <class T> void sigmoid_grad_ref(const Op&, Ins in, Outs out) {
  map2<T>(in, out, [](T dy, T y) { return dy * y * (T(1) - y); });
}

template <class T> void tanh_ref(const Op&, Ins in, Outs out) {
  map1<T>(in, out, [](T x) { return num::tanh(x); });
}
template <class T> void tanh_grad_ref(const Op&, Ins in, Outs out) {
  map2<T>(in, out, [](T dy, T y) { return dy * (T(1) - y * y); });
}

// Gradient builders: `saved_output` selects Y (sigmoid, tanh) instead of X as the saved tensor.
auto unary_grad(std::string grad_type, bool saved_output, bool pass_attrs = false) {
  return [grad_type, saved_output, pass_attrs](GradBuilder& b, const Op& op) {
    if (!b.needs(op, 0)) return;
    Attrs attrs = pass_attrs ? op.attrs : Attrs{};
    b.emit(op, "", grad_type, {b.dy(op), saved_output ? op.outputs[0] : op.inputs[0]}, {b.dx(op, 0)},
           std::move(attrs));
  };
}

OpDef unary_def(std::string type, std::string doc, decltype(OpDef::reference) ref) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.input_names = {"X"};
  d.output_names = {"Y"};
  d.infer = infer_unary;
  d.reference = std::move(ref);
  d.reference_overwrites = true;  // map1: y[i] for every i
  return d;
}

OpDef grad_def(std::string type, std::string doc, std::string saved, decltype(OpDef::reference) ref) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.min_inputs = d.max_inputs = 2;
  d.input_names = {"dY", std::move(saved)};
  d.output_names = {"dX"};
  d.backward = true;
  d.infer = infer_unary_grad;
  d.reference = std::move(ref);
  d.reference_overwrites = true;  // map2: dx[i] for every i
  return d;
}

AttrSpec approximate_attr() { return attr_str("approximate", "none", "\"none\" (erf form) or \"tanh\""); }

}  // namespace

void register_activation_ops(OpRegistry& r) {
  OpDef relu = unary_def("Relu", "Y = max(X, 0)", typed(relu_ref<float>, relu_ref<double>));
  relu.aliases = {"ReLU"};
  relu.gradient = unary_grad("ReluGrad", false);
  r.add(std::move(relu));
  r.add(grad_def("ReluGrad", "dX = dY where X > 0, else 0", "X", typed(relu_grad_ref<float>, relu_grad_ref<double>)));

  OpDef gelu = unary_def("Gelu", "Y = X * Phi(X) (ONNX Gelu, erf form or tanh approximation)",
                         typed(gelu_ref<float>, gelu_ref<double>));
  gelu.aliases = {"GELU"};
  gelu.attrs = {approximate_attr()};
  gelu.gradient = unary_grad("GeluGrad", false, true);
  r.add(std::move(gelu));
  OpDef gg = grad_def("GeluGrad", "dX = dY * Gelu'(X)", "X", typed(gelu_grad_ref<float>, gelu_grad_ref<double>));
  gg.attrs = {approximate_attr()};
  r.add(std::move(gg));

  OpDef sig = unary_def("Sigmoid", "Y = 1 / (1 + exp(-X))", typed(sigmoid_ref<float>, sigmoid_ref<double>));
  sig.gradient = unary_grad("SigmoidGrad", true);
  r.add(std::move(sig));
  r.add(grad_def("SigmoidGrad", "dX = dY * Y * (1 - Y)", "Y", typed(sigmoid_grad_ref<float>, sigmoid_grad_ref<double>)));

  OpDef tanh = unary_def("Tanh", "Y = tanh(X)", typed(tanh_ref<float>, tanh_ref<double>));
  tanh.gradient = unary_grad("TanhGrad", true);
  r.add(std::move(tanh));
  r.add(grad_def("TanhGrad", "dX = dY * (1 - Y^2)", "Y", typed(tanh_grad_ref<float>, tanh_grad_ref<double>)));
}

}  // namespace probelab::graph::ops
