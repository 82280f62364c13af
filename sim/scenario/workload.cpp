#include "sim/scenario/workload.h"

#include <algorithm>

#include <fmt/format.h>

#include "graph/autodiff.h"
#include "graph/fused_ops.h"
#include "graph/op_registry.h"
#include "sim/scenario/collective_ops.h"

namespace probelab::sim {

namespace {

[[noreturn]] void fail_at(const Scenario& s, const std::string& key, const std::string& expected,
                          const std::string& got = {}) {
  YamlView root(s.resolved, s.file.string(), "");
  YamlView v = root;
  std::string path;
  std::size_t pos = 0;
  // Walk as far as the key exists, for the best line number.
  while (pos != std::string::npos) {
    const std::size_t dot = key.find('.', pos);
    const std::string seg = key.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    auto next = v.is_map() ? v.get(seg) : std::nullopt;
    if (!next) break;
    v = *next;
    pos = dot == std::string::npos ? dot : dot + 1;
  }
  throw ScenarioError(s.file.string(), v.mark().is_null() ? 0 : v.mark().line + 1,
                      v.mark().is_null() ? 0 : v.mark().column + 1, key, expected, got);
}

void add_loss(Workload& w, graph::Graph& g, const Scenario& s) {
  if (g.outputs().empty()) fail_at(s, "model", "a model with at least one output for the loss", "no outputs");
  const std::string pred = g.outputs().front();
  const graph::TensorDesc pd = g.tensor(pred).desc;
  std::string kind = s.training.loss;
  if (kind == "auto") kind = pd.shape.empty() && graph::is_float(pd.dtype) ? "model" : "cross_entropy";
  if (kind == "model") {
    if (!pd.shape.empty() || !graph::is_float(pd.dtype))
      fail_at(s, "training.loss", "a model whose first output is a scalar float loss for loss: model",
              fmt::format("'{}' {}", pred, graph::desc_str(pd)));
    w.loss = pred;
    return;
  }
  graph::Op op;
  op.name = "loss";
  op.scope = "loss";
  op.outputs = {"loss"};
  op.attrs["reduction"] = std::string("mean");
  if (kind == "cross_entropy") {
    if (pd.shape.size() < 2)
      fail_at(s, "training.loss", fmt::format("a model output [N, C, ...] for cross_entropy"),
              fmt::format("'{}' {}", pred, graph::shape_str(pd.shape)));
    graph::Shape ls{pd.shape[0]};
    ls.insert(ls.end(), pd.shape.begin() + 2, pd.shape.end());
    w.labels = "labels";
    w.classes = pd.shape[1];
    g.add_tensor(graph::TensorInfo{w.labels, graph::TensorDesc{graph::DType::I32, ls, graph::Format::ND},
                                   graph::TensorKind::Input});
    g.mark_input(w.labels);
    w.input_inits[w.labels] = graph::InitSpec{graph::InitSpec::Kind::RandInt, 0.0, static_cast<double>(w.classes)};
    op.type = "SoftmaxCrossEntropyLoss";
    op.inputs = {pred, w.labels};
  } else {
    w.target = "target";
    g.add_tensor(graph::TensorInfo{w.target, graph::TensorDesc{pd.dtype, pd.shape, graph::Format::ND},
                                   graph::TensorKind::Input});
    g.mark_input(w.target);
    op.type = "MSELoss";
    op.inputs = {pred, w.target};
  }
  g.add_op(std::move(op));
  g.mark_output("loss");
  w.loss = "loss";
}

graph::OptimizerConfig optimizer_config(const OptimizerSpec& o) {
  graph::OptimizerConfig c;
  c.kind = o.type == "adam" ? graph::OptimizerConfig::Kind::Adam : graph::OptimizerConfig::Kind::Sgd;
  c.lr = o.lr;
  c.momentum = o.momentum;
  c.weight_decay = o.weight_decay;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  c.eps = o.eps;
  return c;
}

// Backward, gradient all-reduce (ranks > 1) and optimizer.
void add_training(Workload& w, graph::Graph& g, const Scenario& s) {
  std::map<std::string, std::string> grads = graph::append_backward(g, w.loss);
  std::map<std::string, std::string> params;
  for (const auto& [t, grad] : grads) {
    if (g.tensor(t).kind != graph::TensorKind::Weight) continue;
    if (s.ranks > 1) {
      ensure_collective_ops_registered();
      graph::Op ar;
      ar.name = grad + "/allreduce";
      ar.type = "AllReduce";
      ar.scope = "allreduce/" + t;
      ar.direction = graph::Direction::Backward;
      ar.inputs = {grad};
      ar.outputs = {grad + "/reduced"};
      const AllReduceSpec& a = s.training.allreduce;
      ar.attrs = {{"reduction", a.reduction}, {"algorithm", a.algorithm}, {"accumulation", a.accumulation},
                  {"order", a.order}};
      w.collectives.push_back(ar.name);
      params[t] = ar.outputs.front();
      g.add_op(std::move(ar));
    } else {
      params[t] = grad;
    }
  }
  if (params.empty()) fail_at(s, "mode", "a model with trainable weights for mode: training", "no weights");
  graph::append_optimizer(g, params, optimizer_config(s.training.optimizer));
}

void apply_precision(graph::Graph& g, const Scenario& s) {
  const graph::DType dt = s.precision.compute;
  // An FP32 master copy needs the optimizer to update it and a Cast back to `compute` before
  // every forward; the training graph does not build that, so the setting is refused, not ignored.
  if (s.precision.master_fp32 && dt != graph::DType::F32)
    fail_at(s, "precision.master_weights",
            "none: fp32 master weights (an FP32 copy the optimizer updates, cast to compute each step) are not "
            "modelled by the training graph",
            "fp32");
  if (dt == graph::DType::F32) return;
  std::vector<std::string> names;
  for (const auto& [name, info] : g.tensors())
    if (info.desc.dtype == graph::DType::F32) names.push_back(name);
  for (const auto& name : names) g.tensor(name).desc.dtype = dt;
  for (auto& [name, value] : g.initializers())
    if (value.dtype() == graph::DType::F32) value = graph::Tensor::from_f32(value.shape(), value.to_f32(), dt);
  // Ops whose result dtype is an attribute (Cast's `to`, ConstantOfShape's and Range's `dtype`)
  // compute in the policy's dtype where the model says float32.
  for (graph::Op& op : g.ops())
    for (const char* key : {"to", "dtype"})
      if (auto it = op.attrs.find(key); it != op.attrs.end() && std::holds_alternative<std::int64_t>(it->second) &&
                                        graph::dtype_from_onnx_code(std::get<std::int64_t>(it->second)) == graph::DType::F32)
        it->second = graph::onnx_code(dt);
  g.infer_shapes();
}

}  // namespace

Workload build_workload(const Scenario& s, const graph::Graph& model,
                        const std::map<std::string, graph::InitSpec>& input_inits) {
  graph::ensure_fused_ops_registered();
  Workload w;
  w.input_inits = input_inits;
  graph::Graph g = model;
  g.validate();
  if (s.mode == RunMode::Training) {
    if (s.training.batch > 0) {
      for (const auto& in : g.inputs()) {
        const auto& shape = g.tensor(in).desc.shape;
        if (shape.empty() || shape[0] != s.training.batch)
          fail_at(s, "training.batch", fmt::format("the leading dimension of model input '{}' ({})", in,
                                                   shape.empty() ? std::string("a scalar") : std::to_string(shape[0])),
                  std::to_string(s.training.batch));
      }
    }
    add_loss(w, g, s);
  }
  w.reference = g;
  if (s.mode == RunMode::Training) add_training(w, g, s);
  apply_precision(g, s);
  g.validate();
  for (const auto& in : g.inputs())
    if (!g.initializers().count(in)) w.data_inputs.push_back(in);
  std::sort(w.data_inputs.begin(), w.data_inputs.end());
  w.original = g;
  w.snapshots = graph::build_snapshots(w.original);
  return w;
}

}  // namespace probelab::sim
