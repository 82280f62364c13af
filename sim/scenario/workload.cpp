#include "sim/scenario/workload.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "graph/autodiff.h"
#include "graph/fused_ops.h"
#include "graph/op_registry.h"
#include "graph/format.h"
#include "graph/passes.h"
#include "sim/scenario/collective_lowering.h"
#include "sim/scenario/gradient_buckets.h"

namespace probelab::sim {

namespace {

[[noreturn]] void fail_at(const Scenario& s, const std::string& key, const std::string& expected,
                          const std::string& got = {}) {
  const YamlView root = s.view();
  if (root.overridden(key)) root.fail_at(key, expected, got);
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

graph::Op collective(std::string name, std::string type, std::string scope, graph::Direction dir, std::string in,
                     std::string out, graph::Attrs attrs) {
  graph::Op op;
  op.name = std::move(name);
  op.type = std::move(type);
  op.scope = std::move(scope);
  op.direction = dir;
  op.inputs = {std::move(in)};
  op.outputs = {std::move(out)};
  op.attrs = std::move(attrs);
  return op;
}

graph::Attrs collective_attrs(const Scenario& s) {
  const AllReduceSpec& a = s.training.allreduce;
  return {{"reduction", a.reduction}, {"algorithm", a.algorithm},        {"inter_algorithm", a.inter_algorithm},
          {"accumulation", a.accumulation}, {"order", a.order}, {"comm", std::string("world")},
          {"ranks", std::int64_t{s.ranks}}};
}

graph::Op simple(std::string name, std::string type, std::string scope, graph::Direction dir,
                 std::vector<std::string> in, std::string out, graph::Attrs attrs) {
  graph::Op op = collective(std::move(name), std::move(type), std::move(scope), dir, "", std::move(out), std::move(attrs));
  op.inputs = std::move(in);
  return op;
}

/// ZeRO-1 for parameter `t` with gradient `grad` (workload.h): the reduce-scatter of the gradient
/// into this rank's shard; returns the shard tensor the optimizer updates and its gradient. The
/// all-gather that rebuilds "t/updated" is added by zero_gather once the optimizer ran.
std::pair<std::string, std::string> zero_scatter(Workload& w, graph::Graph& g, const Scenario& s, const std::string& t,
                                                 const std::string& grad) {
  const graph::TensorDesc d = g.tensor(t).desc;
  const std::int64_t n = graph::numel(d.shape), parts = s.ranks, padded = padded_length(n, parts);
  const std::string scope = "zero1/" + t;
  using graph::Direction;
  std::string x = grad;
  g.add_op(simple(t + "/gradient/flat", "Reshape", scope, Direction::Backward, {x}, t + "/gradient/flat:0",
                  {{"shape", std::vector<std::int64_t>{n}}}));
  x = t + "/gradient/flat:0";
  if (padded != n) {
    const std::string zeros = t + "/gradient/pad_zeros";
    g.add_initializer(zeros, graph::Tensor::from_f64({padded - n}, std::vector<double>(static_cast<std::size_t>(padded - n), 0.0), d.dtype),
                      graph::TensorKind::Constant);
    g.add_op(simple(t + "/gradient/pad", "Concat", scope, Direction::Backward, {x, zeros}, t + "/gradient/pad:0",
                    {{"axis", std::int64_t{0}}}));
    x = t + "/gradient/pad:0";
  }
  graph::Attrs rs = collective_attrs(s);
  rs.erase("inter_algorithm");
  const std::string shard = t + "/shard", shard_grad = shard + "/gradient";
  g.add_op(collective(t + "/gradient/reducescatter", "ReduceScatter", scope, Direction::Backward, x, shard_grad, rs));
  g.add_initializer(shard, graph::Tensor::from_f64({padded / parts}, std::vector<double>(static_cast<std::size_t>(padded / parts), 0.0), d.dtype),
                    graph::TensorKind::Weight);
  w.shards[shard] = ShardSpec{t, -1, parts, nullptr};
  return {shard, shard_grad};
}

void zero_gather(graph::Graph& g, const Scenario& s, const std::string& t) {
  const graph::TensorDesc d = g.tensor(t).desc;
  const std::int64_t n = graph::numel(d.shape), padded = padded_length(n, s.ranks);
  const std::string scope = "zero1/" + t;
  using graph::Direction;
  graph::Attrs ag = collective_attrs(s);
  for (const char* k : {"reduction", "inter_algorithm", "order"}) ag.erase(k);
  ag["replicas"] = std::string("world");
  g.add_op(collective(t + "/allgather", "AllGather", scope, Direction::Optimizer, t + "/shard/updated",
                      t + "/allgather:0", ag));
  std::string x = t + "/allgather:0";
  if (padded != n) {
    g.add_op(simple(t + "/unpad", "Slice", scope, Direction::Optimizer, {x}, t + "/unpad:0",
                    {{"starts", std::vector<std::int64_t>{0}}, {"ends", std::vector<std::int64_t>{n}},
                     {"axes", std::vector<std::int64_t>{0}}}));
    x = t + "/unpad:0";
  }
  g.add_op(simple(t + "/unshard", "Reshape", scope, Direction::Optimizer, {x}, graph::updated_name(t),
                  {{"shape", d.shape}}));
  g.mark_output(graph::updated_name(t));
}

/// Column-parallel MatMuls (workload.h, `tensor`). Returns the weight shards it created.
std::set<std::string> apply_tensor_parallel(Workload& w, graph::Graph& g, const Scenario& s) {
  std::set<std::string> shards;
  if (s.tensor_parallel.empty()) return shards;
  YamlView where = s.parallel_source ? (*s.parallel_source)["tensor"] : s.view();
  if (s.ranks < 2) where.fail("ranks >= 2 for tensor parallelism", std::to_string(s.ranks) + " rank");
  const std::int64_t R = s.ranks;
  std::vector<graph::Op> ops;
  std::map<std::string, graph::Tensor> extra;
  std::set<std::string> matched;
  for (const graph::Op& op : g.ops()) {
    const bool selected = std::any_of(s.tensor_parallel.begin(), s.tensor_parallel.end(),
                                      [&](const std::string& glob) { return graph::glob_match(glob, op.name); });
    if (!selected) {
      ops.push_back(op);
      continue;
    }
    matched.insert(op.name);
    const std::string b = op.inputs.size() == 2 ? op.inputs[1] : "";
    const auto* wt = g.find_tensor(b);
    const graph::TensorDesc y = g.tensor(op.outputs.at(0)).desc;
    if (op.type != "MatMul" || !wt || wt->kind != graph::TensorKind::Weight || wt->desc.shape.size() != 2 ||
        y.shape.size() < 2 || wt->desc.shape[1] % R != 0)
      where.fail(fmt::format("MatMul ops with a 2-D weight whose columns divide by the {} ranks and an output of rank "
                             ">= 2",
                             R),
                 fmt::format("'{}' ({} {})", op.name, op.type, b.empty() ? "without a weight" : graph::desc_str(wt->desc)));
    const graph::Tensor& full = g.initializers().at(b);
    const std::string shard = b + "/tp", part = op.outputs[0] + "/tp";
    const std::int64_t cols = wt->desc.shape[1] / R;
    extra[shard] = graph::Tensor::from_f64({wt->desc.shape[0], cols},
                                           std::vector<double>(static_cast<std::size_t>(wt->desc.shape[0] * cols), 0.0),
                                           full.dtype());
    w.shards[shard] = ShardSpec{b, 1, R, std::make_shared<const graph::Tensor>(full)};
    shards.insert(shard);
    graph::Op mm = op;
    mm.inputs[1] = shard;
    mm.outputs[0] = part;
    ops.push_back(mm);
    const std::string scope = op.scope;
    auto add = [&](std::string name, std::string type, std::string in, std::string out, graph::Attrs attrs) {
      graph::Op o = simple(std::move(name), std::move(type), scope, op.direction, {std::move(in)}, std::move(out), std::move(attrs));
      ops.push_back(std::move(o));
    };
    // The shards' columns are gathered as rows: [rows, cols] -> [cols, rows] on each rank, stacked
    // by the AllGather, transposed back. An output of rank > 2 (a transformer's [batch, seq, N])
    // is flattened to [batch * seq, N / R] first and its shape restored after.
    const std::vector<std::int64_t> swap{1, 0};
    const bool nd = y.shape.size() > 2;
    std::int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < y.shape.size(); ++i) rows *= y.shape[i];
    std::string flat = part;
    if (nd) {
      flat = op.name + "/tp_flatten:0";
      add(op.name + "/tp_flatten", "Reshape", part, flat, {{"shape", std::vector<std::int64_t>{rows, cols}}});
    }
    add(op.name + "/tp_t", "Transpose", flat, op.name + "/tp_t:0", {{"perm", swap}});
    add(op.name + "/tp_gather", "AllGather", op.name + "/tp_t:0", op.name + "/tp_gather:0",
        {{"comm", std::string("world")}, {"ranks", std::int64_t{R}},
         {"algorithm", s.training.allreduce.algorithm == "hierarchical" ? std::string("ring") : s.training.allreduce.algorithm},
         {"accumulation", s.training.allreduce.accumulation}, {"grad_reduction", std::string("mean")}});
    const std::string gathered = nd ? op.name + "/tp_untranspose:0" : op.outputs[0];
    add(op.name + "/tp_untranspose", "Transpose", op.name + "/tp_gather:0", gathered, {{"perm", swap}});
    if (nd) add(op.name + "/tp_unflatten", "Reshape", gathered, op.outputs[0], {{"shape", y.shape}});
  }
  for (const auto& glob : s.tensor_parallel)
    if (std::none_of(matched.begin(), matched.end(), [&](const std::string& n) { return graph::glob_match(glob, n); }))
      where.fail("globs that select MatMul ops of the model", "'" + glob + "' (selects none)");
  for (auto& op : ops) op.id = 0;
  g = graph::rebuild_graph(g, std::move(ops), extra);
  for (const auto& t : shards) g.tensor(t).kind = graph::TensorKind::Weight;
  w.replicated_data = true;
  return shards;
}

/// What the optimizer updates once the gradients are known: parameter -> gradient (a ZeRO-1
/// shard or a tensor-parallel shard in place of its full weight), and the weights whose updated
/// shards are all-gathered afterwards (ZeRO-1).
struct TrainingParams {
  std::map<std::string, std::string> params;
  std::vector<std::string> sharded;
};

/// Megatron's f operator: the gradient of a column-parallel MatMul's input on each rank is that
/// rank's part dY_r W_r^T; "<matmul>/grad/a/tp_reduce" (AllReduce, sum) makes it the whole gradient on every
/// rank, so that every op before the split runs on the single device's values.
void reduce_split_input_gradients(graph::Graph& g, const Scenario& s, const std::set<std::string>& tp_shards) {
  std::vector<graph::Op> ops;
  for (const graph::Op& op : g.ops()) {
    if (op.type != "MatMulGradA" || op.inputs.size() != 2 || !tp_shards.count(op.inputs[1])) {
      ops.push_back(op);
      continue;
    }
    const std::string whole = op.outputs.at(0), part = whole + "/tp_part";
    graph::Op mm = op;
    mm.outputs[0] = part;
    ops.push_back(mm);
    graph::Attrs at = collective_attrs(s);
    at["reduction"] = std::string("sum");
    graph::Op sum = simple(op.name + "/tp_reduce", "AllReduce", op.scope, graph::Direction::Backward, {part}, whole, std::move(at));
    sum.grad_of = op.grad_of;
    ops.push_back(std::move(sum));
  }
  for (auto& op : ops) op.id = 0;
  g = graph::rebuild_graph(g, std::move(ops), {});
}

// Backward and gradient all-reduce (ranks > 1), or ZeRO-1's reduce-scatter of the gradients.
// Under tensor parallelism every weight's gradient is already the single device's: a shard's is
// its block (the gather's gradient is each rank's block of dY), a replicated weight's is the same
// on every rank (the split MatMuls' input gradients are all-reduced), so none is all-reduced.
TrainingParams add_backward(Workload& w, graph::Graph& g, const Scenario& s, const std::set<std::string>& tp_shards) {
  std::map<std::string, std::string> grads;
  try {
    grads = graph::append_backward(g, w.loss);
  } catch (const graph::GraphError& e) {  // named at the scenario's mode, which asked for training
    fail_at(s, "mode", "a model whose backward pass can be built (training)", e.what());
  }
  TrainingParams tp;
  const bool zero = s.ranks > 1 && s.training.sharding == "zero1";
  if (zero && s.training.allreduce.algorithm == "hierarchical")
    fail_at(s, "training.sharding", "allreduce.algorithm ring, tree or direct with sharding: zero1", "hierarchical");
  if (zero && !tp_shards.empty())
    fail_at(s, "training.sharding", "sharding: none with parallel.tensor (ZeRO shards data-parallel replicas)", "zero1");
  if (zero && s.training.allreduce.bucket_mb > 0)
    fail_at(s, "training.allreduce.bucket_mb", "0 with sharding: zero1 (its reduce-scatters are per parameter)",
            fmt::format("'{}'", s.training.allreduce.bucket_mb));
  std::vector<std::pair<std::string, std::string>> replicated;  // data-parallel gradients to all-reduce
  if (!tp_shards.empty()) reduce_split_input_gradients(g, s, tp_shards);
  for (const auto& [t, grad] : grads) {
    if (g.tensor(t).kind != graph::TensorKind::Weight) continue;
    if (!tp_shards.empty()) {  // a shard's gradient is its own; every other weight's is the same on every rank
      tp.params[t] = grad;
      continue;
    }
    if (zero) {
      auto [shard, shard_grad] = zero_scatter(w, g, s, t, grad);
      tp.params[shard] = shard_grad;
      tp.sharded.push_back(t);
    } else if (s.ranks > 1) {
      replicated.emplace_back(t, grad);
    } else {
      tp.params[t] = grad;
    }
  }
  if (!replicated.empty()) {
    // One AllReduce per parameter (bucket_mb 0), or per bucket of gradients.
    const double mb = s.training.allreduce.bucket_mb;
    const auto cap = mb > 0 ? static_cast<std::int64_t>(mb * 1024 * 1024) : std::int64_t{0};
    GradientBuckets b = add_gradient_buckets(g, replicated, cap, static_cast<std::int64_t>(graph::dtype_size(s.precision.compute)),
                                             collective_attrs(s));
    for (auto& [t, reduced] : b.reduced) tp.params[t] = reduced;
    w.collectives.insert(w.collectives.end(), b.collectives.begin(), b.collectives.end());
  }
  if (tp.params.empty()) fail_at(s, "mode", "a model with trainable weights for mode: training", "no weights");
  return tp;
}

/// The loss scale of the graph: alpha of a forward Scale op writing the loss (the static loss
/// scaling of scenarios/models/mlp_loss_scaled.yaml); 1 without one.
double loss_scale(const graph::Graph& g, const std::string& loss) {
  const graph::Op* op = g.producer(loss);
  if (!op || op->type != "Scale" || op->direction != graph::Direction::Forward) return 1.0;
  return op->attr_float("alpha", 1.0);
}

/// FP32 master weights (workload.h, `master`): for each parameter P of the 16-bit device graph,
/// an FP32 State initializer "P/master" holding the FP32 value P was rounded from; the optimizer
/// updates it from the gradient cast to FP32 (and unscaled there by the loss scale), and a Cast
/// back to the compute dtype writes "P/updated". Returns the master -> FP32 gradient map the
/// optimizer is built on. `fp32` holds the parameters' values before the dtype policy rounded
/// them (and the sources of sharded ones).
std::map<std::string, std::string> add_master_weights(Workload& w, graph::Graph& g,
                                                      const std::map<std::string, std::string>& params,
                                                      const std::map<std::string, graph::Tensor>& fp32) {
  using graph::Direction;
  const double scale = loss_scale(g, w.loss);
  std::map<std::string, std::string> masters;
  for (const auto& [p, grad] : params) {
    const graph::TensorDesc d = g.tensor(p).desc;
    const std::string master = p + "/master", scope = "master/" + p;
    graph::Tensor value = graph::Tensor::from_f64(d.shape, std::vector<double>(static_cast<std::size_t>(graph::numel(d.shape)), 0.0),
                                                  graph::DType::F32);
    if (auto sh = w.shards.find(p); sh != w.shards.end()) {
      ShardSpec spec = sh->second;  // each rank's block of the FP32 source, not of its rounded copy
      if (!spec.value) spec.value = std::make_shared<const graph::Tensor>(fp32.at(spec.source));
      w.shards[master] = spec;
    } else {
      value = graph::Tensor::from_f64(d.shape, graph::to_logical(fp32.at(p)).to_f64(), graph::DType::F32);
    }
    if (d.format != graph::Format::ND) value = graph::convert_format(value, d.format);  // aliasable like P
    g.add_initializer(master, std::move(value), graph::TensorKind::State);
    std::string g32 = p + "/gradient/fp32";
    g.add_op(simple(g32, "Cast", scope, Direction::Optimizer, {grad}, g32, {{"to", graph::onnx_code(graph::DType::F32)}}));
    if (scale != 1.0) {
      const std::string unscaled = p + "/gradient/unscaled";
      g.add_op(simple(unscaled, "Scale", scope, Direction::Optimizer, {g32}, unscaled, {{"alpha", 1.0 / scale}}));
      g32 = unscaled;
    }
    masters[master] = g32;
  }
  return masters;
}

/// The Cast of every updated master weight back to its parameter's dtype: op "P/update" writes
/// "P/updated" (in place of P on the device, as an optimizer op would).
void cast_masters_back(graph::Graph& g, const std::map<std::string, std::string>& params) {
  for (const auto& [p, grad] : params) {
    const graph::DType dt = g.tensor(p).desc.dtype;
    g.add_op(simple(p + "/update", "Cast", "master/" + p, graph::Direction::Optimizer,
                    {graph::updated_name(p + "/master")}, graph::updated_name(p), {{"to", graph::onnx_code(dt)}}));
    g.mark_output(graph::updated_name(p));
  }
}

// The optimizer step once the dtype policy applied: on the parameters, or on their FP32 master
// copies; then ZeRO-1's all-gather of the updated shards.
void add_optimizer(Workload& w, graph::Graph& g, const Scenario& s, const TrainingParams& tp,
                   const std::map<std::string, graph::Tensor>& fp32) {
  const bool master = s.precision.master_fp32 && s.precision.compute != graph::DType::F32;
  const auto cfg = optimizer_config(s.training.optimizer);
  if (master) {
    graph::append_optimizer(g, add_master_weights(w, g, tp.params, fp32), cfg);
    cast_masters_back(g, tp.params);
    // A ZeRO-1 shard of the parameter is read by nothing now (its master is updated and cast
    // into "P/shard/updated"): the graph passes drop it, and it needs no per-rank value.
    for (const auto& [p, grad] : tp.params)
      if (w.shards.count(p) && g.consumers(p).empty()) w.shards.erase(p);
  } else {
    graph::append_optimizer(g, tp.params, cfg);
  }
  for (const auto& t : tp.sharded) zero_gather(g, s, t);
}

/// FP32 values of the trainable parameters and of the sources of sharded ones, before the dtype
/// policy rounds them (the initial values of their master copies).
std::map<std::string, graph::Tensor> fp32_parameters(const Workload& w, const graph::Graph& g, const TrainingParams& tp) {
  std::map<std::string, graph::Tensor> out;
  for (const auto& [p, grad] : tp.params) {
    auto sh = w.shards.find(p);
    const std::string src = sh == w.shards.end() ? p : sh->second.source;
    if (sh != w.shards.end() && sh->second.value) continue;
    out.emplace(src, g.initializers().at(src));
  }
  return out;
}

void apply_precision(Workload& w, graph::Graph& g, const Scenario& s) {
  const graph::DType dt = s.precision.compute;
  if (dt == graph::DType::F32) return;
  std::vector<std::string> names;
  for (const auto& [name, info] : g.tensors())
    if (info.desc.dtype == graph::DType::F32) names.push_back(name);
  for (const auto& name : names) g.tensor(name).desc.dtype = dt;
  // A finite FP32 constant beyond the policy dtype's range saturates to its largest finite value
  // (e.g. the -FLT_MAX of an exported attention mask becomes -65504 in FP16, not -Inf), as
  // onnxconverter-common's float16 conversion clips; infinities and NaN stay what they are.
  const float max_finite = dt == graph::DType::F16 ? 65504.0f : std::bit_cast<float>(0x7F7F0000u);  // BF16
  for (auto& [name, value] : g.initializers()) {
    if (value.dtype() != graph::DType::F32) continue;
    std::vector<float> v = value.to_f32();
    std::uint64_t saturated = 0;
    for (float& x : v)
      if (std::isfinite(x) && std::fabs(x) > max_finite) {
        x = std::copysign(max_finite, x);
        ++saturated;
      }
    if (saturated != 0) w.saturated_constants.emplace_back(name, saturated);
    value = graph::Tensor::from_f32(value.shape(), v, dt);
  }
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

graph::Tensor shard_value(const graph::Graph& g, const std::string& tensor, const ShardSpec& spec, std::uint32_t rank) {
  const graph::Tensor& src = spec.value ? *spec.value : g.initializers().at(spec.source);
  const std::vector<double> v = graph::to_logical(src).to_f64();
  const auto n = static_cast<std::int64_t>(v.size());
  std::vector<double> block;
  graph::Shape shape;
  if (spec.axis < 0) {
    const std::int64_t len = padded_length(n, spec.parts) / spec.parts;
    block.assign(static_cast<std::size_t>(len), 0.0);
    for (std::int64_t i = 0; i < len; ++i)
      if (const std::int64_t j = rank * len + i; j < n) block[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(j)];
    shape = {len};
  } else {
    // Block `rank` along `axis` of a row-major tensor: [outer, dim, inner] -> [outer, dim/parts, inner].
    shape = src.shape();
    const auto ax = static_cast<std::size_t>(spec.axis);
    const std::int64_t dim = shape.at(ax), part = dim / spec.parts;
    std::int64_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < ax; ++i) outer *= shape[i];
    for (std::size_t i = ax + 1; i < shape.size(); ++i) inner *= shape[i];
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t d = rank * part; d < (rank + 1) * part; ++d)
        for (std::int64_t i = 0; i < inner; ++i) block.push_back(v[static_cast<std::size_t>((o * dim + d) * inner + i)]);
    shape[ax] = part;
  }
  return graph::Tensor::from_f64(shape, block, g.tensor(tensor).desc.dtype);
}

// Attributes of the model's collective `op` that its algorithm or reduction would ignore, as
// training.allreduce refuses them: `order` unless an addition happens in one place (direct, or a
// hierarchical all-reduce whose inter-server stage is direct), `inter_algorithm` without
// hierarchical, `divisor` without a mean.
void check_ignored_collective_attrs(const Scenario& s, const graph::Op& op, const std::string& what) {
  const std::string algo = op.attr_str("algorithm", "ring");
  const bool hierarchical = algo == "hierarchical";
  if (op.attrs.count("inter_algorithm") && !hierarchical)
    fail_at(s, "model", fmt::format("{}: inter_algorithm only with algorithm hierarchical (it is the stage between servers)", what),
            "algorithm " + algo);
  const std::string inter = op.attr_str("inter_algorithm", "ring");
  if (op.attrs.count("order") && algo != "direct" && !(hierarchical && inter == "direct"))
    fail_at(s, "model", fmt::format("{}: order only with algorithm direct or hierarchical with inter_algorithm direct (ring "
                                    "and tree fix their own order)", what),
            hierarchical ? "inter_algorithm " + inter : "algorithm " + algo);
  if (op.attrs.count("divisor") && op.attr_str("reduction", "mean") != "mean")
    fail_at(s, "model", fmt::format("{}: divisor only with reduction mean", what),
            "reduction " + op.attr_str("reduction", "mean"));
}

// The model's own collectives against the job, at load (a mismatch would stop the run on the
// chips): one chip runs no collective; `ranks`, when given, is the size of the op's communicator
// on every chip; a root (a Broadcast's, a tree's) is a position in it; hierarchical all-reduce
// spans the world; no attribute is one the op would ignore.
void check_model_collectives(const Scenario& s, const graph::Graph& g, std::uint32_t cps) {
  static const std::set<std::string> kTypes = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast"};
  const auto ranks = static_cast<std::uint32_t>(s.ranks);
  for (const graph::Op& op : g.ops()) {
    if (!kTypes.count(op.type)) continue;
    const std::string what = fmt::format("{} '{}'", op.type, op.name);
    if (ranks <= 1) fail_at(s, "ranks", fmt::format("more than one chip for the model's collective {}", what), "1");
    const std::string comm = op.attr_str("comm", "world");
    if (op.type == "AllReduce" && op.attr_str("algorithm", "ring") == "hierarchical" && comm != "world")
      fail_at(s, "model", fmt::format("{}: algorithm hierarchical spans comm world", what), "comm " + comm);
    // Smallest and largest communicator of the op over the chips (a last server may hold fewer).
    std::uint32_t lo = ranks, hi = ranks;
    if (comm == "server" || comm == "peers") {
      lo = ranks;
      hi = 0;
      const std::uint32_t groups = comm == "server" ? (ranks + cps - 1) / cps : std::min(cps, ranks);
      for (std::uint32_t i = 0; i < groups; ++i) {
        const std::uint32_t n = comm == "server" ? std::min(cps, ranks - i * cps) : (ranks - i + cps - 1) / cps;
        lo = std::min(lo, n);
        hi = std::max(hi, n);
      }
    }
    const std::string sizes = lo == hi ? std::to_string(hi) : fmt::format("{} to {}", lo, hi);
    const std::int64_t want = op.attr_int("ranks", 0);  // 0: not fixed
    if (want != 0 && (want != lo || want != hi))
      fail_at(s, "model", fmt::format("{}: ranks equal to the size of its {} communicator in this job ({}; {} ranks, {} "
                                      "chips per server)",
                                      what, comm, sizes, ranks, cps),
              fmt::format("ranks {}", op.attr_int("ranks")));
    check_ignored_collective_attrs(s, op, what);
    // Every collective takes the root: a Broadcast's source, a tree's root (also when an injection
    // forces the tree algorithm on the op).
    if (op.attr_int("root", 0) >= static_cast<std::int64_t>(lo))
      fail_at(s, "model", fmt::format("{}: root a position in its {} communicator (0..{})", what, comm, lo - 1),
              fmt::format("root {}", op.attr_int("root", 0)));
  }
}

Workload build_workload(const Scenario& s, const graph::Graph& model,
                        const std::map<std::string, graph::InitSpec>& input_inits, const chip::ClusterConfig& cluster) {
  graph::ensure_fused_ops_registered();
  Workload w;
  w.input_inits = input_inits;
  graph::Graph g = model;
  g.validate();
  check_model_collectives(s, g, cluster.chips_per_server);
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
  const std::set<std::string> tp_shards = apply_tensor_parallel(w, g, s);
  if (s.mode == RunMode::Training) {
    const TrainingParams tp = add_backward(w, g, s, tp_shards);
    const auto fp32 = s.precision.master_fp32 ? fp32_parameters(w, g, tp) : std::map<std::string, graph::Tensor>{};
    apply_precision(w, g, s);
    add_optimizer(w, g, s, tp, fp32);
  } else {
    apply_precision(w, g, s);
  }
  if (s.ranks > 1) g = lower_hierarchical(g, static_cast<std::uint32_t>(s.ranks), cluster.chips_per_server);
  g.validate();
  for (const auto& in : g.inputs())
    if (!g.initializers().count(in)) w.data_inputs.push_back(in);
  std::sort(w.data_inputs.begin(), w.data_inputs.end());
  w.original = g;
  w.snapshots = graph::build_snapshots(w.original);
  return w;
}

}  // namespace probelab::sim
