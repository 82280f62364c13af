// The op registry and the CPU reference executors.
#include "graph/op_registry.h"

#include <fmt/format.h>

#include "graph/format.h"
#include "graph/fused_ops.h"

namespace probelab::graph {
namespace {

DType float_dtype(RefPrecision p) { return p == RefPrecision::F32 ? DType::F32 : DType::F64; }

// The tensor in logical layout and, for floats, in the reference precision; `store` keeps a
// converted copy alive.
const Tensor* as_reference(const Tensor* t, RefPrecision p, Tensor& store) {
  if (t->desc().format != Format::ND && t->desc().format != Format::NCHW) {
    Tensor logical = to_logical(*t);
    store = std::move(logical);
    t = &store;
  }
  if (is_float(t->dtype()) && t->dtype() != float_dtype(p)) {
    Tensor converted = p == RefPrecision::F32 ? Tensor::from_f32(t->shape(), t->to_f32(), DType::F32)
                                              : Tensor::from_f64(t->shape(), t->to_f64(), DType::F64);
    store = std::move(converted);
    t = &store;
  }
  return t;
}

}  // namespace

const AttrSpec* OpDef::attr(const std::string& name) const {
  for (const AttrSpec& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

OpRegistry& OpRegistry::instance() {
  static OpRegistry* reg = [] {
    static OpRegistry r;
    register_builtin_ops(r);
    return &r;
  }();
  return *reg;
}

void OpRegistry::add(OpDef def) {
  auto taken = [&](const std::string& n) { return index_.count(n) != 0; };
  if (def.type.empty()) throw GraphError("op registry: an op definition needs a type name");
  if (taken(def.type)) throw GraphError(fmt::format("op registry: op type '{}' is registered twice", def.type));
  for (const std::string& a : def.aliases)
    if (taken(a) || a == def.type)
      throw GraphError(fmt::format("op registry: alias '{}' of '{}' is already taken", a, def.type));
  for (const std::string& a : def.aliases) aliases_.emplace(a, def.type);
  std::string type = def.type;
  const OpDef& added = defs_.emplace(std::move(type), std::move(def)).first->second;
  index_.emplace(added.type, &added);
  for (const std::string& a : added.aliases) index_.emplace(a, &added);
}

const OpDef* OpRegistry::find(const std::string& type) const {
  const auto it = index_.find(type);
  return it == index_.end() ? nullptr : it->second;
}

const OpDef& OpRegistry::get(const std::string& type) const {
  if (const OpDef* d = find(type)) return *d;
  throw GraphError(fmt::format("unknown op type '{}' (known: {})", type, fmt::join(all_names(), ", ")));
}

std::vector<std::string> OpRegistry::types() const {
  std::vector<std::string> out;
  for (const auto& [name, def] : defs_) out.push_back(name);
  return out;
}

std::vector<std::string> OpRegistry::all_names() const {
  std::vector<std::string> out = types();
  for (const auto& [alias, canonical] : aliases_) out.push_back(alias);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Tensor> run_reference(const Op& op, std::span<const Tensor* const> inputs, RefPrecision p) {
  const OpDef& def = OpRegistry::instance().get(op.type);
  if (!def.reference) fail(op, "op type '{}' has no reference kernel", def.type);
  if (inputs.size() != op.inputs.size())
    fail(op, "run_reference got {} input tensors for {} declared inputs", inputs.size(), op.inputs.size());
  std::vector<Tensor> store(inputs.size());
  std::vector<const Tensor*> ptrs(inputs.size(), nullptr);
  std::vector<TensorDesc> descs(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      if (!op.inputs[i].empty()) fail(op, "input {} '{}' has no value", i, op.inputs[i]);
      continue;
    }
    ptrs[i] = as_reference(inputs[i], p, store[i]);
    descs[i] = ptrs[i]->desc();
  }
  if (!def.infer) fail(op, "op type '{}' has no shape inference", def.type);
  std::vector<TensorDesc> out_descs = def.infer(op, descs);
  if (out_descs.size() != op.outputs.size())
    fail(op, "has {} outputs, shape inference gives {}", op.outputs.size(), out_descs.size());
  std::vector<Tensor> outs;
  outs.reserve(out_descs.size());
  for (TensorDesc d : out_descs) {
    if (is_float(d.dtype)) d.dtype = float_dtype(p);
    if (d.format != Format::NCHW) d.format = Format::ND;
    outs.push_back(def.reference_overwrites ? Tensor::for_overwrite(d) : Tensor(d));
  }
  def.reference(op, ptrs, outs, p);
  return outs;
}

namespace {

using Values = std::map<std::string, Tensor>;

void run_op(const Op& op, Values& values, const Values* outer, RefPrecision p) {
  auto lookup = [&](const std::string& name) -> const Tensor* {
    if (auto it = values.find(name); it != values.end()) return &it->second;
    if (outer)
      if (auto it = outer->find(name); it != outer->end()) return &it->second;
    fail(op, "input '{}' has no value (not fed, not an initializer, not produced earlier)", name);
  };
  std::vector<const Tensor*> in;
  for (const std::string& name : op.inputs) in.push_back(name.empty() ? nullptr : lookup(name));
  const OpDef* def = OpRegistry::instance().find(op.type);
  if ((!def || !def->reference) && !op.fused_body.empty()) {
    // Decompose: body ops read the fused op's inputs and write its outputs; intermediates stay local.
    Values local;
    for (const Op& inner : op.fused_body) run_op(inner, local, outer ? outer : &values, p);
    for (const std::string& out : op.outputs) {
      auto it = local.find(out);
      if (it == local.end()) fail(op, "fused body does not produce output '{}'", out);
      values[out] = std::move(it->second);
    }
    return;
  }
  std::vector<Tensor> outs = run_reference(op, in, p);
  for (std::size_t i = 0; i < outs.size(); ++i) values[op.outputs[i]] = std::move(outs[i]);
}

}  // namespace

std::map<std::string, Tensor> run_graph_reference(const Graph& g, const std::map<std::string, Tensor>& feeds,
                                                  RefPrecision p) {
  Values values;
  for (const auto& [name, t] : g.initializers()) {
    Tensor store;
    const Tensor* r = as_reference(&t, p, store);
    values[name] = r == &t ? t : std::move(store);
  }
  for (const auto& [name, t] : feeds) {
    Tensor store;
    const Tensor* r = as_reference(&t, p, store);
    values[name] = r == &t ? t : std::move(store);
  }
  for (const std::string& in : g.inputs())
    if (!values.count(in)) throw GraphError(fmt::format("{}: no value fed for graph input '{}'", g.label(), in));
  for (std::uint32_t id : g.topo_order()) run_op(g.op(id), values, nullptr, p);
  return values;
}

}  // namespace probelab::graph
