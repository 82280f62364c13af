// ONNX model -> Graph, see onnx_import.h.
#include "graph/onnx/onnx_import.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "graph/onnx/onnx_fold.h"
#include "graph/onnx/onnx_functions.h"
#include "graph/onnx/onnx_proto.h"
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace probelab::graph {

const std::vector<std::pair<std::string, std::string>>& onnx_importer_ops() {
  static const std::vector<std::pair<std::string, std::string>> ops = {
      {"Constant", "becomes a constant initializer"},
      {"If", "replaced by the branch its condition selects; the condition must be known at import"},
      {"GroupNormalization",
       "opset 18 (scale and bias per group): Reshape to [N, groups, rest], InstanceNormalization with them, Reshape "
       "back (ops with gradients)"}};
  return ops;
}

namespace {

using onnx_detail::attr_value;
using onnx_detail::constant_value;
using onnx_detail::fold_rule;
using onnx_detail::FoldRule;
using onnx_detail::is_folded;
using onnx_detail::tensor_from_proto;
using onnx_detail::value_desc;

bool default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

std::int64_t default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (default_domain(o.domain())) return o.version();
  return 1;
}

// What every reader of a model file checks first: a model with a graph that has outputs, and
// nodes in topological order reading only defined values (ONNX requires both). An empty or
// foreign file parses as an empty ModelProto, so these checks are what rejects it.
void validate_model(const std::string& path, const onnx::ModelProto& m) {
  if (m.ir_version() <= 0 || !m.has_graph()) {
    std::error_code ec;
    const bool empty = std::filesystem::file_size(path, ec) == 0 && !ec;
    throw GraphError(fmt::format("{}: not an ONNX model (no ir_version or no graph{})", path,
                                 empty ? "; the file is empty" : ""));
  }
  const auto& g = m.graph();
  if (g.output_size() == 0) throw GraphError(fmt::format("{}: the ONNX graph declares no outputs", path));
  if (g.node_size() == 0) throw GraphError(fmt::format("{}: the ONNX graph has no nodes", path));
  std::set<std::string> defined;
  for (const auto& v : g.input()) defined.insert(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    for (const auto& in : n.input())
      if (!in.empty() && !defined.count(in))
        throw GraphError(fmt::format("{}: node '{}' ({}, node {}): input '{}' is not a graph input, an initializer "
                                     "or an output of an earlier node",
                                     path, n.name(), n.op_type(), i, in));
    for (const auto& out : n.output())
      if (!out.empty()) defined.insert(out);
  }
  for (const auto& v : g.output())
    if (!defined.count(v.name()))
      throw GraphError(fmt::format("{}: graph output '{}' is not produced by any node", path, v.name()));
}

void load(const std::string& path, onnx::ModelProto& m) {
  onnx_detail::parse_file(path, m);
  validate_model(path, m);
  if (m.functions_size() == 0) return;
  try {
    onnx_detail::inline_local_functions(m);
  } catch (const GraphError& e) {
    throw GraphError(fmt::format("{}: {}", path, e.what()));
  }
  validate_model(path, m);  // the bodies' nodes read what the calls gave them
}

std::string node_label(const onnx::NodeProto& n, int index) {
  return n.name().empty() ? fmt::format("#{}", index) : n.name();
}

bool importer_op(const std::string& type) {
  for (const auto& [t, doc] : onnx_importer_ops())
    if (t == type) return true;
  return false;
}

// Unsupported op type -> the nodes using it, in the graph and its subgraphs (If branches).
void collect_unsupported(const onnx::GraphProto& g, std::map<std::string, std::vector<std::string>>& bad) {
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (!default_domain(n.domain())) bad[n.domain() + ":" + n.op_type()].push_back(node_label(n, i));
    else if (!importer_op(n.op_type()) && !OpRegistry::instance().find(n.op_type()))
      bad[n.op_type()].push_back(node_label(n, i));
    for (const auto& a : n.attribute())
      if (a.type() == onnx::AttributeProto_AttributeType_GRAPH) collect_unsupported(a.g(), bad);
  }
}

std::map<std::string, std::vector<std::string>> unsupported_nodes(const onnx::GraphProto& g) {
  std::map<std::string, std::vector<std::string>> bad;
  collect_unsupported(g, bad);
  return bad;
}

std::string describe_unsupported(const std::map<std::string, std::vector<std::string>>& bad) {
  std::vector<std::string> parts;
  for (const auto& [type, nodes] : bad) {
    std::vector<std::string> shown(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(nodes.size(), 5)));
    parts.push_back(fmt::format("{} ({} node{}: {}{})", type, nodes.size(), nodes.size() == 1 ? "" : "s",
                                fmt::join(shown, ", "), nodes.size() > shown.size() ? ", ..." : ""));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

[[noreturn]] void unsupported_type(int code, const std::string& where) {
  const std::string name = onnx_detail::onnx_type_name(code);
  throw OnnxUnsupportedError(OnnxUnsupportedError::Kind::ValueTypes, {name},
                             fmt::format("{}: element type {} is not supported", where, name));
}

class Importer {
 public:
  Importer(const std::string& path, const onnx::ModelProto& m, const OnnxImportOptions& opts)
      : path_(path), base_dir_(std::filesystem::path(path).parent_path().string()), m_(m), opts_(opts),
        opset_(default_opset(m)) {}

  Graph run() {
    const auto& gp = m_.graph();
    if (opset_ > kMaxOnnxOpset)
      throw GraphError(fmt::format("the model uses ai.onnx opset {}, newer than the newest this importer implements ({})",
                                   opset_, kMaxOnnxOpset));
    g_.set_name(gp.name().empty() ? std::filesystem::path(path_).stem().string() : gp.name());
    check_dims();
    scan_frozen(gp);
    if (opset_ < 1) throw GraphError(fmt::format("the model imports ai.onnx opset {} (the first opset is 1)", opset_));
    for (const auto& t : gp.initializer()) {
      if (inits_.count(t.name()))  // which of the two values a reader takes is not defined
        throw GraphError(fmt::format("initializer '{}' is given twice", t.name()));
      consts_.insert_or_assign(t.name(), tensor_from_proto(t, fmt::format("initializer '{}'", t.name()), base_dir_));
      inits_.insert(t.name());
    }
    for (const std::string& name : opts_.trainable_scalars) {
      auto it = consts_.find(name);
      if (!inits_.count(name) || !is_float(it->second.dtype()) || !it->second.shape().empty())
        throw GraphError(fmt::format("trainable scalar '{}' is not a rank-0 float initializer of the model{}", name,
                                     inits_.count(name) ? fmt::format(" (it is {} {})", dtype_name(it->second.dtype()),
                                                                      shape_str(it->second.shape()))
                                                        : std::string()));
    }
    for (const auto& bound : opts_.bind_inputs) {
      const auto& [name, value] = bound;
      const std::string& wanted = name;  // a named reference: clang before C++20 P1091 cannot capture a binding
      if (std::none_of(gp.input().begin(), gp.input().end(), [&](const auto& v) { return v.name() == wanted; }))
        throw GraphError(fmt::format("bound input '{}' is not a graph input of the model", name));
      consts_.insert_or_assign(name, value);
      bound_.insert(name);
    }
    for (const auto& v : gp.input()) {
      if (auto it = consts_.find(v.name()); it != consts_.end()) {
        check_initializer_shape(v, it->second);
        continue;
      }
      g_.add_tensor({v.name(), value_desc(v, opts_, fmt::format("graph input '{}'", v.name())), TensorKind::Input});
      g_.mark_input(v.name());
    }
    add_nodes(gp);
    for (const auto& v : gp.output()) {
      if (!g_.find_tensor(v.name()) && consts_.count(v.name())) emit_constant_output(v.name());
      const TensorInfo* t = g_.find_tensor(v.name());
      if (!t) throw GraphError(fmt::format("graph output '{}' is not produced by any node", v.name()));
      check_declared(v, *t);
      g_.mark_output(v.name());
    }
    g_.validate();
    return std::move(g_);
  }

 private:
  // Every bound dimension must be a symbolic dimension of the model or an INPUT:AXIS naming an
  // unnamed axis (or one of that fixed size) of a graph input, with a value >= 1.
  void check_dims() const {
    std::set<std::string> names;
    for (const auto& v : m_.graph().input())
      for (const std::string& d : onnx_detail::value_dim_params(v)) names.insert(d);
    for (const auto& [name, value] : opts_.dim_params) {
      if (value < 1) throw GraphError(fmt::format("dimension '{}' = {} must be >= 1", name, value));
      const auto axis = onnx_detail::input_axis_key(m_.graph(), name);
      if (names.count(name)) {
        if (axis && axis->unnamed)
          throw GraphError(fmt::format("dimension '{}' is ambiguous: the model has a symbolic dimension of that name "
                                       "and axis {} of input '{}' has neither a size nor a name",
                                       name, axis->axis, axis->input));
        continue;
      }
      if (!axis)
        throw GraphError(fmt::format("dimension '{}' is not a symbolic dimension of the model (it has: {}) nor "
                                     "INPUT:AXIS of a graph input (inputs: {})",
                                     name, names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")),
                                     fmt::join(onnx_detail::free_inputs(m_.graph()), ", ")));
      check_axis_binding(name, value, *axis);
    }
  }

  static void check_axis_binding(const std::string& key, std::int64_t value, const onnx_detail::InputAxis& a) {
    const std::string what = fmt::format("dimension '{}' (axis {} of input '{}')", key, a.axis, a.input);
    if (a.axis >= a.rank)
      throw GraphError(fmt::format("{}: the input has rank {}, so the axis must be in [0, {})", what, a.rank, a.rank));
    if (!a.name.empty())
      throw GraphError(fmt::format("{}: that axis is the symbolic dimension '{}'; bind it by name (dims: {{{}: N}})",
                                   what, a.name, a.name));
    if (a.size >= 0 && a.size != value)
      throw GraphError(fmt::format("{}: that axis has the fixed size {}, the binding gives {}", what, a.size, value));
  }

  void check_initializer_shape(const onnx::ValueInfoProto& v, const Tensor& t) const {
    if (bound_.count(v.name()) || !v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    Shape s;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0) return;  // a dimension without a (known) size
      s.push_back(d.dim_value());
    }
    if (s != t.shape())
      throw GraphError(fmt::format("initializer '{}' holds {} but the graph input of that name declares {}", v.name(),
                                   shape_str(t.shape()), shape_str(s)));
  }

  // Initializers that are statistics or quantization parameters, never trainable weights (so a
  // node reading only them and constants folds: DequantizeLinear of an int8 weight).
  void scan_frozen(const onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      std::vector<int> pos;
      if (n.op_type() == "BatchNormalization") pos = {3, 4};
      if (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear") pos = {1, 2};
      if (n.op_type() == "QLinearConv" || n.op_type() == "QLinearMatMul") pos = {1, 2, 4, 5, 6, 7};
      for (int i : pos)
        if (i < n.input_size()) frozen_.insert(n.input(i));
    }
  }

  // A trainable weight: a float initializer with at least one dimension. A rank-0 one is a
  // constant: exporters write scalar constants that way (ReLU6's Clip bounds, an epsilon, a Pow
  // exponent, a mask's fill value) once constant folding or a simplifier has turned Constant nodes
  // into initializers, while a framework's parameters have dimensions (a scalar one is named in
  // trainable_scalars).
  bool is_weight(const std::string& name) const {
    auto it = consts_.find(name);
    return it != consts_.end() && inits_.count(name) && opts_.trainable_initializers && is_float(it->second.dtype()) &&
           (!it->second.shape().empty() || opts_.trainable_scalars.count(name)) && !frozen_.count(name) &&
           !bound_.count(name);
  }
  // A value the importer knows (so a node reading only such values is evaluated at import).
  bool known(const std::string& name) const { return consts_.count(name) && !is_weight(name); }

  void add_nodes(const onnx::GraphProto& gp) {
    for (int i = 0; i < gp.node_size(); ++i) {
      const auto& n = gp.node(i);
      if (n.op_type() == "Constant" && default_domain(n.domain())) {
        if (n.output_size() != 1) throw GraphError(fmt::format("Constant node '{}' must have one output", n.name()));
        consts_.insert_or_assign(n.output(0), constant_value(n, fmt::format("Constant node '{}'", n.output(0))));
        continue;
      }
      add_node(n, i);
    }
  }

  std::string op_name(const onnx::NodeProto& n, int index) {
    std::string name = n.name();
    if (name.empty() || taken_.count(name)) name = fmt::format("{}_{}", n.op_type(), index);
    while (taken_.count(name)) name += "_";
    taken_.insert(name);
    return name;
  }

  // Attributes whose ONNX type the registry has no AttrValue for, or which name element types.
  void convert_attrs(const onnx::NodeProto& n, Op& op, const std::string& where) {
    for (const auto& a : n.attribute()) {
      if (op.type == "ConstantOfShape" && a.name() == "value" && a.type() == onnx::AttributeProto_AttributeType_TENSOR) {
        const Tensor v = tensor_from_proto(a.t(), where + " attribute 'value'", base_dir_);
        if (v.numel() != 1) throw GraphError(fmt::format("{}: attribute 'value' must hold one element", where));
        op.attrs["value"] = v.to_f64()[0];
        op.attrs["dtype"] = onnx_code(v.dtype());
        continue;
      }
      if (a.type() == onnx::AttributeProto_AttributeType_GRAPH) continue;  // If branches, read by inline_if
      op.attrs[a.name()] = attr_value(a, where);
    }
    if (op.type == "ConstantOfShape" && !op.has_attr("value")) {  // ONNX: a float32 zero when absent
      op.attrs["value"] = 0.0;
      op.attrs["dtype"] = onnx_code(DType::F32);
    }
    for (const char* key : {"to", "dtype"})
      if ((op.type == "Cast" || op.type == "EyeLike") && op.has_attr(key)) {
        const std::int64_t code = op.attr_int(key);
        if (!dtype_from_onnx_code(code)) unsupported_type(static_cast<int>(code), where);
      }
  }

  void add_node(const onnx::NodeProto& n, int index) {
    Op op;
    op.type = n.op_type();
    op.name = op_name(n, index);
    op.scope = op.name.starts_with('/') ? op.name.substr(1) : op.name;
    const std::string where = fmt::format("node '{}' ({})", op.name, op.type);
    op.inputs.assign(n.input().begin(), n.input().end());
    op.outputs.assign(n.output().begin(), n.output().end());
    while (!op.outputs.empty() && op.outputs.back().empty()) op.outputs.pop_back();
    for (std::size_t i = 0; i < op.outputs.size(); ++i)
      if (op.outputs[i].empty()) op.outputs[i] = fmt::format("{}:{}", op.name, i);
    convert_attrs(n, op, where);
    if (op.type == "If") {
      inline_if(n, op, where);
      return;
    }
    if (op.type == "Range" && !op.inputs.empty() && consts_.count(op.inputs[0]))
      op.attrs["dtype"] = onnx_code(consts_.at(op.inputs[0]).dtype());
    onnx_detail::check_input_opsets(op, opset_, where);
    fold_inputs(op, where);
    while (!op.inputs.empty() && op.inputs.back().empty()) op.inputs.pop_back();
    adapt_legacy(op, where);
    if (op.type == "GroupNormalization") {
      add_group_norm(std::move(op), where);
      return;
    }
    if ((op.type == "Softmax" || op.type == "LogSoftmax" || op.type == "Hardmax") && opset_ < 13) {
      add_legacy_softmax(std::move(op));
      return;
    }
    if (try_fold(op, where)) return;
    check_constant_indices(op, where);
    add_op(std::move(op));
  }

  // Constant indices of Gather, GatherElements, ScatterElements, GatherND and ScatterND against the
  // data's dimensions: one out of range is the model's error, named at import rather than when the
  // op runs.
  void check_constant_indices(const Op& op, const std::string& where) const {
    const bool nd = op.type == "GatherND" || op.type == "ScatterND";
    if (!nd && op.type != "Gather" && op.type != "GatherElements" && op.type != "ScatterElements") return;
    if (op.inputs.size() < 2) return;
    const auto it = consts_.find(op.inputs[1]);
    const TensorInfo* data = g_.find_tensor(op.inputs[0]);
    if (it == consts_.end() || !data || !is_integer(it->second.dtype())) return;
    const auto& shape = data->desc.shape;
    const auto rank = static_cast<std::int64_t>(shape.size());
    auto fail = [&](double v, std::int64_t dim) {
      throw GraphError(fmt::format("{}: index {} of the constant indices '{}' is out of range for dimension {} (size {}) "
                                   "of '{}'",
                                   where, static_cast<std::int64_t>(v), op.inputs[1], dim,
                                   shape[static_cast<std::size_t>(dim)], op.inputs[0]));
    };
    if (nd) {  // each index tuple (the last dimension, k entries) names dimensions b .. b+k-1
      const auto& ishape = it->second.desc().shape;
      const std::int64_t b = op.has_attr("batch_dims") ? op.attr_int("batch_dims") : 0;
      const std::int64_t k = ishape.empty() ? 0 : ishape.back();
      if (k <= 0 || b < 0 || b + k > rank) return;  // the op's own checks name these
      const std::vector<double> v = it->second.to_f64();
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::int64_t dim = b + static_cast<std::int64_t>(i) % k;
        const auto n = static_cast<double>(shape[static_cast<std::size_t>(dim)]);
        if (v[i] < -n || v[i] >= n) fail(v[i], dim);
      }
      return;
    }
    std::int64_t axis = op.has_attr("axis") ? op.attr_int("axis") : 0;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return;  // the op's own check names a bad axis
    const auto n = static_cast<double>(shape[static_cast<std::size_t>(axis)]);
    for (const double v : it->second.to_f64())
      if (v < -n || v >= n) fail(v, axis);
  }

  // Moves the inputs the fold rule names into attributes.
  void fold_inputs(Op& op, const std::string& where) {
    const FoldRule* rule = fold_rule(op.type, opset_);
    if (!rule) return;
    for (const auto& f : rule->inputs) {
      if (f.pos >= op.inputs.size() || op.inputs[f.pos].empty()) continue;
      const std::string& t = op.inputs[f.pos];
      auto it = consts_.find(t);
      if (it == consts_.end())
        throw GraphError(fmt::format("{}: input '{}' ({}) must be a constant (initializer, Constant node, bound "
                                     "input or a value computable at import)",
                                     where, t, f.attr));
      if (op.attrs.count(f.attr)) throw GraphError(fmt::format("{}: '{}' given as input and attribute", where, f.attr));
      try {
        op.attrs[f.attr] = onnx_detail::folded_attr(it->second, f.scalar);
      } catch (const GraphError& e) {
        throw GraphError(fmt::format("{}: input '{}' ({}) {}", where, t, f.attr, e.what()));
      }
    }
    std::vector<std::string> kept;
    for (std::size_t i = 0; i < op.inputs.size(); ++i)
      if (!is_folded(rule, i)) kept.push_back(op.inputs[i]);
    op.inputs = std::move(kept);
  }

  // Evaluates `op` at import when every input is known (or the op needs only shapes).
  bool try_fold(const Op& op, const std::string& where) {
    const OpDef* def = OpRegistry::instance().find(op.type);
    if (!def || !def->reference) return false;
    std::vector<const Tensor*> values;
    std::vector<TensorDesc> descs;
    for (const std::string& in : op.inputs) {
      if (in.empty()) {
        values.push_back(nullptr);
        descs.emplace_back();
        continue;
      }
      if (known(in)) {
        values.push_back(&consts_.at(in));
        descs.push_back(consts_.at(in).desc());
        continue;
      }
      if (!def->shape_only) return false;
      const TensorDesc d = desc_of(in, where);
      values.push_back(nullptr);
      descs.push_back(d);
    }
    std::optional<std::vector<Tensor>> out;
    try {
      out = onnx_detail::evaluate_node(op, values, descs);
    } catch (const GraphError& e) {
      throw GraphError(fmt::format("{} (evaluated at import): {}", where, e.what()));
    }
    if (!out) return false;
    for (std::size_t i = 0; i < out->size() && i < op.outputs.size(); ++i)
      consts_.insert_or_assign(op.outputs[i], std::move((*out)[i]));
    g_.add_import_folded(fmt::format("{} ({})", op.name, op.type));
    return true;
  }

  TensorDesc desc_of(const std::string& tensor, const std::string& where) const {
    if (auto it = consts_.find(tensor); it != consts_.end()) return it->second.desc();
    const TensorInfo* t = g_.find_tensor(tensor);
    if (!t) throw GraphError(fmt::format("{}: input '{}' is not produced by any earlier node", where, tensor));
    return t->desc;
  }

  // Declares the known values an op reads as initializers, then adds the op.
  void add_op(Op op) {
    for (const std::string& in : op.inputs) {
      if (in.empty() || g_.find_tensor(in) || !consts_.count(in)) continue;
      const Tensor& v = consts_.at(in);
      g_.add_initializer(in, v, is_weight(in) ? TensorKind::Weight : TensorKind::Constant);
    }
    g_.add_op(std::move(op));
  }

  void emit_constant_output(const std::string& out) {
    const std::string src = out + ":const";
    g_.add_initializer(src, consts_.at(out), TensorKind::Constant);
    Op id;
    id.name = out + "/const";
    id.type = "Identity";
    id.scope = id.name;
    id.inputs = {src};
    id.outputs = {out};
    g_.add_op(std::move(id));
  }

  // If with a condition known at import: the taken branch's nodes join the graph; its outputs
  // become the If's outputs.
  void inline_if(const onnx::NodeProto& n, const Op& op, const std::string& where) {
    if (op.inputs.empty() || !consts_.count(op.inputs[0]))
      throw GraphError(fmt::format("{}: the condition '{}' must be known at import (a constant or a bound input)",
                                   where, op.inputs.empty() ? std::string() : op.inputs[0]));
    const Tensor& c = consts_.at(op.inputs[0]);
    if (c.numel() != 1) throw GraphError(fmt::format("{}: the condition must hold one element", where));
    const bool cond = c.to_f64()[0] != 0;
    const onnx::GraphProto* branch = nullptr;
    for (const auto& a : n.attribute())
      if (a.name() == (cond ? "then_branch" : "else_branch")) branch = &a.g();
    if (!branch) throw GraphError(fmt::format("{}: no {} attribute", where, cond ? "then_branch" : "else_branch"));
    if (const auto bad = unsupported_nodes(*branch); !bad.empty())
      throw OnnxUnsupportedError(OnnxUnsupportedError::Kind::OpTypes, keys(bad),
                                 fmt::format("{}: unsupported op types in the {} branch: {}", where,
                                             cond ? "then" : "else", describe_unsupported(bad)));
    if (static_cast<std::size_t>(branch->output_size()) != op.outputs.size())
      throw GraphError(fmt::format("{}: the branch has {} outputs, the If {}", where, branch->output_size(),
                                   op.outputs.size()));
    for (const auto& t : branch->initializer())
      consts_.insert_or_assign(t.name(), tensor_from_proto(t, fmt::format("initializer '{}'", t.name()), base_dir_));
    scan_frozen(*branch);
    add_nodes(*branch);
    for (std::size_t i = 0; i < op.outputs.size(); ++i) {
      const std::string& from = branch->output(static_cast<int>(i)).name();
      if (known(from)) {
        consts_.insert_or_assign(op.outputs[i], consts_.at(from));
        continue;
      }
      Op id;
      id.name = fmt::format("{}/out{}", op.name, i);
      id.type = "Identity";
      id.scope = op.scope;
      id.inputs = {from};
      id.outputs = {op.outputs[i]};
      add_op(std::move(id));
    }
    g_.add_import_folded(fmt::format("{} (If: {} branch)", op.name, cond ? "then" : "else"));
  }

  static std::vector<std::string> keys(const std::map<std::string, std::vector<std::string>>& m) {
    std::vector<std::string> out;
    for (const auto& [k, v] : m) out.push_back(k);
    return out;
  }

  // Attributes of early opsets whose meaning the current definitions already cover (or which the
  // importer rewrites); anything else unknown stays and is rejected by validation.
  void adapt_legacy(Op& op, const std::string& where) {
    // Opsets 19 and 20 change, for the element types and modes this importer reads, only names:
    // `saturate` (19) acts on float8 results alone, GridSample's modes (20) are linear and cubic.
    if (opset_ >= 19 && (op.type == "Cast" || op.type == "CastLike" || op.type == "QuantizeLinear"))
      op.attrs.erase("saturate");
    if (opset_ >= 20 && op.type == "GridSample" && op.has_attr("mode")) {
      const std::string m = op.attr_str("mode");
      if (m == "linear") op.attrs["mode"] = std::string("bilinear");
      if (m == "cubic") op.attrs["mode"] = std::string("bicubic");
    }
    if (opset_ < 6) op.attrs.erase("consumed_inputs");
    const bool binary = op.type == "Add" || op.type == "Sub" || op.type == "Mul" || op.type == "Div";
    if (opset_ < 7 && binary) {
      const bool bcast = op.attr_int("broadcast", 0) != 0;
      const std::int64_t axis = op.attr_int("axis", -1);
      op.attrs.erase("broadcast");
      op.attrs.erase("axis");
      if (bcast && axis >= 0 && op.inputs.size() == 2) {
        // Legacy broadcast aligns B with A's dims starting at `axis`: append trailing 1s to B.
        const Shape a = desc_of(op.inputs[0], where).shape;
        Shape b = desc_of(op.inputs[1], where).shape;
        const auto extra = static_cast<std::int64_t>(a.size()) - axis - static_cast<std::int64_t>(b.size());
        if (extra > 0) {
          b.insert(b.end(), static_cast<std::size_t>(extra), 1);
          Op reshape = helper_op(op, "/broadcast", "Reshape", {op.inputs[1]}, {op.name + "/broadcast:0"},
                                 {{"shape", b}, {"allowzero", std::int64_t{1}}});
          op.inputs[1] = reshape.outputs[0];
          if (!try_fold(reshape, where)) add_op(std::move(reshape));
        }
      }
    }
    if (opset_ < 7 && op.type == "Gemm") op.attrs.erase("broadcast");
    if (opset_ < 4 && op.type == "Concat" && !op.has_attr("axis")) op.attrs["axis"] = std::int64_t{1};  // optional until 4
    if (opset_ < 2 && op.type == "Pad" && op.has_attr("paddings")) {  // Pad-1 names its pads `paddings`
      op.attrs["pads"] = op.attrs.at("paddings");
      op.attrs.erase("paddings");
    }
    if (op.type == "Upsample" || (op.type == "Resize" && opset_ < 11)) {
      // Opset <= 10 resizing: output coordinate x reads input x / scale, nearest rounds down.
      op.type = "Resize";
      op.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
      op.attrs["nearest_mode"] = std::string("floor");
      if (op.attr_str("mode", "nearest") == "bilinear") op.attrs["mode"] = std::string("linear");
    }
    if (opset_ < 7 && op.type == "PRelu" && op.inputs.size() == 2) {
      // Opset 6 PRelu: a 1-D slope of C values applies per channel (dimension 1) of X.
      const Shape x = desc_of(op.inputs[0], where).shape;
      const Shape slope = desc_of(op.inputs[1], where).shape;
      if (slope.size() == 1 && x.size() > 2 && slope[0] == x[1] && slope[0] != 1) {
        Shape b{slope[0]};
        b.insert(b.end(), x.size() - 2, 1);
        Op reshape = helper_op(op, "/channel_slope", "Reshape", {op.inputs[1]}, {op.name + "/channel_slope:0"},
                               {{"shape", b}, {"allowzero", std::int64_t{1}}});
        op.inputs[1] = reshape.outputs[0];
        if (!try_fold(reshape, where)) add_op(std::move(reshape));
      }
    }
    if (op.type == "BatchNormalization" && opset_ < 14) {
      if (op.attr_int("is_test", 1) == 0 || op.outputs.size() > 1)
        throw GraphError(fmt::format("{}: training-mode BatchNormalization before opset 14 is not supported", where));
      if (op.attr_int("spatial", 1) == 0)
        throw GraphError(fmt::format("{}: BatchNormalization with spatial=0 is not supported", where));
      op.attrs.erase("is_test");
      op.attrs.erase("spatial");
    }
  }

  static Op helper_op(const Op& base, const std::string& suffix, std::string type, std::vector<std::string> inputs,
                      std::vector<std::string> outputs, Attrs attrs) {
    Op o;
    o.name = base.name + suffix;
    o.type = std::move(type);
    o.scope = base.scope;
    o.inputs = std::move(inputs);
    o.outputs = std::move(outputs);
    o.attrs = std::move(attrs);
    return o;
  }

  // GroupNormalization (opset 18: scale and bias of num_groups values, as exporters write GroupNorm
  // from opset 18 on) as PyTorch exported it before: the groups as channels of an
  // InstanceNormalization, whose per-channel scale and bias are then the per-group ones.
  void add_group_norm(Op op, const std::string& where) {
    if (op.inputs.size() != 3 || op.outputs.size() != 1)
      throw GraphError(fmt::format("{}: expected inputs X, scale, bias and one output", where));
    const Shape x = desc_of(op.inputs[0], where).shape;
    const std::int64_t groups = op.attr_int("num_groups", 0);
    if (x.size() < 2 || groups < 1 || x[1] % groups != 0)
      throw GraphError(fmt::format("{}: num_groups {} must be >= 1 and divide the {} channels of X {}", where, groups,
                                   x.size() < 2 ? 0 : x[1], shape_str(x)));
    for (int i : {1, 2})
      if (const Shape sb = desc_of(op.inputs[static_cast<std::size_t>(i)], where).shape; sb != Shape{groups})
        throw GraphError(fmt::format("{}: {} has shape {}, opset 18 GroupNormalization takes one value per group ([{}])",
                                     where, i == 1 ? "scale" : "bias", shape_str(sb), groups));
    const std::int64_t rest = numel(x) / std::max<std::int64_t>(1, x[0] * groups);
    Op in = helper_op(op, "/groups", "Reshape", {op.inputs[0]}, {op.name + "/groups:0"},
                      {{"shape", Shape{x[0], groups, rest}}, {"allowzero", std::int64_t{1}}});
    Op back = helper_op(op, "/ungroup", "Reshape", {op.name + ":0"}, op.outputs, {{"shape", x}, {"allowzero", std::int64_t{1}}});
    Op norm = helper_op(op, "", "InstanceNormalization", {in.outputs[0], op.inputs[1], op.inputs[2]}, back.inputs,
                        {{"epsilon", op.attr_float("epsilon", 1e-5)}});
    for (Op* o : {&in, &norm, &back})
      if (!try_fold(*o, where)) add_op(std::move(*o));
  }

  // Opset < 13 Softmax, LogSoftmax and Hardmax: over the flattened dims [axis, rank) (default axis 1).
  void add_legacy_softmax(Op op) {
    const std::string where = fmt::format("node '{}' ({})", op.name, op.type);
    if (op.inputs.size() != 1 || op.outputs.size() != 1)
      throw GraphError(fmt::format("{}: expected one input and one output", where));
    const Shape s = desc_of(op.inputs[0], where).shape;
    const auto rank = static_cast<std::int64_t>(s.size());
    std::int64_t axis = op.attr_int("axis", 1);
    if (axis < 0) axis += rank;
    if (axis == rank - 1 || rank == 0) {
      op.attrs["axis"] = std::int64_t{-1};
      if (!try_fold(op, where)) add_op(std::move(op));
      return;
    }
    Op flat = helper_op(op, "/flatten", "Flatten", op.inputs, {op.name + "/flatten:0"}, {{"axis", axis}});
    Op back = helper_op(op, "/reshape", "Reshape", {op.name + ":0"}, op.outputs,
                        {{"shape", s}, {"allowzero", std::int64_t{1}}});
    op.inputs = flat.outputs;
    op.outputs = back.inputs;
    op.attrs["axis"] = std::int64_t{1};
    for (Op* o : {&flat, &op, &back})
      if (!try_fold(*o, where)) add_op(std::move(*o));
  }

  void check_declared(const onnx::ValueInfoProto& v, const TensorInfo& t) const {
    const auto& type = v.type();
    if (!type.has_tensor_type()) return;
    const int code = type.tensor_type().elem_type();
    const auto dt = onnx_detail::dtype_of(code);
    if (!dt && code != 0) unsupported_type(code, fmt::format("graph output '{}'", v.name()));
    if (!type.tensor_type().has_shape()) {
      if (dt && *dt != t.desc.dtype) mismatch(v, t, "(no shape)");
      return;
    }
    // A symbolic dimension bound by the scenario (OnnxImportOptions::dim_params) must have its
    // value; an unbound or unnamed one matches any size.
    Shape s;  // -1: any size
    std::vector<std::string> shown;
    for (const auto& d : type.tensor_type().shape().dim()) {
      if (d.has_dim_value() && d.dim_value() >= 0) {
        s.push_back(d.dim_value());
        shown.push_back(std::to_string(d.dim_value()));
      } else if (auto it = opts_.dim_params.find(d.dim_param()); d.has_dim_param() && it != opts_.dim_params.end()) {
        s.push_back(it->second);
        shown.push_back(fmt::format("{}={}", d.dim_param(), it->second));
      } else {
        s.push_back(-1);
        shown.push_back(d.has_dim_param() ? d.dim_param() : "?");
      }
    }
    bool same = s.size() == t.desc.shape.size();
    for (std::size_t i = 0; same && i < s.size(); ++i) same = s[i] < 0 || s[i] == t.desc.shape[i];
    if ((dt && *dt != t.desc.dtype) || !same) mismatch(v, t, fmt::format("[{}]", fmt::join(shown, ", ")));
  }

  [[noreturn]] void mismatch(const onnx::ValueInfoProto& v, const TensorInfo& t, const std::string& shape) const {
    throw GraphError(fmt::format("graph output '{}': the model declares {} {}, the imported graph computes {}", v.name(),
                                 onnx_detail::onnx_type_name(v.type().tensor_type().elem_type()), shape, desc_str(t.desc)));
  }

  const std::string& path_;
  std::string base_dir_;
  const onnx::ModelProto& m_;
  const OnnxImportOptions& opts_;
  std::int64_t opset_;
  Graph g_;
  std::map<std::string, Tensor> consts_;
  std::set<std::string> inits_, frozen_, bound_, taken_;
};

}  // namespace

std::vector<std::string> onnx_unsupported_ops(const std::string& path) {
  onnx::ModelProto m;
  load(path, m);
  std::vector<std::string> out;
  for (const auto& [type, nodes] : unsupported_nodes(m.graph())) out.push_back(type);
  return out;
}

OnnxModelIo onnx_model_io(const std::string& path) {
  onnx::ModelProto m;
  load(path, m);
  OnnxModelIo io;
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  for (const auto& v : m.graph().input()) {
    if (inits.count(v.name())) continue;
    io.inputs.push_back(v.name());
    for (const std::string& d : onnx_detail::value_dim_params(v)) io.dim_params.insert(d);
  }
  for (const auto& v : m.graph().output()) io.outputs.push_back(v.name());
  const std::int64_t opset = default_opset(m);
  // Tensors whose values must be known at import: inputs at folded positions, and (walking the
  // nodes backwards) every input of a node computing such a tensor, except the data inputs of
  // shape-only ops, whose values are never read.
  std::set<std::string> needed;
  for (const auto& n : m.graph().node()) {
    io.op_types.insert(n.op_type());
    const FoldRule* rule = fold_rule(n.op_type(), opset);
    for (int i = 0; i < n.input_size(); ++i)
      if (is_folded(rule, static_cast<std::size_t>(i))) needed.insert(n.input(i));
  }
  for (int k = m.graph().node_size(); k-- > 0;) {
    const auto& n = m.graph().node(k);
    if (std::none_of(n.output().begin(), n.output().end(), [&](const std::string& o) { return needed.count(o) != 0; }))
      continue;
    const OpDef* def = OpRegistry::instance().find(n.op_type());
    if (def && def->shape_only) continue;
    for (const std::string& in : n.input()) needed.insert(in);
  }
  for (const std::string& in : io.inputs)
    if (needed.count(in)) io.shape_inputs.insert(in);
  return io;
}

Graph import_onnx(const std::string& path, const OnnxImportOptions& opts) {
  onnx::ModelProto m;
  load(path, m);
  if (const auto bad = unsupported_nodes(m.graph()); !bad.empty()) {
    std::vector<std::string> types;
    for (const auto& [type, nodes] : bad) types.push_back(type);
    throw OnnxUnsupportedError(OnnxUnsupportedError::Kind::OpTypes, types,
                               fmt::format("{}: unsupported op types: {} (`probelab list ops` lists the supported "
                                           "ones)",
                                           path, describe_unsupported(bad)));
  }
  try {
    return Importer(path, m, opts).run();
  } catch (const OnnxUnsupportedError& e) {
    throw OnnxUnsupportedError(e.kind(), e.items(), fmt::format("{}: {}", path, e.what()));
  } catch (const GraphError& e) {
    throw GraphError(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace probelab::graph
