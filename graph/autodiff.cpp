// Reverse-mode autodiff and optimizer ops, see autodiff.h for the naming scheme.
#include "graph/autodiff.h"

#include <algorithm>

#include <fmt/format.h>

#include "graph/op_registry.h"

namespace probelab::graph {
namespace {

std::string join_step(const std::string& step, const std::string& more) {
  return step.empty() ? more : step + "/" + more;
}

Tensor filled(const TensorDesc& d, double v) {
  std::vector<double> vals(static_cast<std::size_t>(numel(d.shape)), v);
  return Tensor::from_f64(d.shape, vals, d.dtype);
}

}  // namespace

std::string gradient_name(const std::string& tensor) { return tensor + "/gradient"; }
std::string updated_name(const std::string& tensor) { return tensor + "/updated"; }

GradBuilder::GradBuilder(const Graph& g, const std::string& loss, std::set<std::string> wants)
    : g_(g), loss_(loss), wants_(std::move(wants)) {
  const TensorInfo* l = g_.find_tensor(loss_);
  if (!l) throw GraphError(fmt::format("{}: loss tensor '{}' does not exist", g_.label(), loss_));
  if (!is_float(l->desc.dtype) || numel(l->desc.shape) != 1)
    throw GraphError(fmt::format("{}: loss tensor '{}' must be a float scalar (one element), got {}", g_.label(), loss_,
                                 desc_str(l->desc)));
  for (const std::string& w : wants_)
    if (is_float(g_.tensor(w).desc.dtype)) requires_.insert(w);
  for (std::uint32_t id : g_.topo_order()) {
    const Op& op = g_.op(id);
    const OpDef* def = OpRegistry::instance().find(op.type);
    if (!def || !def->gradient) {
      // An op without a gradient that reads a trainable weight itself would leave it untrained.
      for (const std::string& t : op.inputs)
        if (!t.empty() && wants_.count(t) && requires_.count(t))
          throw GraphError(fmt::format("{}: op '{}' ({}) is inference only (it has no gradient) but reads the trainable "
                                       "weight '{}': run the model with mode: inference",
                                       g_.label(), op.name, op.type, t));
      // The piecewise-constant ops stop gradients (their derivative is zero where it exists), as
      // do those whose outputs depend only on the input descs. Through any other, a gradient that
      // reaches its outputs is an error naming it (build()): their outputs are marked as needing
      // one, so the ops above them would not silently stay untrained.
      if (!def || def->piecewise_constant || def->shape_only) continue;
    }
    if (std::none_of(op.inputs.begin(), op.inputs.end(), [&](const std::string& t) { return requires_.count(t) != 0; }))
      continue;
    for (const std::string& out : op.outputs)
      if (is_float(g_.tensor(out).desc.dtype)) requires_.insert(out);
  }
}

std::string GradBuilder::dy(const Op& op, std::size_t i) const {
  if (i >= op.outputs.size()) return {};
  auto it = grad_.find(op.outputs[i]);
  return it == grad_.end() ? std::string() : it->second;
}

bool GradBuilder::needs(const Op& op, std::size_t i) const {
  return i < op.inputs.size() && !op.inputs[i].empty() && requires_.count(op.inputs[i]) != 0;
}

std::string GradBuilder::dx(const Op& op, std::size_t i) {
  if (!needs(op, i))
    throw GraphError(fmt::format("op '{}' ({}): gradient requested for input {} which needs none", op.name, op.type, i));
  const std::string& t = op.inputs[i];
  std::string name = fmt::format("{}/{}:{}", gradient_name(t), op.name, i);
  auto& list = partials_[t];
  if (std::find(list.begin(), list.end(), name) != list.end())
    throw GraphError(fmt::format("op '{}' ({}): gradient of input {} produced twice", op.name, op.type, i));
  list.push_back(name);
  return name;
}

std::string GradBuilder::temp(const Op& op, const std::string& what) { return fmt::format("{}/grad/{}:0", op.name, what); }

void GradBuilder::stage(Op op) { staged_.push_back(std::move(op)); }

void GradBuilder::emit(const Op& fwd, const std::string& step, std::string type, std::vector<std::string> inputs,
                       std::vector<std::string> outputs, Attrs attrs) {
  Op op;
  op.name = step.empty() ? fwd.name + "/grad" : fwd.name + "/grad/" + step;
  op.type = std::move(type);
  op.scope = fwd.scope.empty() ? fwd.name : fwd.scope;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.attrs = std::move(attrs);
  op.direction = Direction::Backward;
  op.grad_of = fwd.name;
  stage(std::move(op));
}

void GradBuilder::emit_to_input(const Op& fwd, std::size_t i, const Shape& produced, const std::string& step,
                                std::string type, std::vector<std::string> inputs, Attrs attrs) {
  const Shape& in_shape = desc(fwd.inputs[i]).shape;
  if (produced == in_shape) {
    emit(fwd, step, std::move(type), std::move(inputs), {dx(fwd, i)}, std::move(attrs));
    return;
  }
  const std::string full = temp(fwd, join_step(step, "full"));
  emit(fwd, step, std::move(type), std::move(inputs), {full}, std::move(attrs));
  emit(fwd, join_step(step, "sum"), "SumToShape", {full}, {dx(fwd, i)}, {{"shape", in_shape}});
}

void GradBuilder::reduce_to_input(const Op& fwd, std::size_t i, const std::string& src, const Shape& shape,
                                  const std::string& step) {
  const Shape& in_shape = desc(fwd.inputs[i]).shape;
  if (shape == in_shape) emit(fwd, step, "Identity", {src}, {dx(fwd, i)});
  else emit(fwd, step, "SumToShape", {src}, {dx(fwd, i)}, {{"shape", in_shape}});
}

void GradBuilder::finalize(const std::string& tensor) {
  if (grad_.count(tensor)) return;
  auto it = partials_.find(tensor);
  if (it == partials_.end()) return;
  const std::vector<std::string> parts = std::move(it->second);
  partials_.erase(it);
  const std::string target = gradient_name(tensor);
  if (parts.size() == 1) {
    for (Op& op : staged_) {
      std::replace(op.inputs.begin(), op.inputs.end(), parts[0], target);
      std::replace(op.outputs.begin(), op.outputs.end(), parts[0], target);
    }
  } else {
    const Op* prod = g_.producer(tensor);
    std::string acc = parts[0];
    for (std::size_t k = 1; k < parts.size(); ++k) {
      Op add;
      add.name = fmt::format("{}/add{}", target, k);
      add.type = "Add";
      add.scope = prod ? (prod->scope.empty() ? prod->name : prod->scope) : tensor;
      add.inputs = {acc, parts[k]};
      acc = k + 1 == parts.size() ? target : fmt::format("{}:0", add.name);
      add.outputs = {acc};
      add.direction = Direction::Backward;
      add.grad_of = prod ? prod->name : std::string();
      stage(std::move(add));
    }
  }
  grad_[tensor] = target;
}

std::map<std::string, std::string> GradBuilder::build(Graph& out) {
  if (!requires_.count(loss_))
    throw GraphError(fmt::format("{}: loss '{}' does not depend on any tensor that needs a gradient", g_.label(), loss_));
  const TensorDesc& ld = desc(loss_);
  grad_[loss_] = gradient_name(loss_);
  const std::vector<std::uint32_t> order = g_.topo_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Op& op = g_.op(*it);
    for (const std::string& o : op.outputs) finalize(o);
    bool flows = false;
    for (std::size_t i = 0; i < op.outputs.size(); ++i) flows = flows || !dy(op, i).empty();
    bool wanted = false;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) wanted = wanted || needs(op, i);
    if (!flows || !wanted) continue;
    const OpDef& def = OpRegistry::instance().get(op.type);
    if (!def.gradient)
      throw GraphError(fmt::format("{}: op '{}' ({}) is inference only (it has no gradient) but a gradient flows "
                                   "through it: train without it, or run the model with mode: inference",
                                   g_.label(), op.name, op.type));
    def.gradient(*this, op);
  }
  std::vector<std::string> rest;
  for (const auto& [t, parts] : partials_) rest.push_back(t);
  for (const std::string& t : rest) finalize(t);

  out.add_initializer(gradient_name(loss_), filled(ld, 1.0), TensorKind::Constant);
  for (Op& op : staged_) out.add_op(std::move(op));
  staged_.clear();
  std::map<std::string, std::string> result;
  for (const std::string& w : wants_)
    if (auto it = grad_.find(w); it != grad_.end()) result[w] = it->second;
  return result;
}

std::map<std::string, std::string> append_backward(Graph& g, const std::string& loss, const BackwardOptions& opts) {
  std::set<std::string> wants;
  for (const auto& [name, info] : g.tensors())
    if (info.kind == TensorKind::Weight || (opts.input_gradients && info.kind == TensorKind::Input)) wants.insert(name);
  const Graph forward = g;
  GradBuilder b(forward, loss, std::move(wants));
  return b.build(g);
}

void append_optimizer(Graph& g, const std::map<std::string, std::string>& params, const OptimizerConfig& cfg) {
  const bool adam = cfg.kind == OptimizerConfig::Kind::Adam;
  for (const auto& [param, grad] : params) {
    const TensorDesc d = g.tensor(param).desc;
    Op op;
    op.name = param + "/update";
    op.scope = param;
    op.direction = Direction::Optimizer;
    op.inputs = {param, grad};
    op.outputs = {updated_name(param)};
    std::vector<std::string> states;
    if (adam) {
      op.type = "AdamUpdate";
      op.attrs = {{"lr", cfg.lr},       {"beta1", cfg.beta1},          {"beta2", cfg.beta2},
                  {"eps", cfg.eps},     {"weight_decay", cfg.weight_decay}, {"step", cfg.step}};
      states = {param + "/adam_m", param + "/adam_v"};
    } else {
      op.type = "SgdUpdate";
      op.attrs = {{"lr", cfg.lr}, {"momentum", cfg.momentum}, {"weight_decay", cfg.weight_decay}};
      if (cfg.momentum != 0.0) states = {param + "/velocity"};
    }
    for (const std::string& s : states) {
      g.add_initializer(s, filled(d, 0.0), TensorKind::State);
      op.inputs.push_back(s);
      op.outputs.push_back(updated_name(s));
    }
    const std::vector<std::string> outs = op.outputs;
    g.add_op(std::move(op));
    for (const std::string& o : outs) g.mark_output(o);
  }
}

// BatchNormalization ops in training mode that output running statistics for initializer inputs:
// (running_mean output, input_mean initializer) and (running_var output, input_var initializer).
std::vector<std::pair<std::string, std::string>> running_stats(const Graph& g) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Op& op : g.ops()) {
    const OpDef* def = OpRegistry::instance().find(op.type);
    if (!def || def->type != "BatchNormalization" || op.outputs.size() != 3 || op.inputs.size() != 5) continue;
    for (std::size_t i = 1; i <= 2; ++i)
      if (g.initializers().count(op.inputs[i + 2])) out.emplace_back(op.outputs[i], op.inputs[i + 2]);
  }
  return out;
}

Graph build_training_graph(const Graph& forward, const std::string& loss_tensor, const OptimizerConfig& cfg) {
  Graph g = forward;
  for (const auto& [stat, init] : running_stats(g)) g.mark_output(stat);
  std::map<std::string, std::string> grads = append_backward(g, loss_tensor);
  std::map<std::string, std::string> params;
  for (const auto& [t, grad] : grads)
    if (g.tensor(t).kind == TensorKind::Weight) params[t] = grad;
  g.mark_output(loss_tensor);
  append_optimizer(g, params, cfg);
  return g;
}

std::size_t commit_training_step(Graph& g, const std::map<std::string, Tensor>& values) {
  std::size_t n = 0;
  for (auto& [name, value] : g.initializers()) {
    auto it = values.find(updated_name(name));
    if (it == values.end()) continue;
    if (it->second.shape() != value.shape())
      throw GraphError(fmt::format("{}: '{}' has shape {}, initializer '{}' has {}", g.label(), it->first,
                                   shape_str(it->second.shape()), name, shape_str(value.shape())));
    value = Tensor::from_f64(value.shape(), it->second.to_f64(), value.dtype());
    ++n;
  }
  for (const auto& [stat, init] : running_stats(g)) {
    auto it = values.find(stat);
    if (it == values.end()) continue;
    Tensor& value = g.initializers().at(init);
    value = Tensor::from_f64(value.shape(), it->second.to_f64(), value.dtype());
    ++n;
  }
  for (Op& op : g.ops())
    if (op.type == "AdamUpdate") op.attrs["step"] = op.attr_int("step", 1) + 1;
  return n;
}

}  // namespace probelab::graph
