// Lp norms (ONNX semantics): LpNormalization (X / ||X||_p along `axis`, p 1 or 2; a zero norm
// gives NaN as 0 / 0, as ONNX's reference), GlobalLpPool ((sum |X|^p)^(1/p) over the spatial
// dimensions of [N, C, D...], kept as size 1) and their backward ops LpNormalizationGrad and
// GlobalLpPoolGrad.
#include <cmath>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"
#include "graph/ops/pair_def.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

// X viewed as [outer, n, inner], the norm taken over n.
struct LineGeom {
  std::int64_t outer, n, inner;
  double p;
};

LineGeom lp_geom(const Op& op, const Shape& x) {
  if (x.empty()) fail(op, "input X must have rank >= 1");
  const AttrReader a(op);
  const std::int64_t p = a.i("p");
  if (p != 1 && p != 2) fail(op, "p must be 1 or 2, got {}", p);
  const auto axis = static_cast<std::size_t>(norm_axis(op, a.i("axis"), static_cast<std::int64_t>(x.size())));
  return {prod(x, 0, axis), x[axis], prod(x, axis + 1, x.size()), static_cast<double>(p)};
}

LineGeom pool_geom(const Op& op, const Shape& x) {
  if (x.size() < 3) fail(op, "input X must be [N, C, D1...], got {}", shape_str(x));
  const std::int64_t p = AttrReader(op).i("p");
  if (p < 1) fail(op, "p must be >= 1, got {}", p);
  return {x[0] * x[1], prod(x, 2, x.size()), 1, static_cast<double>(p)};
}

// ||x||_p of the line starting at x with `stride`.
template <class T> double line_norm(const T* x, const LineGeom& g) {
  double s = 0;
  for (std::int64_t k = 0; k < g.n; ++k) s += num::pow(std::fabs(static_cast<double>(x[k * g.inner])), g.p);
  return g.p == 1 ? s : g.p == 2 ? std::sqrt(s) : num::pow(s, 1 / g.p);
}

std::vector<TensorDesc> infer_lp(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  lp_geom(op, in[0].shape);
  return {in[0]};
}

template <class T> void lp_ref(const Op& op, Ins in, Outs out) {
  const LineGeom g = lp_geom(op, in[0]->shape());
  const T* x = cdata<T>(in[0]).data();
  T* y = mdata<T>(out[0]).data();
  for (std::int64_t o = 0; o < g.outer; ++o)
    for (std::int64_t i = 0; i < g.inner; ++i) {
      const std::int64_t base = o * g.n * g.inner + i;
      const double norm = line_norm(x + base, g);
      for (std::int64_t k = 0; k < g.n; ++k)
        y[base + k * g.inner] = static_cast<T>(static_cast<double>(x[base + k * g.inner]) / norm);
    }
}

std::vector<TensorDesc> infer_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  return {in[1]};
}

std::vector<TensorDesc> infer_lp_grad(const Op& op, Descs in) {
  lp_geom(op, in[1].shape);
  if (in[0].shape != in[1].shape) fail(op, "dY {} must have X's shape {}", shape_str(in[0].shape), shape_str(in[1].shape));
  return infer_grad(op, in);
}

// y = x / n: p = 2: dX = (dY - y sum(dY y)) / n; p = 1: dX = dY / n - sign(x) sum(dY x) / n^2.
template <class T> void lp_grad_ref(const Op& op, Ins in, Outs out) {
  const LineGeom g = lp_geom(op, in[1]->shape());
  const T* dy = cdata<T>(in[0]).data();
  const T* x = cdata<T>(in[1]).data();
  T* dx = mdata<T>(out[0]).data();
  for (std::int64_t o = 0; o < g.outer; ++o)
    for (std::int64_t i = 0; i < g.inner; ++i) {
      const std::int64_t base = o * g.n * g.inner + i;
      const double n = line_norm(x + base, g);
      double dot = 0;  // sum(dY x)
      for (std::int64_t k = 0; k < g.n; ++k) dot += static_cast<double>(dy[base + k * g.inner]) * x[base + k * g.inner];
      for (std::int64_t k = 0; k < g.n; ++k) {
        const double xv = x[base + k * g.inner], d = dy[base + k * g.inner];
        const double dn = g.p == 1 ? (xv > 0) - (xv < 0) : xv / n;  // d||x|| / dx_k
        dx[base + k * g.inner] = static_cast<T>(d / n - dn * dot / (n * n));
      }
    }
}

void lp_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "LpNormalizationGrad", {b.dy(op), op.inputs[0]}, {b.dx(op, 0)}, op.attrs);
}

std::vector<TensorDesc> infer_pool(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  pool_geom(op, in[0].shape);
  Shape s = in[0].shape;
  std::fill(s.begin() + 2, s.end(), 1);
  return {with_shape(in[0], s)};
}

template <class T> void pool_ref(const Op& op, Ins in, Outs out) {
  const LineGeom g = pool_geom(op, in[0]->shape());
  const T* x = cdata<T>(in[0]).data();
  auto y = mdata<T>(out[0]);
  for (std::int64_t o = 0; o < g.outer; ++o) y[static_cast<std::size_t>(o)] = static_cast<T>(line_norm(x + o * g.n, g));
}

std::vector<TensorDesc> infer_pool_grad(const Op& op, Descs in) {
  const LineGeom g = pool_geom(op, in[1].shape);
  if (numel(in[0].shape) != g.outer || in[0].shape.size() != in[1].shape.size())
    fail(op, "dY {} must be X's shape {} with the spatial dimensions 1", shape_str(in[0].shape), shape_str(in[1].shape));
  return infer_grad(op, in);
}

// y = (sum |x|^p)^(1/p): dX = dY sign(x) |x|^(p-1) / y^(p-1) (0 where y is 0).
template <class T> void pool_grad_ref(const Op& op, Ins in, Outs out) {
  const LineGeom g = pool_geom(op, in[1]->shape());
  auto dy = cdata<T>(in[0]);
  const T* x = cdata<T>(in[1]).data();
  T* dx = mdata<T>(out[0]).data();
  for (std::int64_t o = 0; o < g.outer; ++o) {
    const double y = line_norm(x + o * g.n, g);
    for (std::int64_t k = 0; k < g.n; ++k) {
      const double xv = x[o * g.n + k];
      const double d = y == 0 ? 0 : ((xv > 0) - (xv < 0)) * num::pow(std::fabs(xv) / y, g.p - 1);
      dx[o * g.n + k] = static_cast<T>(static_cast<double>(dy[static_cast<std::size_t>(o)]) * d);
    }
  }
}

void pool_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "GlobalLpPoolGrad", {b.dy(op), op.inputs[0]}, {b.dx(op, 0)}, op.attrs);
}

std::vector<AttrSpec> lp_attrs() {
  return {attr_int("axis", -1, "the dimension normalised"), attr_int("p", 2, "the norm's order: 1 or 2")};
}

std::vector<AttrSpec> pool_attrs() { return {attr_int("p", 2, "the norm's order (>= 1)")}; }

}  // namespace

void register_lp_norm_ops(OpRegistry& r) {
  OpDef lp =
      pair_def("LpNormalization", "X / ||X||_p along `axis`, p 1 or 2 (ONNX LpNormalization)", lp_attrs(), false);
  lp.infer = infer_lp;
  lp.reference = typed(lp_ref<float>, lp_ref<double>);
  lp.gradient = lp_grad;
  r.add(std::move(lp));

  OpDef lpg = pair_def("LpNormalizationGrad", "dX of LpNormalization", lp_attrs(), true);
  lpg.infer = infer_lp_grad;
  lpg.reference = typed(lp_grad_ref<float>, lp_grad_ref<double>);
  r.add(std::move(lpg));

  OpDef gp = pair_def("GlobalLpPool",
                    "(sum |X|^p)^(1/p) over all spatial dimensions of [N, C, D...], keeping them as size 1 (ONNX "
                    "GlobalLpPool)",
                    pool_attrs(), false);
  gp.infer = infer_pool;
  gp.reference = typed(pool_ref<float>, pool_ref<double>);
  gp.gradient = pool_grad;
  r.add(std::move(gp));

  OpDef gpg = pair_def("GlobalLpPoolGrad", "dX of GlobalLpPool", pool_attrs(), true);
  gpg.infer = infer_pool_grad;
  gpg.reference = typed(pool_grad_ref<float>, pool_grad_ref<double>);
  r.add(std::move(gpg));
}

}  // namespace probelab::graph::ops
