// Losses: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (ONNX semantics: [N, C, d...] scores, int labels, optional class
// weights, ignore_index, reduction none/sum/mean, optional log_prob output), MSELoss, and their
// backward ops.
#include <cmath>
#include <limits>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

enum class Reduction { None, Sum, Mean };

Reduction reduction_of(const Op& op) {
  const std::string r = AttrReader(op).s("reduction");
  if (r == "none") return Reduction::None;
  if (r == "sum") return Reduction::Sum;
  if (r == "mean") return Reduction::Mean;
  fail(op, "attribute 'reduction' must be \"none\", \"sum\" or \"mean\", got \"{}\"", r);
}

// --- SoftmaxCrossEntropyLoss ------------------------------------------------------------------------

struct SceGeom {
  std::int64_t n, c, d;  // scores viewed as [N, C, D]
};

SceGeom sce_geom(const Op& op, const TensorDesc& scores, const TensorDesc& labels) {
  const Shape& s = scores.shape;
  if (s.size() < 2) fail(op, "scores must be [N, C, d...], got {}", shape_str(s));
  expect_int(op, labels, "labels");
  Shape want{s[0]};
  want.insert(want.end(), s.begin() + 2, s.end());
  if (labels.shape != want) fail(op, "labels must have shape {}, got {}", shape_str(want), shape_str(labels.shape));
  return {s[0], s[1], prod(s, 2, s.size())};
}

void expect_weights(const Op& op, const TensorDesc& scores, const TensorDesc& w, const SceGeom& g) {
  expect_same_dtype(op, scores, w, "scores and weights");
  if (w.shape != Shape{g.c}) fail(op, "weights must have shape [{}], got {}", g.c, shape_str(w.shape));
}

std::vector<TensorDesc> infer_sce(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 3);
  expect_outputs(op, 1, 2);
  expect_float(op, in[0], "scores");
  const SceGeom g = sce_geom(op, in[0], in[1]);
  if (has_input(op, 2)) expect_weights(op, in[0], in[2], g);
  const Shape loss_shape = reduction_of(op) == Reduction::None ? in[1].shape : Shape{};
  std::vector<TensorDesc> out{TensorDesc{in[0].dtype, loss_shape, Format::ND}};
  if (op.outputs.size() == 2) out.push_back(TensorDesc{in[0].dtype, in[0].shape, Format::ND});
  return out;
}

// Per (n, d) position: the class index and its weight (0 for ignored positions).
struct Targets {
  std::vector<std::int64_t> label;
  std::vector<double> weight;
  double weight_sum = 0;
};

template <class T>
Targets targets(const Op& op, const SceGeom& g, const Tensor& labels, const Tensor* weights) {
  Targets t;
  t.label = read_indices(labels);
  t.weight.resize(t.label.size());
  const bool has_ii = op.has_attr("ignore_index");
  const std::int64_t ii = has_ii ? op.attr_int("ignore_index") : 0;
  for (std::size_t k = 0; k < t.label.size(); ++k) {
    const std::int64_t lab = t.label[k];
    if (has_ii && lab == ii) {
      t.weight[k] = 0;
      continue;
    }
    if (lab < 0 || lab >= g.c) fail(op, "label {} at position {} is outside [0, {})", lab, k, g.c);
    t.weight[k] = weights ? static_cast<double>(cdata<T>(weights)[static_cast<std::size_t>(lab)]) : 1.0;
    t.weight_sum += t.weight[k];
  }
  return t;
}

// log_softmax over C of scores [N, C, D] (double).
template <class T>
std::vector<double> log_softmax(const SceGeom& g, const T* x) {
  std::vector<double> lp(static_cast<std::size_t>(g.n * g.c * g.d));
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t d = 0; d < g.d; ++d) {
      const std::int64_t base = n * g.c * g.d + d;
      double mx = -std::numeric_limits<double>::infinity();
      for (std::int64_t c = 0; c < g.c; ++c) mx = std::max(mx, static_cast<double>(x[base + c * g.d]));
      double s = 0;
      for (std::int64_t c = 0; c < g.c; ++c) s += num::exp(x[base + c * g.d] - mx);
      const double lse = mx + num::log(s);
      for (std::int64_t c = 0; c < g.c; ++c) lp[static_cast<std::size_t>(base + c * g.d)] = x[base + c * g.d] - lse;
    }
  return lp;
}

template <class T> void sce_ref(const Op& op, Ins in, Outs out) {
  const SceGeom g = sce_geom(op, in[0]->desc(), in[1]->desc());
  const Targets t = targets<T>(op, g, *in[1], in.size() > 2 ? in[2] : nullptr);
  const std::vector<double> lp = log_softmax(g, cdata<T>(in[0]).data());
  auto loss = mdata<T>(out[0]);
  const Reduction red = reduction_of(op);
  double total = 0;
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t d = 0; d < g.d; ++d) {
      const auto k = static_cast<std::size_t>(n * g.d + d);
      const double l = t.weight[k] == 0 ? 0.0 : -lp[static_cast<std::size_t>((n * g.c + t.label[k]) * g.d + d)] * t.weight[k];
      if (red == Reduction::None) loss[k] = static_cast<T>(l);
      total += l;
    }
  if (red == Reduction::Sum) loss[0] = static_cast<T>(total);
  if (red == Reduction::Mean) loss[0] = static_cast<T>(total / t.weight_sum);
  if (out.size() > 1) {
    auto o = mdata<T>(out[1]);
    for (std::size_t i = 0; i < lp.size(); ++i) o[i] = static_cast<T>(lp[i]);
  }
}

// SoftmaxCrossEntropyLossGrad(dLoss, scores, labels, weights?) -> dScores.
std::vector<TensorDesc> infer_sce_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 4);
  expect_float(op, in[1], "scores");
  const SceGeom g = sce_geom(op, in[1], in[2]);
  if (has_input(op, 3)) expect_weights(op, in[1], in[3], g);
  const Shape loss_shape = reduction_of(op) == Reduction::None ? in[2].shape : Shape{};
  if (in[0].shape != loss_shape)
    fail(op, "dLoss has shape {}, expected {}", shape_str(in[0].shape), shape_str(loss_shape));
  return {in[1]};
}

template <class T> void sce_grad_ref(const Op& op, Ins in, Outs out) {
  const SceGeom g = sce_geom(op, in[1]->desc(), in[2]->desc());
  const Targets t = targets<T>(op, g, *in[2], in.size() > 3 ? in[3] : nullptr);
  const std::vector<double> lp = log_softmax(g, cdata<T>(in[1]).data());
  auto dl = cdata<T>(in[0]);
  auto dx = mdata<T>(out[0]);
  const Reduction red = reduction_of(op);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t d = 0; d < g.d; ++d) {
      const auto k = static_cast<std::size_t>(n * g.d + d);
      const double upstream = red == Reduction::None ? static_cast<double>(dl[k])
                              : red == Reduction::Sum ? static_cast<double>(dl[0])
                                                      : static_cast<double>(dl[0]) / t.weight_sum;
      const double coeff = upstream * t.weight[k];
      for (std::int64_t c = 0; c < g.c; ++c) {
        const auto j = static_cast<std::size_t>((n * g.c + c) * g.d + d);
        const double onehot = t.weight[k] != 0 && c == t.label[k] ? 1.0 : 0.0;
        dx[j] = static_cast<T>(coeff == 0 ? 0.0 : coeff * (num::exp(lp[j]) - onehot));
      }
    }
}

Attrs sce_attrs(const Op& op) {
  Attrs a{{"reduction", AttrReader(op).s("reduction")}};
  if (op.has_attr("ignore_index")) a["ignore_index"] = op.attr_int("ignore_index");
  return a;
}

void sce_grad(GradBuilder& b, const Op& op) {
  if (op.outputs.size() > 1 && !b.dy(op, 1).empty()) fail(op, "gradients through the log_prob output are not supported");
  if (has_input(op, 2) && b.needs(op, 2)) fail(op, "the class weights are not differentiable; make them constants");
  if (!b.needs(op, 0)) return;
  std::vector<std::string> ins{b.dy(op), op.inputs[0], op.inputs[1]};
  if (has_input(op, 2)) ins.push_back(op.inputs[2]);
  b.emit(op, "", "SoftmaxCrossEntropyLossGrad", std::move(ins), {b.dx(op, 0)}, sce_attrs(op));
}

std::vector<AttrSpec> sce_attr_specs() {
  return {attr_str("reduction", "mean", "\"mean\" (weighted mean over non-ignored positions), \"sum\" or \"none\""),
          attr_nodefault("ignore_index", false, "label value whose positions contribute nothing")};
}

// --- NegativeLogLikelihoodLoss ---------------------------------------------------------------------

// NegativeLogLikelihoodLoss(input [N, C, d...] log-probabilities, target, weight?) with the
// targets, weights, ignore_index and reductions of SoftmaxCrossEntropyLoss.
std::vector<TensorDesc> infer_nll(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 3);
  expect_float(op, in[0], "input");
  const SceGeom g = sce_geom(op, in[0], in[1]);
  if (in.size() > 2 && has_input(op, 2)) expect_weights(op, in[0], in[2], g);
  return {TensorDesc{in[0].dtype, reduction_of(op) == Reduction::None ? in[1].shape : Shape{}, Format::ND}};
}

template <class T> void nll_ref(const Op& op, Ins in, Outs out) {
  const SceGeom g = sce_geom(op, in[0]->desc(), in[1]->desc());
  const Targets t = targets<T>(op, g, *in[1], in.size() > 2 ? in[2] : nullptr);
  auto x = cdata<T>(in[0]);
  auto loss = mdata<T>(out[0]);
  const Reduction red = reduction_of(op);
  double total = 0;
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t d = 0; d < g.d; ++d) {
      const auto k = static_cast<std::size_t>(n * g.d + d);
      const double l =
          t.weight[k] == 0 ? 0.0 : -static_cast<double>(x[static_cast<std::size_t>((n * g.c + t.label[k]) * g.d + d)]) * t.weight[k];
      if (red == Reduction::None) loss[k] = static_cast<T>(l);
      total += l;
    }
  if (red == Reduction::Sum) loss[0] = static_cast<T>(total);
  if (red == Reduction::Mean) loss[0] = static_cast<T>(total / t.weight_sum);
}

// NegativeLogLikelihoodLossGrad(dLoss, input, target, weight?) -> dInput: -weight * upstream at
// the target class of each position, zero elsewhere.
std::vector<TensorDesc> infer_nll_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 4);
  expect_float(op, in[1], "input");
  const SceGeom g = sce_geom(op, in[1], in[2]);
  if (in.size() > 3 && has_input(op, 3)) expect_weights(op, in[1], in[3], g);  // weight is input 3 here
  const Shape want = reduction_of(op) == Reduction::None ? in[2].shape : Shape{};
  if (in[0].shape != want) fail(op, "dLoss has shape {}, expected {}", shape_str(in[0].shape), shape_str(want));
  return {in[1]};
}

template <class T> void nll_grad_ref(const Op& op, Ins in, Outs out) {
  const SceGeom g = sce_geom(op, in[1]->desc(), in[2]->desc());
  const Targets t = targets<T>(op, g, *in[2], in.size() > 3 ? in[3] : nullptr);
  auto dl = cdata<T>(in[0]);
  auto dx = mdata<T>(out[0]);
  const Reduction red = reduction_of(op);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t d = 0; d < g.d; ++d) {
      const auto k = static_cast<std::size_t>(n * g.d + d);
      if (t.weight[k] == 0) continue;
      const double upstream = red == Reduction::None ? static_cast<double>(dl[k])
                              : red == Reduction::Sum ? static_cast<double>(dl[0])
                                                      : static_cast<double>(dl[0]) / t.weight_sum;
      dx[static_cast<std::size_t>((n * g.c + t.label[k]) * g.d + d)] = static_cast<T>(-upstream * t.weight[k]);
    }
}

void nll_grad(GradBuilder& b, const Op& op) {
  if (has_input(op, 2) && b.needs(op, 2)) fail(op, "the class weights are not differentiable; make them constants");
  if (!b.needs(op, 0)) return;
  std::vector<std::string> ins{b.dy(op), op.inputs[0], op.inputs[1]};
  if (has_input(op, 2)) ins.push_back(op.inputs[2]);
  b.emit(op, "", "NegativeLogLikelihoodLossGrad", std::move(ins), {b.dx(op, 0)}, sce_attrs(op));
}

// --- MSELoss ---------------------------------------------------------------------------------------

std::vector<TensorDesc> infer_mse(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "prediction");
  expect_same_dtype(op, in[0], in[1], "prediction and target");
  if (in[0].shape != in[1].shape)
    fail(op, "prediction {} and target {} must have the same shape", shape_str(in[0].shape), shape_str(in[1].shape));
  return {TensorDesc{in[0].dtype, reduction_of(op) == Reduction::None ? in[0].shape : Shape{}, Format::ND}};
}

template <class T> void mse_ref(const Op& op, Ins in, Outs out) {
  auto p = cdata<T>(in[0]), t = cdata<T>(in[1]);
  auto y = mdata<T>(out[0]);
  const Reduction red = reduction_of(op);
  double total = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double d = static_cast<double>(p[i]) - t[i];
    if (red == Reduction::None) y[i] = static_cast<T>(d * d);
    total += d * d;
  }
  if (red == Reduction::Sum) y[0] = static_cast<T>(total);
  if (red == Reduction::Mean) y[0] = static_cast<T>(p.empty() ? 0.0 : total / static_cast<double>(p.size()));
}

// MSELossGrad(dLoss, prediction, target) -> dPrediction = 2 (p - t) * upstream.
std::vector<TensorDesc> infer_mse_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 3);
  const auto fwd = infer_mse(op, in.subspan(1));
  if (in[0].shape != fwd[0].shape) fail(op, "dLoss has shape {}, expected {}", shape_str(in[0].shape), shape_str(fwd[0].shape));
  return {in[1]};
}

template <class T> void mse_grad_ref(const Op& op, Ins in, Outs out) {
  auto dl = cdata<T>(in[0]), p = cdata<T>(in[1]), t = cdata<T>(in[2]);
  auto dx = mdata<T>(out[0]);
  const Reduction red = reduction_of(op);
  const double n = static_cast<double>(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double up = red == Reduction::None ? dl[i] : red == Reduction::Sum ? dl[0] : dl[0] / n;
    dx[i] = static_cast<T>(2.0 * (static_cast<double>(p[i]) - t[i]) * up);
  }
}

void mse_grad(GradBuilder& b, const Op& op) {
  const Attrs a{{"reduction", AttrReader(op).s("reduction")}};
  const std::string dp = b.needs(op, 0) ? b.dx(op, 0) : GradBuilder::temp(op, "dprediction");
  b.emit(op, "", "MSELossGrad", {b.dy(op), op.inputs[0], op.inputs[1]}, {dp}, a);
  if (b.needs(op, 1)) b.emit(op, "target", "Scale", {dp}, {b.dx(op, 1)}, {{"alpha", -1.0}});
}

AttrSpec mse_reduction() { return attr_str("reduction", "mean", "\"mean\", \"sum\" or \"none\""); }

}  // namespace

void register_loss_ops(OpRegistry& r) {
  OpDef sce;
  sce.type = "SoftmaxCrossEntropyLoss";
  sce.aliases = {"CrossEntropyLoss"};
  sce.doc = "-log_softmax(scores)[label] per position, reduced (ONNX SoftmaxCrossEntropyLoss)";
  sce.min_inputs = 2;
  sce.max_inputs = 3;
  sce.num_outputs = -1;
  sce.min_outputs = 1;
  sce.max_outputs = 2;
  sce.attrs = sce_attr_specs();
  sce.input_names = {"scores", "labels", "weights?"};
  sce.output_names = {"output", "log_prob?"};
  sce.infer = infer_sce;
  sce.reference = typed(sce_ref<float>, sce_ref<double>);
  sce.gradient = sce_grad;
  r.add(std::move(sce));

  OpDef sg;
  sg.type = "SoftmaxCrossEntropyLossGrad";
  sg.doc = "dScores of SoftmaxCrossEntropyLoss: (softmax - onehot) * weight * upstream";
  sg.min_inputs = 3;
  sg.max_inputs = 4;
  sg.attrs = sce_attr_specs();
  sg.input_names = {"dLoss", "scores", "labels", "weights?"};
  sg.output_names = {"dScores"};
  sg.backward = true;
  sg.infer = infer_sce_grad;
  sg.reference = typed(sce_grad_ref<float>, sce_grad_ref<double>);
  r.add(std::move(sg));

  OpDef nll;
  nll.type = "NegativeLogLikelihoodLoss";
  nll.aliases = {"NLLLoss"};
  nll.doc = "-input[target] (log-probabilities) per position, weighted and reduced (ONNX NegativeLogLikelihoodLoss)";
  nll.min_inputs = 2;
  nll.max_inputs = 3;
  nll.attrs = sce_attr_specs();
  nll.input_names = {"input", "target", "weight?"};
  nll.output_names = {"loss"};
  nll.infer = infer_nll;
  nll.reference = typed(nll_ref<float>, nll_ref<double>);
  nll.gradient = nll_grad;
  r.add(std::move(nll));

  OpDef ng;
  ng.type = "NegativeLogLikelihoodLossGrad";
  ng.doc = "dInput of NegativeLogLikelihoodLoss: -weight * upstream at each target class";
  ng.min_inputs = 3;
  ng.max_inputs = 4;
  ng.attrs = sce_attr_specs();
  ng.input_names = {"dLoss", "input", "target", "weight?"};
  ng.output_names = {"dInput"};
  ng.backward = true;
  ng.infer = infer_nll_grad;
  ng.reference = typed(nll_grad_ref<float>, nll_grad_ref<double>);
  r.add(std::move(ng));

  OpDef mse;
  mse.type = "MSELoss";
  mse.doc = "(prediction - target)^2, reduced";
  mse.min_inputs = mse.max_inputs = 2;
  mse.attrs = {mse_reduction()};
  mse.input_names = {"prediction", "target"};
  mse.output_names = {"loss"};
  mse.infer = infer_mse;
  mse.reference = typed(mse_ref<float>, mse_ref<double>);
  mse.gradient = mse_grad;
  r.add(std::move(mse));

  OpDef mg;
  mg.type = "MSELossGrad";
  mg.doc = "dPrediction of MSELoss";
  mg.min_inputs = mg.max_inputs = 3;
  mg.attrs = {mse_reduction()};
  mg.input_names = {"dLoss", "prediction", "target"};
  mg.output_names = {"dPrediction"};
  mg.backward = true;
  mg.infer = infer_mse_grad;
  mg.reference = typed(mse_grad_ref<float>, mse_grad_ref<double>);
  r.add(std::move(mg));
}

}  // namespace probelab::graph::ops
