// InstanceNormalization (ONNX opset 6: each (image, channel) plane of X normalised by its own mean
// and biased variance, then scale[c] and B[c]) and InstanceNormalizationGrad.
#include <cmath>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

struct InGeom {
  std::int64_t n, c, plane;  // images, channels, elements per (image, channel)
};

InGeom in_geom(const Op& op, const Shape& x) {
  if (x.size() < 3) fail(op, "input X must be [N, C, D1, ...] with at least one spatial dim, got {}", shape_str(x));
  check_epsilon(op);
  return {x[0], x[1], prod(x, 2, x.size())};
}

std::vector<TensorDesc> infer_in(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 3);
  expect_outputs(op, 1, 1);
  expect_float(op, in[0], "input X");
  const InGeom g = in_geom(op, in[0].shape);
  expect_channel_param(op, in[0], in[1], g.c, "scale");
  expect_channel_param(op, in[0], in[2], g.c, "B");
  return {in[0]};
}

template <class T> void in_ref(const Op& op, Ins in, Outs out) {
  const InGeom g = in_geom(op, in[0]->shape());
  const double eps = AttrReader(op).f("epsilon");
  const auto scale = cdata<T>(in[1]), bias = cdata<T>(in[2]);
  const T* x = cdata<T>(in[0]).data();
  T* y = mdata<T>(out[0]).data();
  for (std::int64_t r = 0; r < g.n * g.c; ++r) {
    const std::int64_t c = r % g.c, at = r * g.plane;
    const auto [mean, rstd] = row_stats(x + at, g.plane, eps);
    for (std::int64_t j = 0; j < g.plane; ++j)
      y[at + j] = static_cast<T>((x[at + j] - mean) * rstd * scale[c] + bias[c]);
  }
}

// InstanceNormalizationGrad(dY, X, scale) -> dX, dscale, dB.
std::vector<TensorDesc> infer_in_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 3);
  expect_float(op, in[0], "input dY");
  if (in[0].shape != in[1].shape)
    fail(op, "dY {} and X {} must have the same shape", shape_str(in[0].shape), shape_str(in[1].shape));
  const InGeom g = in_geom(op, in[1].shape);
  expect_channel_param(op, in[1], in[2], g.c, "scale");
  return {in[1], in[2], in[2]};
}

template <class T> void in_grad_ref(const Op& op, Ins in, Outs out) {
  const InGeom g = in_geom(op, in[1]->shape());
  const double eps = AttrReader(op).f("epsilon");
  const auto scale = cdata<T>(in[2]);
  const T* dy = cdata<T>(in[0]).data();
  const T* x = cdata<T>(in[1]).data();
  T* dx = mdata<T>(out[0]).data();
  std::vector<double> dscale(static_cast<std::size_t>(g.c), 0.0), dbias(dscale.size(), 0.0);
  const double n = static_cast<double>(g.plane);
  for (std::int64_t r = 0; r < g.n * g.c; ++r) {
    const std::int64_t c = r % g.c, at = r * g.plane;
    const auto [mean, rstd] = row_stats(x + at, g.plane, eps);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t j = 0; j < g.plane; ++j) {
      sum_dy += dy[at + j];
      sum_dy_xhat += dy[at + j] * ((x[at + j] - mean) * rstd);
    }
    dscale[static_cast<std::size_t>(c)] += sum_dy_xhat;
    dbias[static_cast<std::size_t>(c)] += sum_dy;
    const double s = scale[c];
    for (std::int64_t j = 0; j < g.plane; ++j) {
      const double xhat = (x[at + j] - mean) * rstd;
      dx[at + j] = static_cast<T>(s * rstd * (dy[at + j] - sum_dy / n - xhat * sum_dy_xhat / n));
    }
  }
  auto ds = mdata<T>(out[1]);
  auto db = mdata<T>(out[2]);
  for (std::size_t c = 0; c < dscale.size(); ++c) {
    ds[c] = static_cast<T>(dscale[c]);
    db[c] = static_cast<T>(dbias[c]);
  }
}

void in_grad(GradBuilder& b, const Op& op) {
  const char* what[] = {"dx", "dscale", "dbias"};
  std::vector<std::string> outs;
  for (std::size_t i = 0; i < 3; ++i) outs.push_back(b.needs(op, i) ? b.dx(op, i) : GradBuilder::temp(op, what[i]));
  b.emit(op, "", "InstanceNormalizationGrad", {b.dy(op), op.inputs[0], op.inputs[1]}, outs,
         {{"epsilon", AttrReader(op).f("epsilon")}});
}

std::vector<AttrSpec> in_attrs() { return {attr_float("epsilon", 1e-5, "added to each plane's variance")}; }

}  // namespace

void register_instance_norm_ops(OpRegistry& r) {
  OpDef in;
  in.type = "InstanceNormalization";
  in.aliases = {"InstanceNorm"};
  in.doc = "per image and channel (X - mean) / sqrt(var + epsilon) * scale + B over the spatial dims (ONNX "
           "InstanceNormalization)";
  in.min_inputs = in.max_inputs = 3;
  in.num_outputs = 1;
  in.attrs = in_attrs();
  in.input_names = {"X", "scale", "B"};
  in.output_names = {"Y"};
  in.infer = infer_in;
  in.reference = typed(in_ref<float>, in_ref<double>);
  in.gradient = in_grad;
  r.add(std::move(in));

  OpDef g;
  g.type = "InstanceNormalizationGrad";
  g.doc = "dX, dscale, dB of InstanceNormalization (dscale/dB per channel)";
  g.min_inputs = g.max_inputs = 3;
  g.num_outputs = 3;
  g.attrs = in_attrs();
  g.input_names = {"dY", "X", "scale"};
  g.output_names = {"dX", "dscale", "dB"};
  g.backward = true;
  g.infer = infer_in_grad;
  g.reference = typed(in_grad_ref<float>, in_grad_ref<double>);
  r.add(std::move(g));
}

}  // namespace probelab::graph::ops
