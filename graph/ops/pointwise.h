// Private: elementwise ops with numpy broadcasting over any number of inputs, defined by a
// functor, and their gradients through one backward op, PointwiseGrad.
//
// A pointwise functor P describes one op type:
//   static constexpr Kind kind;             what dtypes it takes and gives (Kind below)
//   explicit P(const Op& op);               reads the op's attributes (AttrReader)
//   template <class T> T f(const T* x, int n) const;         the value from the n input values
//   template <class T> T d(int i, const T* x, int n, T y) const;   dY/dX_i at (x, y = f(x))
// `d` is optional: without it the op is inference only (autodiff reports it by name).
// An omitted optional input i reads P::absent<T>(i) when P declares it.
//
// PointwiseGrad(dY, Y, X0, X1, ...; of, wrt, <the forward op's attributes>) = dY * dF/dX_wrt in
// the broadcast output shape; the gradient builder reduces it to X_wrt's shape (SumToShape).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {

/// Input and output dtypes of a pointwise op.
enum class Kind {
  Float,      // float inputs (one dtype), float output
  Numeric,    // float or integer inputs (one dtype), output of that dtype
  Compare,    // numeric or bool inputs (one dtype), bool output
  Logic,      // bool inputs, bool output
  FloatTest,  // float inputs, bool output (IsNaN, IsInf)
};

/// Calls f(offsets, k) for every element k of the broadcast output shape `out`, with offsets[i]
/// the row-major element offset into input i of shape `ins[i]`.
template <class F>
void for_each_broadcast_n(const Shape& out, const std::vector<Shape>& ins, F&& f) {
  const std::size_t r = out.size(), n_in = ins.size();
  std::vector<std::vector<std::int64_t>> st(n_in);
  for (std::size_t i = 0; i < n_in; ++i) st[i] = broadcast_strides(ins[i], r);
  const std::int64_t n = numel(out);
  std::vector<std::int64_t> idx(r, 0), off(n_in, 0);
  for (std::int64_t k = 0; k < n; ++k) {
    f(off.data(), k);
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < out[d]) {
        for (std::size_t i = 0; i < n_in; ++i) off[i] += st[i][d];
        break;
      }
      for (std::size_t i = 0; i < n_in; ++i) off[i] -= st[i][d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
}

/// The broadcast shape of the present inputs (omitted optional inputs are skipped).
Shape broadcast_all(const Op& op, Descs in);

/// Values of tensor `t` (any dtype) as T, row-major.
template <class T> std::vector<T> values_as(const Tensor& t) {
  switch (t.dtype()) {
    case DType::F32: { auto d = t.data<float>(); return {d.begin(), d.end()}; }
    case DType::F64: { auto d = t.data<double>(); return {d.begin(), d.end()}; }
    case DType::I64: { auto d = t.data<std::int64_t>(); return {d.begin(), d.end()}; }
    case DType::I32: { auto d = t.data<std::int32_t>(); return {d.begin(), d.end()}; }
    case DType::Bool:
    case DType::U8: { auto d = t.data<std::uint8_t>(); return {d.begin(), d.end()}; }
    case DType::I8: { auto d = t.data<std::int8_t>(); return {d.begin(), d.end()}; }
    default: {
      const std::vector<double> v = t.to_f64();
      return {v.begin(), v.end()};
    }
  }
}

template <class P>
concept Differentiable = requires(const P& p, const float* x, int n, float y) { p.d(0, x, n, y); };
template <class P>
concept HasAbsent = requires { P::template absent<float>(0); };
/// P::unary(x, n): y = f(X0) for the other inputs fixed at x[1..n) (single elements), with what
/// depends only on them worked out once; the same values as f.
template <class P>
concept HasUnary = requires(const P& p, const float* x, int n) { p.template unary<float>(x, n)(0.0f); };

namespace detail {

/// The elements of `t` when they are stored as T already (read in place), else null.
template <class T> const T* stored_as(const Tensor& t) {
  const DType d = t.dtype();
  if constexpr (std::is_same_v<T, float>) return d == DType::F32 ? t.data<float>().data() : nullptr;
  else if constexpr (std::is_same_v<T, double>) return d == DType::F64 ? t.data<double>().data() : nullptr;
  else if constexpr (std::is_same_v<T, std::int64_t>) return d == DType::I64 ? t.data<std::int64_t>().data() : nullptr;
  else if constexpr (std::is_same_v<T, std::int32_t>) return d == DType::I32 ? t.data<std::int32_t>().data() : nullptr;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return d == DType::Bool || d == DType::U8 ? t.data<std::uint8_t>().data() : nullptr;
  else if constexpr (std::is_same_v<T, std::int8_t>) return d == DType::I8 ? t.data<std::int8_t>().data() : nullptr;
  else return nullptr;
}

/// Elementwise forward kernel: inputs converted to T (read in place when stored as T),
/// outputs of type TO.
template <class P, class T, class TO>
void pointwise_kernel(const Op& op, Ins in, Outs out) {
  const P p(op);
  const int n = static_cast<int>(in.size());
  std::vector<std::vector<T>> store(in.size());
  std::vector<const T*> ptr(in.size());
  std::vector<Shape> shapes(in.size());
  // Inputs of the output's shape step by 1, single elements by 0; anything else broadcasts.
  std::vector<std::size_t> step(in.size());
  bool simple = true;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!in[i]) {
      if constexpr (HasAbsent<P>) store[i] = {P::template absent<T>(static_cast<int>(i))};
      else fail(op, "input {} is required", i);
      shapes[i] = {};
      ptr[i] = store[i].data();
    } else {
      shapes[i] = in[i]->shape();
      ptr[i] = stored_as<T>(*in[i]);
      if (!ptr[i]) {
        store[i] = values_as<T>(*in[i]);
        ptr[i] = store[i].data();
      }
    }
    const bool full = shapes[i] == out[0].shape();
    step[i] = full ? 1 : 0;
    simple = simple && (full || numel(shapes[i]) == 1);
  }
  auto y = mdata<TO>(out[0]);
  std::vector<T> x(in.size());
  if (simple) {
    // Single elements are read once; only the full-shape inputs change from element to element.
    std::vector<std::size_t> varying;
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (step[i] != 0) varying.push_back(i);
      else x[i] = ptr[i][0];
    }
    if constexpr (HasUnary<P>) {
      if (varying.size() == 1 && varying[0] == 0) {
        const auto g = p.template unary<T>(x.data(), n);
        const T* x0 = ptr[0];
        for (std::size_t k = 0; k < y.size(); ++k) y[k] = static_cast<TO>(g(x0[k]));
        return;
      }
    }
    if (varying.size() == 1) {
      const std::size_t v = varying[0];
      for (std::size_t k = 0; k < y.size(); ++k) {
        x[v] = ptr[v][k];
        y[k] = static_cast<TO>(p.template f<T>(x.data(), n));
      }
      return;
    }
    for (std::size_t k = 0; k < y.size(); ++k) {
      for (const std::size_t i : varying) x[i] = ptr[i][k];
      y[k] = static_cast<TO>(p.template f<T>(x.data(), n));
    }
    return;
  }
  for_each_broadcast_n(out[0].shape(), shapes, [&](const std::int64_t* off, std::int64_t k) {
    for (std::size_t i = 0; i < in.size(); ++i) x[i] = ptr[i][off[i]];
    y[static_cast<std::size_t>(k)] = static_cast<TO>(p.template f<T>(x.data(), n));
  });
}

/// PointwiseGrad kernel of P: inputs dY, Y, X0.. (converted to T), output dX_wrt in dY's shape.
template <class P, class T>
void pointwise_grad_kernel(const Op& fwd, int wrt, Ins in, Outs out) {
  const P p(fwd);
  const std::size_t n_x = in.size() - 2;
  const int n = static_cast<int>(n_x);
  std::vector<std::vector<T>> store(in.size());
  std::vector<Shape> shapes(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!in[i]) {
      if constexpr (HasAbsent<P>) store[i] = {P::template absent<T>(static_cast<int>(i) - 2)};
      shapes[i] = {};
    } else {
      store[i] = values_as<T>(*in[i]);
      shapes[i] = in[i]->shape();
    }
  }
  auto dx = mdata<T>(out[0]);
  std::vector<T> x(n_x);
  for_each_broadcast_n(out[0].shape(), shapes, [&](const std::int64_t* off, std::int64_t k) {
    for (std::size_t i = 0; i < n_x; ++i) x[i] = store[i + 2][off[i + 2]];
    const T dy = store[0][off[0]], y = store[1][off[1]];
    dx[static_cast<std::size_t>(k)] = dy * p.template d<T>(wrt, x.data(), n, y);
  });
}

using GradKernel = void (*)(const Op& fwd, int wrt, Ins in, Outs out, RefPrecision p);
/// Registers the PointwiseGrad kernel of a forward op type.
void add_pointwise_grad_kernel(const std::string& type, GradKernel k);
/// Attribute names of the forward ops with a PointwiseGrad kernel (PointwiseGrad accepts them).
void add_pointwise_grad_attrs(const std::vector<AttrSpec>& attrs);

template <class P>
void grad_entry(const Op& fwd, int wrt, Ins in, Outs out, RefPrecision prec) {
  if (prec == RefPrecision::F32) pointwise_grad_kernel<P, float>(fwd, wrt, in, out);
  else pointwise_grad_kernel<P, double>(fwd, wrt, in, out);
}

std::vector<TensorDesc> infer_pointwise(const Op& op, Descs in, Kind kind);
void pointwise_gradient(GradBuilder& b, const Op& op);

}  // namespace detail

/// The OpDef of pointwise op type `type` with functor P: 1 to `max_inputs` inputs (-1: variadic),
/// the given input names and attribute specs; a gradient when P is Differentiable.
template <class P>
OpDef pointwise_def(std::string type, std::string doc, std::vector<std::string> input_names, int min_inputs,
                    int max_inputs, std::vector<AttrSpec> attrs = {}) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.input_names = std::move(input_names);
  d.output_names = {"Y"};
  d.attrs = std::move(attrs);
  d.infer = [](const Op& op, Descs in) { return detail::infer_pointwise(op, in, P::kind); };
  d.reference_overwrites = true;  // pointwise_kernel writes y[k] for every k of the output
  d.reference = [](const Op& op, Ins in, Outs out, RefPrecision prec) {
    const DType t = in[0]->dtype();
    if constexpr (P::kind == Kind::Logic) {
      detail::pointwise_kernel<P, std::uint8_t, std::uint8_t>(op, in, out);
    } else if constexpr (P::kind == Kind::Compare) {
      if (t == DType::I64) detail::pointwise_kernel<P, std::int64_t, std::uint8_t>(op, in, out);
      else if (t == DType::I32) detail::pointwise_kernel<P, std::int32_t, std::uint8_t>(op, in, out);
      else if (t == DType::I8) detail::pointwise_kernel<P, std::int8_t, std::uint8_t>(op, in, out);
      else if (t == DType::Bool || t == DType::U8) detail::pointwise_kernel<P, std::uint8_t, std::uint8_t>(op, in, out);
      else if (prec == RefPrecision::F32) detail::pointwise_kernel<P, float, std::uint8_t>(op, in, out);
      else detail::pointwise_kernel<P, double, std::uint8_t>(op, in, out);
    } else if constexpr (P::kind == Kind::FloatTest) {
      if (prec == RefPrecision::F32) detail::pointwise_kernel<P, float, std::uint8_t>(op, in, out);
      else detail::pointwise_kernel<P, double, std::uint8_t>(op, in, out);
    } else {
      if constexpr (P::kind == Kind::Numeric) {
        if (t == DType::I64) return detail::pointwise_kernel<P, std::int64_t, std::int64_t>(op, in, out);
        if (t == DType::I32) return detail::pointwise_kernel<P, std::int32_t, std::int32_t>(op, in, out);
        if (t == DType::I8) return detail::pointwise_kernel<P, std::int8_t, std::int8_t>(op, in, out);
        if (t == DType::U8) return detail::pointwise_kernel<P, std::uint8_t, std::uint8_t>(op, in, out);
      }
      if (prec == RefPrecision::F32) detail::pointwise_kernel<P, float, float>(op, in, out);
      else detail::pointwise_kernel<P, double, double>(op, in, out);
    }
  };
  if constexpr (Differentiable<P>) {
    detail::add_pointwise_grad_kernel(d.type, &detail::grad_entry<P>);
    detail::add_pointwise_grad_attrs(d.attrs);
    d.gradient = detail::pointwise_gradient;
  }
  return d;
}

/// Registers PointwiseGrad (after every pointwise family has registered its ops).
void register_pointwise_grad_op(OpRegistry& r);

}  // namespace probelab::graph::ops
