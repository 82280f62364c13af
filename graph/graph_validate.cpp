// Shape inference over a graph and full validation.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace probelab::graph {
namespace {

std::string op_where(const Op& op) { return fmt::format("op '{}' ({})", op.name, op.type); }

const OpDef& def_of(const Graph& g, const Op& op) {
  const OpDef* def = OpRegistry::instance().find(op.type);
  if (!def) {
    const auto types = OpRegistry::instance().types();
    throw GraphError(fmt::format("{}: {} has unknown op type '{}' (known: {})", g.label(), op_where(op), op.type,
                                 fmt::join(types, ", ")));
  }
  return *def;
}

// Runs the type's inference on the declared input descs; errors name the op.
std::vector<TensorDesc> infer_op(const Graph& g, const Op& op) {
  const OpDef& def = def_of(g, op);
  if (!def.infer) throw GraphError(fmt::format("{}: op type '{}' has no shape inference", g.label(), op.type));
  std::vector<TensorDesc> in;
  for (const std::string& name : op.inputs) in.push_back(name.empty() ? TensorDesc{} : g.tensor(name).desc);
  std::vector<TensorDesc> out;
  try {
    out = def.infer(op, in);
  } catch (const GraphError& e) {
    const std::string msg = e.what();
    if (msg.find("'" + op.name + "'") != std::string::npos) throw;
    throw GraphError(fmt::format("{}: {}: {}", g.label(), op_where(op), msg));
  }
  if (out.size() != op.outputs.size())
    throw GraphError(fmt::format("{}: {} has {} outputs, shape inference gives {}", g.label(), op_where(op),
                                 op.outputs.size(), out.size()));
  return out;
}

// Expected value type of an attribute, from its spec's default; ints pass where floats are
// expected and an empty list matches every list type.
bool type_ok(const AttrValue& v, const AttrValue& expected) {
  if (v.index() == expected.index()) return true;
  if (std::holds_alternative<std::int64_t>(v) && std::holds_alternative<double>(expected)) return true;
  if (std::holds_alternative<std::vector<std::int64_t>>(v) && std::holds_alternative<std::vector<double>>(expected))
    return true;
  const bool empty_list = std::visit(
      [](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double> || std::is_same_v<T, std::string>)
          return false;
        else
          return x.empty();
      },
      v);
  return empty_list && expected.index() >= 3;
}

void check_attrs(const Graph& g, const Op& op, const OpDef& def) {
  for (const AttrSpec& spec : def.attrs) {
    auto it = op.attrs.find(spec.name);
    if (it == op.attrs.end()) {
      if (spec.required)
        throw GraphError(fmt::format("{}: {} is missing required attribute '{}'{}", g.label(), op_where(op),
                                     spec.name, spec.doc.empty() ? "" : " (" + spec.doc + ")"));
    } else if (spec.default_value && !type_ok(it->second, *spec.default_value)) {
      throw GraphError(fmt::format("{}: {} attribute '{}' has type {}, expected {}", g.label(), op_where(op), spec.name,
                                   attr_value_type_name(it->second), attr_value_type_name(*spec.default_value)));
    }
  }
  for (const auto& [key, value] : op.attrs)
    if (!def.attr(key)) {
      std::vector<std::string> known;
      for (const AttrSpec& s : def.attrs) known.push_back(s.name);
      throw GraphError(fmt::format("{}: {} has unknown attribute '{}' (known: {})", g.label(), op_where(op), key,
                                   known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
    }
}

void check_counts(const Graph& g, const Op& op, const OpDef& def) {
  const int n_in = static_cast<int>(op.inputs.size()), n_out = static_cast<int>(op.outputs.size());
  if (n_in < def.min_inputs || (def.max_inputs >= 0 && n_in > def.max_inputs))
    throw GraphError(fmt::format("{}: {} has {} inputs, expected {}", g.label(), op_where(op), n_in,
                                 def.min_inputs == def.max_inputs ? fmt::format("{}", def.min_inputs)
                                 : def.max_inputs < 0 ? fmt::format("at least {}", def.min_inputs)
                                                      : fmt::format("{} to {}", def.min_inputs, def.max_inputs)));
  if (!def.outputs_ok(n_out))
    throw GraphError(fmt::format("{}: {} has {} outputs, expected {}", g.label(), op_where(op), n_out,
                                 def.num_outputs >= 0   ? fmt::format("{}", def.num_outputs)
                                 : def.max_outputs < 0 ? fmt::format("at least {}", std::max(def.min_outputs, 1))
                                                       : fmt::format("{} to {}", std::max(def.min_outputs, 1),
                                                                     def.max_outputs)));
}

void check_structure(const Graph& g, const Op& op) {
  const int n_in = static_cast<int>(op.inputs.size());
  const OpDef& def = def_of(g, op);
  for (int i = 0; i < n_in; ++i) {
    const std::string& in = op.inputs[static_cast<std::size_t>(i)];
    if (in.empty()) {
      if (i < def.min_inputs)
        throw GraphError(fmt::format("{}: {} input {} is required but empty", g.label(), op_where(op), i));
      continue;
    }
    const TensorInfo* t = g.find_tensor(in);
    if (!t)
      throw GraphError(fmt::format("{}: {} input {} '{}' is not a declared tensor", g.label(), op_where(op), i, in));
    if (!g.producer(in) && !g.initializers().count(in) &&
        std::find(g.inputs().begin(), g.inputs().end(), in) == g.inputs().end())
      throw GraphError(fmt::format("{}: {} input {} '{}' is dangling: no op produces it and it is neither a graph "
                                   "input nor an initializer", g.label(), op_where(op), i, in));
  }
  for (const std::string& out : op.outputs) {
    const Op* p = g.producer(out);
    if (!g.find_tensor(out) || !p)
      throw GraphError(fmt::format("{}: {} output '{}' is not registered (edit ops() only with reindex())", g.label(),
                                   op_where(op), out));
    if (p->id != op.id)
      throw GraphError(fmt::format("{}: tensor '{}' is produced by both op '{}' and op '{}'", g.label(), out, p->name,
                                   op.name));
  }
}

}  // namespace

void Graph::check_signature(const Op& op, const OpDef& def) const {
  check_counts(*this, op, def);
  check_attrs(*this, op, def);
}

void Graph::infer_shapes() {
  for (std::uint32_t id : topo_order()) {
    const Op& op = ops_[id];
    const auto out = infer_op(*this, op);
    for (std::size_t i = 0; i < out.size(); ++i) tensor(op.outputs[i]).desc = out[i];
  }
}

void Graph::validate() const {
  // names and indexes
  std::set<std::string> op_names;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (ops_[i].id != i)
      throw GraphError(fmt::format("{}: op '{}' has id {} at index {} (call reindex())", label(), ops_[i].name,
                                   ops_[i].id, i));
    if (!op_names.insert(ops_[i].name).second)
      throw GraphError(fmt::format("{}: duplicate op name '{}'", label(), ops_[i].name));
    if (auto it = op_index_.find(ops_[i].name); it == op_index_.end() || it->second != i)
      throw GraphError(fmt::format("{}: op '{}' is not indexed (edit ops() only with reindex())", label(),
                                   ops_[i].name));
  }
  bool stale = op_index_.size() != ops_.size();
  for (const auto& [tensor_name, id] : producer_)
    stale = stale || id >= ops_.size() ||
            std::find(ops_[id].outputs.begin(), ops_[id].outputs.end(), tensor_name) == ops_[id].outputs.end();
  if (stale) throw GraphError(fmt::format("{}: ops() was edited without reindex()", label()));
  for (const auto& [name, value] : initializers_) {
    const TensorInfo* t = find_tensor(name);
    if (!t) throw GraphError(fmt::format("{}: initializer '{}' has no tensor declaration", label(), name));
    if (t->desc.dtype != value.dtype() || t->desc.shape != value.shape())
      throw GraphError(fmt::format("{}: initializer '{}' holds {} but the tensor is declared {}", label(), name,
                                   desc_str(value.desc()), desc_str(t->desc)));
  }
  for (const std::string& in : inputs_)
    if (!find_tensor(in)) throw GraphError(fmt::format("{}: graph input '{}' is not declared", label(), in));
  for (const std::string& out : outputs_) {
    if (!find_tensor(out)) throw GraphError(fmt::format("{}: graph output '{}' is not declared", label(), out));
    if (!producer(out) && !initializers_.count(out) && std::find(inputs_.begin(), inputs_.end(), out) == inputs_.end())
      throw GraphError(fmt::format("{}: graph output '{}' is dangling: nothing produces it", label(), out));
  }
  for (const Op& op : ops_) {
    const OpDef& def = def_of(*this, op);
    check_signature(op, def);
    check_structure(*this, op);
  }
  // cycles, then dtype/shape agreement with inference in dependency order
  for (std::uint32_t id : topo_order()) {
    const Op& op = ops_[id];
    const auto out = infer_op(*this, op);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const TensorDesc& decl = tensor(op.outputs[i]).desc;
      if (decl.dtype != out[i].dtype || decl.shape != out[i].shape)
        throw GraphError(fmt::format("{}: {} output {} '{}' is declared {} but shape inference gives {}", label(),
                                     op_where(op), i, op.outputs[i], desc_str(decl), desc_str(out[i])));
    }
  }
}

}  // namespace probelab::graph
