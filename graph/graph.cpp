// Graph construction, lookup and topological order.
#include "graph/graph.h"

#include <algorithm>
#include <queue>
#include <set>

#include <fmt/format.h>

#include "graph/op_registry.h"

namespace probelab::graph {

std::string op_label(const Op& op) {
  return op.name.empty() ? op.type : fmt::format("{} '{}'", op.type, op.name);
}

std::string_view tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::Input: return "input";
    case TensorKind::Weight: return "weight";
    case TensorKind::Constant: return "constant";
    case TensorKind::Activation: return "activation";
    case TensorKind::Gradient: return "gradient";
    case TensorKind::State: return "state";
    case TensorKind::Output: return "output";
  }
  return "invalid";
}

std::string Graph::label() const { return name_.empty() ? std::string("graph") : fmt::format("graph '{}'", name_); }

void Graph::add_tensor(TensorInfo t) {
  if (t.name.empty()) throw GraphError(fmt::format("{}: a tensor needs a non-empty name", label()));
  if (tensors_.count(t.name))
    throw GraphError(fmt::format("{}: duplicate tensor name '{}'", label(), t.name));
  std::string name = t.name;
  tensors_.emplace(std::move(name), std::move(t));
}

void Graph::add_initializer(const std::string& name, Tensor value, TensorKind kind) {
  if (initializers_.count(name))
    throw GraphError(fmt::format("{}: duplicate initializer '{}'", label(), name));
  TensorDesc d{value.dtype(), value.shape(), Format::ND};
  if (value.desc().format == Format::NCHW) d.format = Format::NCHW;
  if (value.desc().format != Format::ND && value.desc().format != Format::NCHW)
    throw GraphError(fmt::format("{}: initializer '{}' must be stored in ND/NCHW, got {}", label(), name,
                                 format_name(value.desc().format)));
  if (auto it = tensors_.find(name); it != tensors_.end()) {
    TensorInfo& t = it->second;
    if (producer_.count(name))
      throw GraphError(fmt::format("{}: initializer '{}' is also produced by op '{}'", label(), name,
                                   ops_[producer_.at(name)].name));
    if (t.desc.dtype != d.dtype || t.desc.shape != d.shape)
      throw GraphError(fmt::format("{}: initializer '{}' is {} but the tensor is declared {}", label(), name,
                                   desc_str(d), desc_str(t.desc)));
    t.kind = kind;
  } else {
    add_tensor({name, d, kind});
  }
  initializers_.emplace(name, std::move(value));
}

Op& Graph::add_op(Op op) {
  if (op.name.empty()) throw GraphError(fmt::format("{}: an op of type '{}' has no name", label(), op.type));
  if (op_index_.count(op.name)) throw GraphError(fmt::format("{}: duplicate op name '{}'", label(), op.name));
  for (std::size_t i = 0; i < op.outputs.size(); ++i) {
    const std::string& out = op.outputs[i];
    if (out.empty()) throw GraphError(fmt::format("{}: op '{}' output {} has no name", label(), op.name, i));
    if (auto p = producer_.find(out); p != producer_.end())
      throw GraphError(fmt::format("{}: op '{}' writes tensor '{}', already produced by op '{}'", label(), op.name,
                                   out, ops_[p->second].name));
    if (initializers_.count(out) || std::count(inputs_.begin(), inputs_.end(), out))
      throw GraphError(fmt::format("{}: op '{}' writes tensor '{}', which is a graph input or initializer",
                                   label(), op.name, out));
    if (std::count(op.outputs.begin(), op.outputs.begin() + static_cast<std::ptrdiff_t>(i), out))
      throw GraphError(fmt::format("{}: op '{}' writes tensor '{}' twice", label(), op.name, out));
  }
  op.id = static_cast<std::uint32_t>(ops_.size());
  const TensorKind kind = op.direction == Direction::Backward ? TensorKind::Gradient : TensorKind::Activation;
  std::vector<TensorDesc> inferred = try_infer(op);
  for (std::size_t i = 0; i < op.outputs.size(); ++i) {
    const std::string& out = op.outputs[i];
    producer_[out] = op.id;
    const bool is_output = std::count(outputs_.begin(), outputs_.end(), out) != 0;
    auto it = tensors_.find(out);
    if (it == tensors_.end()) {
      TensorInfo t{out, i < inferred.size() ? inferred[i] : TensorDesc{}, is_output ? TensorKind::Output : kind};
      tensors_.emplace(out, std::move(t));
    } else if (is_output) {
      it->second.kind = TensorKind::Output;
    }
  }
  op_index_[op.name] = op.id;
  ops_.push_back(std::move(op));
  return ops_.back();
}

std::vector<TensorDesc> Graph::try_infer(const Op& op) const {
  const OpDef* def = OpRegistry::instance().find(op.type);
  if (!def) return {};  // validate() reports unknown types
  check_signature(op, *def);
  if (!def->infer) return {};
  std::vector<TensorDesc> in;
  for (const std::string& name : op.inputs) {
    if (name.empty()) {
      in.emplace_back();
      continue;
    }
    auto it = tensors_.find(name);
    if (it == tensors_.end() || (!producer_.count(name) && it->second.kind == TensorKind::Activation &&
                                 !initializers_.count(name)))
      return {};  // not known yet; infer_shapes() fills the descs later
    in.push_back(it->second.desc);
  }
  std::vector<TensorDesc> out;
  try {
    out = def->infer(op, in);
  } catch (const GraphError& e) {
    throw GraphError(fmt::format("{}: {}", label(), e.what()));
  }
  if (out.size() != op.outputs.size())
    throw GraphError(fmt::format("{}: op '{}' ({}) has {} outputs, its type defines {}", label(), op.name, op.type,
                                 op.outputs.size(), out.size()));
  return out;
}

void Graph::mark_output(const std::string& tensor) {
  if (std::count(outputs_.begin(), outputs_.end(), tensor)) return;
  outputs_.push_back(tensor);
  if (auto it = tensors_.find(tensor); it != tensors_.end() && it->second.kind == TensorKind::Activation)
    it->second.kind = TensorKind::Output;
}

void Graph::mark_input(const std::string& tensor) {
  auto it = tensors_.find(tensor);
  if (it == tensors_.end())
    throw GraphError(fmt::format("{}: input '{}' must be declared (add_tensor) before mark_input", label(), tensor));
  if (producer_.count(tensor))
    throw GraphError(fmt::format("{}: input '{}' is produced by op '{}'", label(), tensor,
                                 ops_[producer_.at(tensor)].name));
  if (std::count(inputs_.begin(), inputs_.end(), tensor)) return;
  it->second.kind = TensorKind::Input;
  inputs_.push_back(tensor);
}

void Graph::reindex() {
  op_index_.clear();
  producer_.clear();
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    Op& op = ops_[i];
    op.id = static_cast<std::uint32_t>(i);
    if (!op_index_.emplace(op.name, op.id).second)
      throw GraphError(fmt::format("{}: duplicate op name '{}'", label(), op.name));
    for (const std::string& out : op.outputs)
      if (auto [it, fresh] = producer_.emplace(out, op.id); !fresh)
        throw GraphError(fmt::format("{}: tensor '{}' is produced by ops '{}' and '{}'", label(), out,
                                     ops_[it->second].name, op.name));
  }
}

const Op& Graph::op(std::uint32_t id) const {
  if (id >= ops_.size())
    throw GraphError(fmt::format("{}: no op with id {} ({} ops)", label(), id, ops_.size()));
  return ops_[id];
}

const Op* Graph::find_op(const std::string& name) const {
  auto it = op_index_.find(name);
  return it == op_index_.end() ? nullptr : &ops_[it->second];
}

const TensorInfo* Graph::find_tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorInfo& Graph::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw GraphError(fmt::format("{}: no tensor named '{}'", label(), name));
  return it->second;
}

TensorInfo& Graph::tensor(const std::string& name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw GraphError(fmt::format("{}: no tensor named '{}'", label(), name));
  return it->second;
}

const Op* Graph::producer(const std::string& tensor) const {
  auto it = producer_.find(tensor);
  return it == producer_.end() || it->second >= ops_.size() ? nullptr : &ops_[it->second];
}

std::vector<const Op*> Graph::consumers(const std::string& tensor) const {
  std::vector<const Op*> out;
  for (const Op& op : ops_)
    if (std::find(op.inputs.begin(), op.inputs.end(), tensor) != op.inputs.end()) out.push_back(&op);
  return out;
}

std::vector<std::uint32_t> Graph::topo_order() const {
  const std::size_t n = ops_.size();
  std::vector<std::set<std::uint32_t>> succ(n), pred(n);
  for (const Op& op : ops_)
    for (const std::string& in : op.inputs)
      if (auto it = producer_.find(in); !in.empty() && it != producer_.end()) {
        succ[it->second].insert(op.id);
        pred[op.id].insert(it->second);
      }
  std::vector<std::size_t> indeg(n);
  std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready;
  for (std::uint32_t i = 0; i < n; ++i)
    if ((indeg[i] = pred[i].size()) == 0) ready.push(i);
  std::vector<std::uint32_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const std::uint32_t id = ready.top();
    ready.pop();
    order.push_back(id);
    for (std::uint32_t s : succ[id])
      if (--indeg[s] == 0) ready.push(s);
  }
  if (order.size() == n) return order;
  // Walk predecessors among the unscheduled ops from the smallest one until an op repeats: a cycle.
  std::uint32_t cur = 0;
  while (indeg[cur] == 0) ++cur;
  std::vector<std::uint32_t> path;
  std::vector<int> pos(n, -1);
  while (pos[cur] < 0) {
    pos[cur] = static_cast<int>(path.size());
    path.push_back(cur);
    for (std::uint32_t p : pred[cur])
      if (indeg[p] != 0) {
        cur = p;
        break;
      }
  }
  std::vector<std::string> names;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {  // deepest predecessor first: producer order
    names.push_back(ops_[*it].name);
    if (*it == cur) break;
  }
  std::rotate(names.begin(), std::min_element(names.begin(), names.end()), names.end());
  names.push_back(names.front());
  throw GraphError(fmt::format("{}: cycle through ops {}", label(), fmt::join(names, " -> ")));
}

}  // namespace probelab::graph
