// Constant folding and dead-op elimination, see passes.h.
#include <set>

#include "graph/op_registry.h"
#include "graph/passes.h"

namespace probelab::graph {
namespace {

// Evaluates `op` on constant inputs; nullopt when it has no reference kernel or fails.
std::optional<std::vector<Tensor>> evaluate(const Graph& g, const Op& op, const std::map<std::string, Tensor>& consts) {
  const OpDef* def = OpRegistry::instance().find(op.type);
  if (!def || !def->reference) return std::nullopt;
  std::vector<const Tensor*> in;
  for (const std::string& name : op.inputs) in.push_back(name.empty() ? nullptr : &consts.at(name));
  std::vector<Tensor> out;
  try {
    out = run_reference(op, in, RefPrecision::F32);
  } catch (const GraphError&) {
    return std::nullopt;
  }
  if (out.size() != op.outputs.size()) return std::nullopt;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const TensorDesc& decl = g.tensor(op.outputs[i]).desc;
    if (out[i].shape() != decl.shape) return std::nullopt;
    if (out[i].dtype() != decl.dtype) {
      if (!is_float(decl.dtype) || !is_float(out[i].dtype())) return std::nullopt;
      const auto v = out[i].to_f32();
      out[i] = Tensor::from_f32(decl.shape, v, decl.dtype);
    }
  }
  return out;
}

}  // namespace

Graph optimize_graph(const Graph& g, const OptimizeOptions& opts, OptimizeLog* log) {
  const std::vector<std::uint32_t> order = g.topo_order();
  std::set<std::string> outputs(g.outputs().begin(), g.outputs().end());
  std::vector<bool> keep(g.ops().size(), true);
  std::map<std::string, Tensor> consts, folded_values;
  OptimizeLog local;

  if (opts.fold_constants) {
    for (const auto& [name, value] : g.initializers())
      if (g.tensor(name).kind == TensorKind::Constant) consts.emplace(name, value);
    for (std::uint32_t id : order) {
      const Op& op = g.ops()[id];
      if (op.direction != Direction::Forward || op.inputs.empty()) continue;
      bool foldable = true;
      for (const std::string& in : op.inputs) foldable &= in.empty() || consts.count(in) != 0;
      for (const std::string& out : op.outputs) foldable &= outputs.count(out) == 0;
      if (!foldable) continue;
      auto values = evaluate(g, op, consts);
      if (!values) continue;
      for (std::size_t i = 0; i < values->size(); ++i) {
        consts[op.outputs[i]] = (*values)[i];
        folded_values[op.outputs[i]] = std::move((*values)[i]);
      }
      keep[id] = false;
      local.folded.push_back(op.name);
    }
  }

  if (opts.eliminate_dead) {
    std::set<std::string> live(outputs);
    for (const Op& op : g.ops())
      if (op.direction == Direction::Optimizer) live.insert(op.outputs.begin(), op.outputs.end());
    if (!live.empty()) {
      std::vector<bool> reaches(g.ops().size(), false);
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const Op& op = g.ops()[*it];
        if (!keep[*it]) continue;
        for (const std::string& out : op.outputs) reaches[*it] = reaches[*it] || live.count(out) != 0;
        if (!reaches[*it]) continue;
        for (const std::string& in : op.inputs) live.insert(in);
      }
      for (const Op& op : g.ops())
        if (keep[op.id] && !reaches[op.id]) {
          keep[op.id] = false;
          local.dead.push_back(op.name);
        }
    }
  }

  std::vector<Op> ops;
  for (const Op& op : g.ops())
    if (keep[op.id]) ops.push_back(op);
  // Folded values still read by a kept op become Constant initializers; the others vanish.
  std::map<std::string, Tensor> extra;
  for (const Op& op : ops)
    for (const std::string& in : op.inputs)
      if (auto it = folded_values.find(in); it != folded_values.end()) extra.emplace(in, it->second);
  if (log) *log = std::move(local);
  return rebuild_graph(g, std::move(ops), extra);
}

}  // namespace probelab::graph
