// MeanVarianceNormalization (ONNX: Y = (X - mean) / (sqrt(var) + 1e-9), mean and the biased
// variance over `axes`, default [0, 2, 3]) and MeanVarianceNormalizationGrad.
#include <cmath>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"
#include "graph/ops/pair_def.h"

namespace probelab::graph::ops {
namespace {

constexpr double kEpsilon = 1e-9;  // the ONNX function body adds it to the standard deviation

// Each element's group (its index with the reduced axes dropped) and the group size.
struct MvnGeom {
  std::vector<std::int64_t> group;
  std::int64_t groups = 1, count = 1;
};

MvnGeom mvn_geom(const Op& op, const Shape& x) {
  const auto rank = static_cast<std::int64_t>(x.size());
  std::vector<bool> reduced(x.size(), false);
  for (const std::int64_t a : AttrReader(op).ints("axes")) {
    const auto k = static_cast<std::size_t>(norm_axis(op, a, rank, "axes entry"));
    if (reduced[k]) fail(op, "axes names dimension {} twice", k);
    reduced[k] = true;
  }
  MvnGeom g;
  for (std::size_t d = 0; d < x.size(); ++d) (reduced[d] ? g.count : g.groups) *= x[d];
  g.group.resize(static_cast<std::size_t>(numel(x)));
  std::vector<std::int64_t> idx(x.size(), 0);
  for (std::size_t k = 0; k < g.group.size(); ++k) {
    std::int64_t grp = 0;
    for (std::size_t d = 0; d < x.size(); ++d)
      if (!reduced[d]) grp = grp * x[d] + idx[d];
    g.group[k] = grp;
    for (std::size_t d = x.size(); d-- > 0;) {
      if (++idx[d] < x[d]) break;
      idx[d] = 0;
    }
  }
  return g;
}

// Per group: mean and sqrt(var) (biased variance, two passes in double).
template <class T> std::pair<std::vector<double>, std::vector<double>> mvn_stats(const MvnGeom& g, std::span<const T> x) {
  std::vector<double> mean(static_cast<std::size_t>(g.groups), 0.0), sd(mean.size(), 0.0);
  const auto n = static_cast<double>(g.count);
  for (std::size_t k = 0; k < x.size(); ++k) mean[static_cast<std::size_t>(g.group[k])] += x[k];
  for (double& m : mean) m /= n;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double c = x[k] - mean[static_cast<std::size_t>(g.group[k])];
    sd[static_cast<std::size_t>(g.group[k])] += c * c;
  }
  for (double& s : sd) s = std::sqrt(s / n);
  return {mean, sd};
}

std::vector<TensorDesc> infer_mvn(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  mvn_geom(op, in[0].shape);
  return {in[0]};
}

template <class T> void mvn_ref(const Op& op, Ins in, Outs out) {
  const MvnGeom g = mvn_geom(op, in[0]->shape());
  auto x = cdata<T>(in[0]);
  const auto [mean, sd] = mvn_stats(g, x);
  auto y = mdata<T>(out[0]);
  for (std::size_t k = 0; k < y.size(); ++k) {
    const auto j = static_cast<std::size_t>(g.group[k]);
    y[k] = static_cast<T>((x[k] - mean[j]) / (sd[j] + kEpsilon));
  }
}

std::vector<TensorDesc> infer_mvn_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  if (in[0].shape != in[1].shape) fail(op, "dY {} must have X's shape {}", shape_str(in[0].shape), shape_str(in[1].shape));
  mvn_geom(op, in[1].shape);
  return {in[1]};
}

// c = x - mean, sd = sqrt(mean(c^2)), s = sd + eps, y = c / s:
// dX = (dY - mean(dY)) / s - c sum(dY c) / (s^2 n sd) per group (the second term 0 where sd is 0).
template <class T> void mvn_grad_ref(const Op& op, Ins in, Outs out) {
  const MvnGeom g = mvn_geom(op, in[1]->shape());
  auto dy = cdata<T>(in[0]);
  auto x = cdata<T>(in[1]);
  const auto [mean, sd] = mvn_stats(g, x);
  std::vector<double> dy_mean(mean.size(), 0.0), dot(mean.size(), 0.0);
  const auto n = static_cast<double>(g.count);
  for (std::size_t k = 0; k < x.size(); ++k) {
    const auto j = static_cast<std::size_t>(g.group[k]);
    dy_mean[j] += dy[k] / n;
    dot[j] += static_cast<double>(dy[k]) * (x[k] - mean[j]);
  }
  auto dx = mdata<T>(out[0]);
  for (std::size_t k = 0; k < x.size(); ++k) {
    const auto j = static_cast<std::size_t>(g.group[k]);
    const double s = sd[j] + kEpsilon;
    const double spread = sd[j] > 0 ? (x[k] - mean[j]) * dot[j] / (s * s * n * sd[j]) : 0.0;
    dx[k] = static_cast<T>((dy[k] - dy_mean[j]) / s - spread);
  }
}

void mvn_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "MeanVarianceNormalizationGrad", {b.dy(op), op.inputs[0]}, {b.dx(op, 0)}, op.attrs);
}

std::vector<AttrSpec> mvn_attrs() {
  return {attr_ints("axes", {0, 2, 3}, "dimensions the mean and variance are taken over")};
}

}  // namespace

void register_mvn_ops(OpRegistry& r) {
  OpDef d = pair_def("MeanVarianceNormalization",
                     "(X - mean) / (sqrt(var) + 1e-9) over `axes` (default [0, 2, 3]; ONNX MeanVarianceNormalization)",
                     mvn_attrs(), false);
  d.infer = infer_mvn;
  d.reference = typed(mvn_ref<float>, mvn_ref<double>);
  d.gradient = mvn_grad;
  r.add(std::move(d));

  OpDef g = pair_def("MeanVarianceNormalizationGrad", "dX of MeanVarianceNormalization", mvn_attrs(), true);
  g.infer = infer_mvn_grad;
  g.reference = typed(mvn_grad_ref<float>, mvn_grad_ref<double>);
  r.add(std::move(g));
}

}  // namespace probelab::graph::ops
