// Softmax and LogSoftmax along one axis (ONNX opset >= 13 semantics) and their backward ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

struct AxisSplit {
  std::int64_t outer, n, inner;
};

AxisSplit split(const Op& op, const Shape& s) {
  const auto r = static_cast<std::int64_t>(s.size());
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), r));
  return {prod(s, 0, axis), s.empty() ? 1 : s[axis], prod(s, axis + 1, s.size())};
}

std::vector<TensorDesc> infer_softmax(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input");
  split(op, in[0].shape);  // validates the axis
  return {in[0]};
}

std::vector<TensorDesc> infer_softmax_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  if (in[0].shape != in[1].shape)
    fail(op, "dY {} and Y {} must have the same shape", shape_str(in[0].shape), shape_str(in[1].shape));
  split(op, in[0].shape);
  return {in[0]};
}

// Calls f(base, stride) for every vector along the axis.
template <class F>
void for_each_row(const AxisSplit& s, F f) {
  for (std::int64_t o = 0; o < s.outer; ++o)
    for (std::int64_t i = 0; i < s.inner; ++i) f(o * s.n * s.inner + i, s.inner);
}

template <class T, bool Log>
void softmax_ref(const Op& op, Ins in, Outs out) {
  const AxisSplit s = split(op, in[0]->shape());
  auto x = cdata<T>(in[0]);
  auto y = mdata<T>(out[0]);
  for_each_row(s, [&](std::int64_t base, std::int64_t st) {
    T mx = -std::numeric_limits<T>::infinity();
    for (std::int64_t k = 0; k < s.n; ++k) mx = std::max(mx, x[base + k * st]);
    double sum = 0;
    for (std::int64_t k = 0; k < s.n; ++k) sum += num::exp(static_cast<double>(x[base + k * st] - mx));
    if constexpr (Log) {
      const double lse = num::log(sum);
      for (std::int64_t k = 0; k < s.n; ++k) y[base + k * st] = static_cast<T>(x[base + k * st] - mx - lse);
    } else {
      for (std::int64_t k = 0; k < s.n; ++k)
        y[base + k * st] = static_cast<T>(num::exp(static_cast<double>(x[base + k * st] - mx)) / sum);
    }
  });
}

// Softmax: dX = Y * (dY - sum(dY * Y)).  LogSoftmax: dX = dY - exp(Y) * sum(dY).
template <class T, bool Log>
void softmax_grad_ref(const Op& op, Ins in, Outs out) {
  const AxisSplit s = split(op, in[0]->shape());
  auto dy = cdata<T>(in[0]), y = cdata<T>(in[1]);
  auto dx = mdata<T>(out[0]);
  for_each_row(s, [&](std::int64_t base, std::int64_t st) {
    double dot = 0;
    for (std::int64_t k = 0; k < s.n; ++k) {
      const std::int64_t j = base + k * st;
      dot += Log ? static_cast<double>(dy[j]) : static_cast<double>(dy[j]) * y[j];
    }
    for (std::int64_t k = 0; k < s.n; ++k) {
      const std::int64_t j = base + k * st;
      dx[j] = Log ? static_cast<T>(dy[j] - num::exp(static_cast<double>(y[j])) * dot)
                  : static_cast<T>(y[j] * (dy[j] - dot));
    }
  });
}

auto softmax_grad(std::string type) {
  return [type](GradBuilder& b, const Op& op) {
    if (!b.needs(op, 0)) return;
    b.emit(op, "", type, {b.dy(op), op.outputs[0]}, {b.dx(op, 0)}, {{"axis", AttrReader(op).i("axis")}});
  };
}

AttrSpec axis_attr() { return attr_int("axis", -1, "axis along which to normalise (negative counts from the end)"); }

OpDef softmax_def(std::string type, std::string doc, decltype(OpDef::reference) ref, std::string grad_type) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.attrs = {axis_attr()};
  d.input_names = {"input"};
  d.output_names = {"output"};
  d.infer = infer_softmax;
  d.reference = std::move(ref);
  d.reference_overwrites = true;  // every element of every row
  d.gradient = softmax_grad(std::move(grad_type));
  return d;
}

OpDef grad_def(std::string type, std::string doc, decltype(OpDef::reference) ref) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {axis_attr()};
  d.input_names = {"dY", "Y"};
  d.output_names = {"dX"};
  d.backward = true;
  d.infer = infer_softmax_grad;
  d.reference = std::move(ref);
  d.reference_overwrites = true;  // every element of every row
  return d;
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  r.add(softmax_def("Softmax", "exp(x) / sum(exp(x)) along `axis` (ONNX opset 13)",
                    typed(softmax_ref<float, false>, softmax_ref<double, false>), "SoftmaxGrad"));
  r.add(softmax_def("LogSoftmax", "x - log(sum(exp(x))) along `axis` (ONNX opset 13)",
                    typed(softmax_ref<float, true>, softmax_ref<double, true>), "LogSoftmaxGrad"));
  r.add(grad_def("SoftmaxGrad", "dX = Y * (dY - sum(dY * Y)) along `axis`",
                 typed(softmax_grad_ref<float, false>, softmax_grad_ref<double, false>)));
  r.add(grad_def("LogSoftmaxGrad", "dX = dY - exp(Y) * sum(dY) along `axis`",
                 typed(softmax_grad_ref<float, true>, softmax_grad_ref<double, true>)));
}

}  // namespace probelab::graph::ops
