// Optimizer update ops (PyTorch semantics): SgdUpdate with momentum and weight decay, AdamUpdate
// with bias correction at step `step`.
#include <cmath>

#include "graph/ops/op_util.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

void expect_like(const Op& op, Descs in) {
  expect_float(op, in[0], "param");
  const char* names[] = {"param", "grad", "state 1", "state 2"};
  for (std::size_t i = 1; i < in.size(); ++i) {
    if (!has_input(op, i)) continue;
    expect_same_dtype(op, in[0], in[i], names[i]);
    if (in[i].shape != in[0].shape)
      fail(op, "{} has shape {}, expected the param shape {}", names[i], shape_str(in[i].shape), shape_str(in[0].shape));
  }
}

// SgdUpdate(param, grad, velocity?) -> new param, new velocity (iff velocity is given).
std::vector<TensorDesc> infer_sgd(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 3);
  expect_like(op, in);
  const bool vel = has_input(op, 2);
  expect_outputs(op, vel ? 2 : 1, vel ? 2 : 1);
  if (!vel && AttrReader(op).f("momentum") != 0.0) fail(op, "momentum {} needs a velocity input", AttrReader(op).f("momentum"));
  std::vector<TensorDesc> out{in[0]};
  if (vel) out.push_back(in[0]);
  return out;
}

template <class T> void sgd_ref(const Op& op, Ins in, Outs out) {
  const AttrReader at(op);
  const double lr = at.f("lr"), mom = at.f("momentum"), wd = at.f("weight_decay");
  auto p = cdata<T>(in[0]), g = cdata<T>(in[1]);
  auto np = mdata<T>(out[0]);
  const bool vel = in.size() > 2 && in[2];
  for (std::size_t i = 0; i < p.size(); ++i) {
    double step = static_cast<double>(g[i]) + wd * p[i];
    if (vel) {
      step = mom * cdata<T>(in[2])[i] + step;
      mdata<T>(out[1])[i] = static_cast<T>(step);
    }
    np[i] = static_cast<T>(p[i] - lr * step);
  }
}

// AdamUpdate(param, grad, m, v) -> new param, new m, new v.
std::vector<TensorDesc> infer_adam(const Op& op, Descs in) {
  expect_inputs(op, in, 4, 4);
  expect_outputs(op, 3, 3);
  expect_like(op, in);
  if (AttrReader(op).i("step") < 1) fail(op, "attribute 'step' must be >= 1, got {}", AttrReader(op).i("step"));
  return {in[0], in[0], in[0]};
}

template <class T> void adam_ref(const Op& op, Ins in, Outs out) {
  const AttrReader at(op);
  const double lr = at.f("lr"), b1 = at.f("beta1"), b2 = at.f("beta2"), eps = at.f("eps"), wd = at.f("weight_decay");
  const double t = static_cast<double>(at.i("step"));
  const double c1 = 1.0 - num::pow(b1, t), c2 = 1.0 - num::pow(b2, t);
  auto p = cdata<T>(in[0]), g = cdata<T>(in[1]), m = cdata<T>(in[2]), v = cdata<T>(in[3]);
  auto np = mdata<T>(out[0]), nm = mdata<T>(out[1]), nv = mdata<T>(out[2]);
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double gi = static_cast<double>(g[i]) + wd * p[i];
    const double mi = b1 * m[i] + (1 - b1) * gi;
    const double vi = b2 * v[i] + (1 - b2) * gi * gi;
    nm[i] = static_cast<T>(mi);
    nv[i] = static_cast<T>(vi);
    np[i] = static_cast<T>(p[i] - lr * (mi / c1) / (std::sqrt(vi / c2) + eps));
  }
}

}  // namespace

void register_optimizer_ops(OpRegistry& r) {
  OpDef sgd;
  sgd.type = "SgdUpdate";
  sgd.doc = "v = momentum * v + (grad + weight_decay * param); param -= lr * v (plain SGD without velocity)";
  sgd.min_inputs = 2;
  sgd.max_inputs = 3;
  sgd.num_outputs = -1;
  sgd.min_outputs = 1;
  sgd.max_outputs = 2;
  sgd.attrs = {attr_float("lr", 0.01, "learning rate"), attr_float("momentum", 0.0, "momentum factor (needs velocity)"),
               attr_float("weight_decay", 0.0, "L2 penalty added to the gradient")};
  sgd.input_names = {"param", "grad", "velocity?"};
  sgd.output_names = {"new_param", "new_velocity?"};
  sgd.infer = infer_sgd;
  sgd.reference = typed(sgd_ref<float>, sgd_ref<double>);
  r.add(std::move(sgd));

  OpDef adam;
  adam.type = "AdamUpdate";
  adam.doc = "Adam step with bias correction at `step` (PyTorch semantics, L2 weight decay)";
  adam.min_inputs = adam.max_inputs = 4;
  adam.num_outputs = 3;
  adam.attrs = {attr_float("lr", 1e-3, "learning rate"), attr_float("beta1", 0.9, "first-moment decay"),
                attr_float("beta2", 0.999, "second-moment decay"), attr_float("eps", 1e-8, "denominator term"),
                attr_float("weight_decay", 0.0, "L2 penalty added to the gradient"),
                attr_int("step", 1, "1-based step number used for bias correction")};
  adam.input_names = {"param", "grad", "m", "v"};
  adam.output_names = {"new_param", "new_m", "new_v"};
  adam.infer = infer_adam;
  adam.reference = typed(adam_ref<float>, adam_ref<double>);
  r.add(std::move(adam));
}

}  // namespace probelab::graph::ops
