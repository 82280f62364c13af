// BatchNormalization (ONNX opset 15: inference with running statistics, or training_mode=1 with
// batch statistics and updated running statistics) and BatchNormalizationGrad.
#include <cmath>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

struct BnGeom {
  std::int64_t n, c, spatial;
  std::int64_t count() const { return n * spatial; }  // elements per channel
};

BnGeom bn_geom(const Op& op, const Shape& x) {
  if (x.size() < 2) fail(op, "input X must be [N, C, D...], got {}", shape_str(x));
  check_epsilon(op);
  return {x[0], x[1], prod(x, 2, x.size())};
}

bool training(const Op& op) { return AttrReader(op).i("training_mode") != 0; }

std::vector<TensorDesc> infer_bn(const Op& op, Descs in) {
  expect_inputs(op, in, 5, 5);
  expect_float(op, in[0], "input X");
  const BnGeom g = bn_geom(op, in[0].shape);
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (std::size_t i = 1; i < 5; ++i) expect_channel_param(op, in[0], in[i], g.c, names[i]);
  if (op.outputs.size() != 1 && op.outputs.size() != 3)
    fail(op, "has {} outputs, expected 1 (Y) or 3 (Y, running_mean, running_var)", op.outputs.size());
  if (op.outputs.size() == 3 && !training(op)) fail(op, "running_mean/running_var outputs need training_mode=1");
  std::vector<TensorDesc> out{in[0]};
  if (op.outputs.size() == 3) out.insert(out.end(), {in[3], in[4]});
  return out;
}

// Per-channel mean and population variance over N and the spatial dims (double).
template <class T>
void batch_stats(const BnGeom& g, const T* x, std::vector<double>& mean, std::vector<double>& var) {
  mean.assign(static_cast<std::size_t>(g.c), 0.0);
  var.assign(mean.size(), 0.0);
  for (std::int64_t c = 0; c < g.c; ++c) {
    double s = 0;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t i = 0; i < g.spatial; ++i) s += x[(n * g.c + c) * g.spatial + i];
    const double m = s / static_cast<double>(g.count());
    double v = 0;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t i = 0; i < g.spatial; ++i) {
        const double d = x[(n * g.c + c) * g.spatial + i] - m;
        v += d * d;
      }
    mean[static_cast<std::size_t>(c)] = m;
    var[static_cast<std::size_t>(c)] = v / static_cast<double>(g.count());
  }
}

// Statistics the op normalises with: batch statistics in training mode, else the inputs.
template <class T>
void norm_stats(const Op& op, const BnGeom& g, const T* x, const Tensor* mean_in, const Tensor* var_in,
                std::vector<double>& mean, std::vector<double>& var) {
  if (training(op)) {
    batch_stats(g, x, mean, var);
    return;
  }
  if (!mean_in || !var_in) fail(op, "inference mode needs input_mean and input_var");
  auto m = cdata<T>(mean_in), v = cdata<T>(var_in);
  mean.assign(m.begin(), m.end());
  var.assign(v.begin(), v.end());
}

template <class T> void bn_ref(const Op& op, Ins in, Outs out) {
  const BnGeom g = bn_geom(op, in[0]->shape());
  const AttrReader at(op);
  const double eps = at.f("epsilon");
  const T* x = cdata<T>(in[0]).data();
  auto scale = cdata<T>(in[1]), bias = cdata<T>(in[2]);
  std::vector<double> mean, var;
  norm_stats(op, g, x, in[3], in[4], mean, var);
  T* y = mdata<T>(out[0]).data();
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t c = 0; c < g.c; ++c) {
      const auto ci = static_cast<std::size_t>(c);
      const double a = scale[ci] / std::sqrt(var[ci] + eps);
      for (std::int64_t i = 0; i < g.spatial; ++i) {
        const std::int64_t k = (n * g.c + c) * g.spatial + i;
        y[k] = static_cast<T>((x[k] - mean[ci]) * a + bias[ci]);
      }
    }
  if (out.size() == 3) {
    const double mom = at.f("momentum");
    auto rm = mdata<T>(out[1]), rv = mdata<T>(out[2]);
    auto im = cdata<T>(in[3]), iv = cdata<T>(in[4]);
    for (std::size_t c = 0; c < mean.size(); ++c) {
      rm[c] = static_cast<T>(im[c] * mom + mean[c] * (1 - mom));
      rv[c] = static_cast<T>(iv[c] * mom + var[c] * (1 - mom));
    }
  }
}

// BatchNormalizationGrad(dY, X, scale, input_mean?, input_var?) -> dX, dScale, dB.
std::vector<TensorDesc> infer_bn_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 5);
  expect_float(op, in[0], "input dY");
  if (in[0].shape != in[1].shape)
    fail(op, "dY {} and X {} must have the same shape", shape_str(in[0].shape), shape_str(in[1].shape));
  const BnGeom g = bn_geom(op, in[1].shape);
  expect_channel_param(op, in[1], in[2], g.c, "scale");
  if (!training(op) && (!has_input(op, 3) || !has_input(op, 4)))
    fail(op, "inference mode needs input_mean and input_var");
  return {in[1], in[2], in[2]};
}

template <class T> void bn_grad_ref(const Op& op, Ins in, Outs out) {
  const BnGeom g = bn_geom(op, in[1]->shape());
  const double eps = AttrReader(op).f("epsilon");
  const T* dy = cdata<T>(in[0]).data();
  const T* x = cdata<T>(in[1]).data();
  auto scale = cdata<T>(in[2]);
  std::vector<double> mean, var;
  norm_stats(op, g, x, in.size() > 3 ? in[3] : nullptr, in.size() > 4 ? in[4] : nullptr, mean, var);
  T* dx = mdata<T>(out[0]).data();
  auto ds = mdata<T>(out[1]), db = mdata<T>(out[2]);
  const bool train = training(op);
  const double m = static_cast<double>(g.count());
  for (std::int64_t c = 0; c < g.c; ++c) {
    const auto ci = static_cast<std::size_t>(c);
    const double rstd = 1.0 / std::sqrt(var[ci] + eps);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t i = 0; i < g.spatial; ++i) {
        const std::int64_t k = (n * g.c + c) * g.spatial + i;
        sum_dy += dy[k];
        sum_dy_xhat += dy[k] * (x[k] - mean[ci]) * rstd;
      }
    ds[ci] = static_cast<T>(sum_dy_xhat);
    db[ci] = static_cast<T>(sum_dy);
    const double a = scale[ci] * rstd;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t i = 0; i < g.spatial; ++i) {
        const std::int64_t k = (n * g.c + c) * g.spatial + i;
        const double xhat = (x[k] - mean[ci]) * rstd;
        dx[k] = static_cast<T>(train ? a * (dy[k] - sum_dy / m - xhat * sum_dy_xhat / m) : a * dy[k]);
      }
  }
}

void bn_grad(GradBuilder& b, const Op& op) {
  for (std::size_t i = 1; i < op.outputs.size(); ++i)
    if (!b.dy(op, i).empty()) fail(op, "the running statistics outputs are not differentiable");
  const char* what[] = {"dx", "dscale", "dbias"};
  std::vector<std::string> outs;
  for (std::size_t i = 0; i < 3; ++i) outs.push_back(b.needs(op, i) ? b.dx(op, i) : GradBuilder::temp(op, what[i]));
  const bool train = training(op);
  std::vector<std::string> ins{b.dy(op), op.inputs[0], op.inputs[1]};
  if (!train) ins.insert(ins.end(), {op.inputs[3], op.inputs[4]});
  const AttrReader at(op);
  b.emit(op, "", "BatchNormalizationGrad", std::move(ins), std::move(outs),
         {{"epsilon", at.f("epsilon")}, {"training_mode", at.i("training_mode")}});
}

}  // namespace

void register_batch_norm_ops(OpRegistry& r) {
  OpDef bn;
  bn.type = "BatchNormalization";
  bn.aliases = {"BatchNorm"};
  bn.doc = "per-channel (X - mean) / sqrt(var + epsilon) * scale + B (ONNX BatchNormalization)";
  bn.min_inputs = bn.max_inputs = 5;
  bn.num_outputs = -1;
  bn.min_outputs = 1;
  bn.max_outputs = 3;
  bn.attrs = {attr_float("epsilon", 1e-5, "added to the variance"),
              attr_float("momentum", 0.9, "running = running * momentum + batch * (1 - momentum)"),
              attr_int("training_mode", 0, "1: normalise with batch statistics and output running statistics")};
  bn.input_names = {"X", "scale", "B", "input_mean", "input_var"};
  bn.output_names = {"Y", "running_mean?", "running_var?"};
  bn.infer = infer_bn;
  bn.reference = typed(bn_ref<float>, bn_ref<double>);
  bn.reference_overwrites = true;  // bn_ref: every Y element; the running statistics of every channel
  bn.gradient = bn_grad;
  r.add(std::move(bn));

  OpDef g;
  g.type = "BatchNormalizationGrad";
  g.doc = "dX, dScale, dB of BatchNormalization (batch statistics recomputed in training mode)";
  g.min_inputs = 3;
  g.max_inputs = 5;
  g.num_outputs = 3;
  g.attrs = {attr_float("epsilon", 1e-5, "added to the variance"),
             attr_int("training_mode", 0, "1: the forward op used batch statistics")};
  g.input_names = {"dY", "X", "scale", "input_mean?", "input_var?"};
  g.output_names = {"dX", "dScale", "dB"};
  g.backward = true;
  g.infer = infer_bn_grad;
  g.reference = typed(bn_grad_ref<float>, bn_grad_ref<double>);
  r.add(std::move(g));
}

}  // namespace probelab::graph::ops
