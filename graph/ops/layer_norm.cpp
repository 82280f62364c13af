// LayerNormalization (ONNX opset 17: normalise over dims [axis, rank), scale, optional bias,
// optional Mean / InvStdDev outputs) and LayerNormalizationGrad.
#include <cmath>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

struct LnGeom {
  std::size_t axis;
  std::int64_t outer, inner;
  Shape norm;  // X.shape[axis:]
};

LnGeom ln_geom(const Op& op, const Shape& x) {
  if (x.empty()) fail(op, "input X must have rank >= 1");
  check_epsilon(op);
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(x.size())));
  return {axis, prod(x, 0, axis), prod(x, axis, x.size()), Shape(x.begin() + static_cast<std::ptrdiff_t>(axis), x.end())};
}

void expect_param(const Op& op, const TensorDesc& x, const TensorDesc& p, const Shape& norm, const char* what) {
  expect_same_dtype(op, x, p, what);
  if (!broadcastable_to(p.shape, norm))
    fail(op, "{} has shape {}, expected one broadcastable to the normalised shape {}", what, shape_str(p.shape),
         shape_str(norm));
}

Shape stat_shape(const Shape& x, std::size_t axis) {
  Shape s = x;
  std::fill(s.begin() + static_cast<std::ptrdiff_t>(axis), s.end(), 1);
  return s;
}

std::vector<TensorDesc> infer_ln(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 3);
  expect_outputs(op, 1, 3);
  expect_float(op, in[0], "input X");
  const LnGeom g = ln_geom(op, in[0].shape);
  expect_param(op, in[0], in[1], g.norm, "Scale");
  if (has_input(op, 2)) expect_param(op, in[0], in[2], g.norm, "B");
  std::vector<TensorDesc> out{in[0]};
  for (std::size_t i = 1; i < op.outputs.size(); ++i)
    out.push_back(TensorDesc{in[0].dtype, stat_shape(in[0].shape, g.axis), Format::ND});
  return out;
}

// A parameter broadcast to the normalised shape, flattened.
template <class T>
std::vector<T> expand_param(const Tensor* p, const Shape& norm, T fill) {
  std::vector<T> v(static_cast<std::size_t>(numel(norm)), fill);
  if (!p) return v;
  auto src = cdata<T>(p);
  for_each_broadcast(norm, p->shape(), norm, [&](std::int64_t op, std::int64_t, std::int64_t k) { v[k] = src[op]; });
  return v;
}

template <class T> void ln_ref(const Op& op, Ins in, Outs out) {
  const LnGeom g = ln_geom(op, in[0]->shape());
  const double eps = AttrReader(op).f("epsilon");
  const std::vector<T> scale = expand_param<T>(in[1], g.norm, T(1));
  const std::vector<T> bias = expand_param<T>(in.size() > 2 ? in[2] : nullptr, g.norm, T(0));
  const T* x = cdata<T>(in[0]).data();
  T* y = mdata<T>(out[0]).data();
  for (std::int64_t o = 0; o < g.outer; ++o) {
    const auto [mean, rstd] = row_stats(x + o * g.inner, g.inner, eps);
    for (std::int64_t j = 0; j < g.inner; ++j)
      y[o * g.inner + j] = static_cast<T>((x[o * g.inner + j] - mean) * rstd * scale[j] + bias[j]);
    if (out.size() > 1) mdata<T>(out[1])[o] = static_cast<T>(mean);
    if (out.size() > 2) mdata<T>(out[2])[o] = static_cast<T>(rstd);
  }
}

// LayerNormalizationGrad(dY, X, Scale) -> dX, dScale, dB; dScale and dB have the normalised shape.
std::vector<TensorDesc> infer_ln_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 3);
  expect_float(op, in[0], "input dY");
  if (in[0].shape != in[1].shape)
    fail(op, "dY {} and X {} must have the same shape", shape_str(in[0].shape), shape_str(in[1].shape));
  const LnGeom g = ln_geom(op, in[1].shape);
  expect_param(op, in[1], in[2], g.norm, "Scale");
  const TensorDesc p{in[0].dtype, g.norm, Format::ND};
  return {in[1], p, p};
}

template <class T> void ln_grad_ref(const Op& op, Ins in, Outs out) {
  const LnGeom g = ln_geom(op, in[1]->shape());
  const double eps = AttrReader(op).f("epsilon");
  const std::vector<T> scale = expand_param<T>(in[2], g.norm, T(1));
  const T* dy = cdata<T>(in[0]).data();
  const T* x = cdata<T>(in[1]).data();
  T* dx = mdata<T>(out[0]).data();
  std::vector<double> dscale(static_cast<std::size_t>(g.inner), 0.0), dbias(dscale.size(), 0.0);
  std::vector<double> xhat(dscale.size());
  const double n = static_cast<double>(g.inner);
  for (std::int64_t o = 0; o < g.outer; ++o) {
    const T* xr = x + o * g.inner;
    const T* dyr = dy + o * g.inner;
    const auto [mean, rstd] = row_stats(xr, g.inner, eps);
    double sum_g = 0, sum_gx = 0;
    for (std::int64_t j = 0; j < g.inner; ++j) {
      xhat[j] = (xr[j] - mean) * rstd;
      const double gj = static_cast<double>(dyr[j]) * scale[j];
      sum_g += gj;
      sum_gx += gj * xhat[j];
      dscale[j] += static_cast<double>(dyr[j]) * xhat[j];
      dbias[j] += dyr[j];
    }
    for (std::int64_t j = 0; j < g.inner; ++j) {
      const double gj = static_cast<double>(dyr[j]) * scale[j];
      dx[o * g.inner + j] = static_cast<T>(rstd * (gj - sum_g / n - xhat[j] * sum_gx / n));
    }
  }
  auto ds = mdata<T>(out[1]);
  auto db = mdata<T>(out[2]);
  for (std::size_t j = 0; j < dscale.size(); ++j) {
    ds[j] = static_cast<T>(dscale[j]);
    db[j] = static_cast<T>(dbias[j]);
  }
}

void ln_grad(GradBuilder& b, const Op& op) {
  for (std::size_t i = 1; i < op.outputs.size(); ++i)
    if (!b.dy(op, i).empty()) fail(op, "gradients through the Mean/InvStdDev outputs are not supported");
  const LnGeom g = ln_geom(op, b.desc(op.inputs[0]).shape);
  // Each parameter gradient goes straight to its contribution when the parameter has the
  // normalised shape, else through a SumToShape.
  std::vector<std::string> outs{b.needs(op, 0) ? b.dx(op, 0) : GradBuilder::temp(op, "dx")};
  std::vector<std::pair<std::size_t, std::string>> reduce;
  for (std::size_t i = 1; i <= 2; ++i) {
    const std::string what = i == 1 ? "dscale" : "dbias";
    if (!has_input(op, i) || !b.needs(op, i)) {
      outs.push_back(GradBuilder::temp(op, what));
    } else if (b.desc(op.inputs[i]).shape == g.norm) {
      outs.push_back(b.dx(op, i));
    } else {
      outs.push_back(GradBuilder::temp(op, what));
      reduce.emplace_back(i, outs.back());
    }
  }
  b.emit(op, "", "LayerNormalizationGrad", {b.dy(op), op.inputs[0], op.inputs[1]}, outs,
         {{"axis", AttrReader(op).i("axis")}, {"epsilon", AttrReader(op).f("epsilon")}});
  for (const auto& [i, t] : reduce) b.reduce_to_input(op, i, t, g.norm, i == 1 ? "scale" : "bias");
}

std::vector<AttrSpec> ln_attrs() {
  return {attr_int("axis", -1, "first normalised dimension; dims [axis, rank) are normalised"),
          attr_float("epsilon", 1e-5, "added to the variance")};
}

}  // namespace

void register_layer_norm_ops(OpRegistry& r) {
  OpDef ln;
  ln.type = "LayerNormalization";
  ln.aliases = {"LayerNorm"};
  ln.doc = "(X - mean) / sqrt(var + epsilon) * Scale + B over dims [axis, rank) (ONNX LayerNormalization)";
  ln.min_inputs = 2;
  ln.max_inputs = 3;
  ln.num_outputs = -1;
  ln.min_outputs = 1;
  ln.max_outputs = 3;
  ln.attrs = ln_attrs();
  ln.attrs.push_back(attr_int("stash_type", 1, "precision of Mean/InvStdDev (1 = float; computed in double here)"));
  ln.input_names = {"X", "Scale", "B?"};
  ln.output_names = {"Y", "Mean?", "InvStdDev?"};
  ln.infer = infer_ln;
  ln.reference = typed(ln_ref<float>, ln_ref<double>);
  ln.gradient = ln_grad;
  r.add(std::move(ln));

  OpDef g;
  g.type = "LayerNormalizationGrad";
  g.doc = "dX, dScale, dB of LayerNormalization (dScale/dB over the normalised shape)";
  g.min_inputs = g.max_inputs = 3;
  g.num_outputs = 3;
  g.attrs = ln_attrs();
  g.input_names = {"dY", "X", "Scale"};
  g.output_names = {"dX", "dScale", "dB"};
  g.backward = true;
  g.infer = infer_ln_grad;
  g.reference = typed(ln_grad_ref<float>, ln_grad_ref<double>);
  r.add(std::move(g));
}

}  // namespace probelab::graph::ops
