// LRN, local response normalization across channels (ONNX; AlexNet- and GoogLeNet-era exports):
// y = x / (bias + alpha / size * S)^beta, S the sum of squares of x over the channels
// [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] clipped to [0, C); and LRNGrad.
#include <cmath>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"
#include "graph/ops/pair_def.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

struct LrnGeom {
  std::int64_t n, c, inner, lo, hi;
  double alpha, beta, bias;
};

LrnGeom lrn_geom(const Op& op, const Shape& x) {
  if (x.size() < 3) fail(op, "input X must be [N, C, D...] with at least one spatial dimension, got {}", shape_str(x));
  const AttrReader a(op);
  const std::int64_t size = a.i("size");
  if (size < 1) fail(op, "size must be >= 1, got {}", size);
  return {x[0], x[1], prod(x, 2, x.size()), (size - 1) / 2, size / 2, a.f("alpha") / static_cast<double>(size),
          a.f("beta"), a.f("bias")};
}

std::vector<TensorDesc> infer_lrn(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  lrn_geom(op, in[0].shape);
  return {with_shape(in[0], in[0].shape)};
}

// s[k] = bias + alpha / size * (sum of squares over channel k's window), for every element k.
template <class T> std::vector<T> lrn_scale(const LrnGeom& g, std::span<const T> x) {
  std::vector<T> s(x.size());
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t c = 0; c < g.c; ++c)
      for (std::int64_t i = 0; i < g.inner; ++i) {
        T sum = 0;
        for (std::int64_t j = std::max<std::int64_t>(0, c - g.lo); j <= std::min(g.c - 1, c + g.hi); ++j) {
          const T v = x[static_cast<std::size_t>((n * g.c + j) * g.inner + i)];
          sum += v * v;
        }
        s[static_cast<std::size_t>((n * g.c + c) * g.inner + i)] = static_cast<T>(g.bias) + static_cast<T>(g.alpha) * sum;
      }
  return s;
}

template <class T> void lrn_ref(const Op& op, Ins in, Outs out) {
  const LrnGeom g = lrn_geom(op, in[0]->shape());
  auto x = cdata<T>(in[0]);
  const std::vector<T> s = lrn_scale(g, x);
  auto y = mdata<T>(out[0]);
  for (std::size_t k = 0; k < y.size(); ++k) y[k] = x[k] / num::pow(s[k], static_cast<T>(g.beta));
}

// LRNGrad(dY, X) -> dX: dX_j = dY_j s_j^-beta - 2 beta alpha / size x_j * sum over the channels c
// whose window holds j of dY_c x_c s_c^(-beta - 1).
std::vector<TensorDesc> infer_lrn_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  if (in[0].shape != in[1].shape) fail(op, "dY {} must have X's shape {}", shape_str(in[0].shape), shape_str(in[1].shape));
  lrn_geom(op, in[1].shape);
  return {with_shape(in[0], in[0].shape)};
}

template <class T> void lrn_grad_ref(const Op& op, Ins in, Outs out) {
  const LrnGeom g = lrn_geom(op, in[1]->shape());
  auto dy = cdata<T>(in[0]);
  auto x = cdata<T>(in[1]);
  const std::vector<T> s = lrn_scale(g, x);
  std::vector<T> t(x.size());  // dY_c x_c s_c^(-beta - 1)
  for (std::size_t k = 0; k < t.size(); ++k) t[k] = dy[k] * x[k] * num::pow(s[k], static_cast<T>(-g.beta - 1));
  auto dx = mdata<T>(out[0]);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t j = 0; j < g.c; ++j)
      for (std::int64_t i = 0; i < g.inner; ++i) {
        const auto k = static_cast<std::size_t>((n * g.c + j) * g.inner + i);
        T sum = 0;  // channel c's window [c - lo, c + hi] holds j for c in [j - hi, j + lo]
        for (std::int64_t c = std::max<std::int64_t>(0, j - g.hi); c <= std::min(g.c - 1, j + g.lo); ++c)
          sum += t[static_cast<std::size_t>((n * g.c + c) * g.inner + i)];
        dx[k] = dy[k] * num::pow(s[k], static_cast<T>(-g.beta)) - static_cast<T>(2 * g.beta * g.alpha) * x[k] * sum;
      }
}

void lrn_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "LRNGrad", {b.dy(op), op.inputs[0]}, {b.dx(op, 0)}, op.attrs);
}

std::vector<AttrSpec> lrn_attrs() {
  return {attr_nodefault("size", true, "channels in the window"), attr_float("alpha", 1e-4, "scale of the sum"),
          attr_float("beta", 0.75, "exponent"), attr_float("bias", 1.0, "added before the power")};
}

}  // namespace

void register_lrn_ops(OpRegistry& r) {
  OpDef d = pair_def("LRN", "local response normalization across channels (ONNX LRN)", lrn_attrs(), false);
  d.infer = infer_lrn;
  d.reference = typed(lrn_ref<float>, lrn_ref<double>);
  d.gradient = lrn_grad;
  r.add(std::move(d));

  OpDef g = pair_def("LRNGrad", "dX of LRN", lrn_attrs(), true);
  g.infer = infer_lrn_grad;
  g.reference = typed(lrn_grad_ref<float>, lrn_grad_ref<double>);
  r.add(std::move(g));
}

}  // namespace probelab::graph::ops
