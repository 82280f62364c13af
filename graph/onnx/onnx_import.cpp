// ONNX model -> Graph, see onnx_import.h.
#include "graph/onnx/onnx_import.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "graph/onnx/onnx_proto.h"
#include "graph/op_registry.h"

namespace probelab::graph {
namespace {

using onnx_detail::attr_value;
using onnx_detail::constant_value;
using onnx_detail::tensor_from_proto;
using onnx_detail::value_desc;

// Inputs folded into attributes: op type, first opset where they are inputs, (position, attr).
struct FoldRule {
  const char* op;
  std::int64_t min_opset;
  std::vector<std::pair<std::size_t, const char*>> inputs;
};

const FoldRule* fold_rule(const std::string& op, std::int64_t opset) {
  static const std::vector<FoldRule> rules = {
      {"Reshape", 5, {{1, "shape"}}},
      {"Slice", 10, {{1, "starts"}, {2, "ends"}, {3, "axes"}, {4, "steps"}}},
      {"ReduceSum", 13, {{1, "axes"}}},
      {"ReduceMean", 18, {{1, "axes"}}},
      {"Expand", 8, {{1, "shape"}}},
  };
  for (const FoldRule& r : rules)
    if (op == r.op && opset >= r.min_opset) return &r;
  return nullptr;
}

bool is_folded(const FoldRule* rule, std::size_t pos) {
  return rule && std::any_of(rule->inputs.begin(), rule->inputs.end(), [&](const auto& p) { return p.first == pos; });
}

bool default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

std::int64_t default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (default_domain(o.domain())) return o.version();
  return 1;
}

std::vector<std::string> forward_op_types() {
  std::vector<std::string> out;
  for (const auto& [name, def] : OpRegistry::instance().all())
    if (!def.backward) out.push_back(name);
  return out;
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
}

std::vector<std::string> unsupported_ops(const onnx::GraphProto& g) {
  std::set<std::string> bad;
  for (const auto& n : g.node()) {
    if (!default_domain(n.domain())) bad.insert(n.domain() + ":" + n.op_type());
    else if (n.op_type() != "Constant" && !OpRegistry::instance().find(n.op_type())) bad.insert(n.op_type());
  }
  return {bad.begin(), bad.end()};
}

class Importer {
 public:
  Importer(const std::string& path, const onnx::ModelProto& m, const OnnxImportOptions& opts)
      : path_(path), m_(m), opts_(opts), opset_(default_opset(m)) {}

  Graph run() {
    const auto& gp = m_.graph();
    g_.set_name(gp.name().empty() ? std::filesystem::path(path_).stem().string() : gp.name());
    collect_constants();
    scan_uses();
    for (const auto& [name, value] : consts_)
      if (used_.count(name)) g_.add_initializer(name, value, kind_of(name, value));
    for (const auto& v : gp.input()) {
      if (consts_.count(v.name())) continue;
      g_.add_tensor({v.name(), value_desc(v, opts_, fmt::format("graph input '{}'", v.name())), TensorKind::Input});
      g_.mark_input(v.name());
    }
    for (int i = 0; i < gp.node_size(); ++i)
      if (gp.node(i).op_type() != "Constant") add_node(gp.node(i), i);
    for (const auto& v : gp.output()) {
      const TensorInfo* t = g_.find_tensor(v.name());
      if (!t) throw GraphError(fmt::format("graph output '{}' is not produced by any node", v.name()));
      check_declared(v, *t);
      g_.mark_output(v.name());
    }
    g_.validate();
    return std::move(g_);
  }

 private:
  void collect_constants() {
    for (const auto& t : m_.graph().initializer())
      consts_.insert_or_assign(t.name(), tensor_from_proto(t, fmt::format("initializer '{}'", t.name())));
    for (const auto& n : m_.graph().node())
      if (n.op_type() == "Constant" && default_domain(n.domain()) && n.output_size() == 1)
        consts_.insert_or_assign(n.output(0), constant_value(n, fmt::format("Constant node '{}'", n.output(0))));
    for (const auto& [name, value] : opts_.bind_inputs) {
      consts_.insert_or_assign(name, value);
      bound_.insert(name);
    }
  }

  // Tensors read at positions that are not folded into attributes (and graph outputs) are real
  // graph tensors; BatchNormalization statistics are never trainable.
  void scan_uses() {
    for (const auto& n : m_.graph().node()) {
      const FoldRule* rule = fold_rule(n.op_type(), opset_);
      for (int i = 0; i < n.input_size(); ++i)
        if (!is_folded(rule, static_cast<std::size_t>(i)) && !n.input(i).empty()) used_.insert(n.input(i));
      if (n.op_type() == "BatchNormalization")
        for (int i = 3; i < std::min(5, n.input_size()); ++i) frozen_.insert(n.input(i));
    }
    for (const auto& v : m_.graph().output()) used_.insert(v.name());
  }

  TensorKind kind_of(const std::string& name, const Tensor& v) const {
    const bool trainable = opts_.trainable_initializers && is_float(v.dtype()) && !frozen_.count(name) &&
                           !bound_.count(name);
    return trainable ? TensorKind::Weight : TensorKind::Constant;
  }

  std::string op_name(const onnx::NodeProto& n, int index) {
    std::string name = n.name();
    if (name.empty() || taken_.count(name)) name = fmt::format("{}_{}", n.op_type(), index);
    while (taken_.count(name)) name += "_";
    taken_.insert(name);
    return name;
  }

  std::vector<std::int64_t> const_ints(const Op& op, const std::string& tensor, const char* what) {
    auto it = consts_.find(tensor);
    if (it == consts_.end())
      throw GraphError(fmt::format("node '{}' ({}): input '{}' ({}) determines the output shape and must be a "
                                   "constant (initializer, Constant node or bound input)",
                                   op.name, op.type, tensor, what));
    if (it->second.dtype() != DType::I64 && it->second.dtype() != DType::I32)
      throw GraphError(fmt::format("node '{}' ({}): input '{}' ({}) must be int64, got {}", op.name, op.type, tensor,
                                   what, dtype_name(it->second.dtype())));
    std::vector<std::int64_t> v;
    if (it->second.dtype() == DType::I64) {
      auto d = it->second.data<std::int64_t>();
      v.assign(d.begin(), d.end());
    } else {
      auto d = it->second.data<std::int32_t>();
      v.assign(d.begin(), d.end());
    }
    return v;
  }

  void add_node(const onnx::NodeProto& n, int index) {
    Op op;
    op.type = n.op_type();
    op.name = op_name(n, index);
    op.scope = op.name.starts_with('/') ? op.name.substr(1) : op.name;
    const std::string where = fmt::format("node '{}' ({})", op.name, op.type);
    op.inputs.assign(n.input().begin(), n.input().end());
    while (!op.inputs.empty() && op.inputs.back().empty()) op.inputs.pop_back();
    op.outputs.assign(n.output().begin(), n.output().end());
    while (!op.outputs.empty() && op.outputs.back().empty()) op.outputs.pop_back();
    for (std::size_t i = 0; i < op.outputs.size(); ++i)
      if (op.outputs[i].empty()) op.outputs[i] = fmt::format("{}:{}", op.name, i);
    for (const auto& a : n.attribute()) op.attrs[a.name()] = attr_value(a, where);
    adapt_legacy(op, where);
    if (const FoldRule* rule = fold_rule(op.type, opset_)) {
      for (const auto& [pos, attr] : rule->inputs)
        if (pos < op.inputs.size() && !op.inputs[pos].empty()) {
          if (op.attrs.count(attr)) throw GraphError(fmt::format("{}: '{}' given as input and attribute", where, attr));
          op.attrs[attr] = const_ints(op, op.inputs[pos], attr);
        }
      op.inputs.resize(std::min<std::size_t>(op.inputs.size(), 1));
    }
    if ((op.type == "Softmax" || op.type == "LogSoftmax") && opset_ < 13) {
      add_legacy_softmax(std::move(op));
      return;
    }
    g_.add_op(std::move(op));
  }

  // Attributes of early opsets whose meaning the current definitions already cover (or which the
  // importer rewrites); anything else unknown stays and is rejected by validation.
  void adapt_legacy(Op& op, const std::string& where) {
    if (opset_ < 6) op.attrs.erase("consumed_inputs");
    const bool binary = op.type == "Add" || op.type == "Sub" || op.type == "Mul" || op.type == "Div";
    if (opset_ < 7 && binary) {
      const bool bcast = op.attr_int("broadcast", 0) != 0;
      const std::int64_t axis = op.attr_int("axis", -1);
      op.attrs.erase("broadcast");
      op.attrs.erase("axis");
      if (bcast && axis >= 0 && op.inputs.size() == 2) {
        // Legacy broadcast aligns B with A's dims starting at `axis`: append trailing 1s to B.
        const Shape a = g_.tensor(op.inputs[0]).desc.shape;
        Shape b = g_.tensor(op.inputs[1]).desc.shape;
        const auto extra = static_cast<std::int64_t>(a.size()) - axis - static_cast<std::int64_t>(b.size());
        if (extra > 0) {
          b.insert(b.end(), static_cast<std::size_t>(extra), 1);
          Op reshape = helper_op(op, "/broadcast", "Reshape", {op.inputs[1]}, {op.name + "/broadcast:0"},
                                 {{"shape", b}, {"allowzero", std::int64_t{1}}});
          op.inputs[1] = reshape.outputs[0];
          g_.add_op(std::move(reshape));
        }
      }
    }
    if (opset_ < 7 && op.type == "Gemm") op.attrs.erase("broadcast");
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

  // Opset < 13: softmax over the flattened dims [axis, rank) (default axis 1).
  void add_legacy_softmax(Op op) {
    if (op.inputs.size() != 1 || op.outputs.size() != 1)
      throw GraphError(fmt::format("node '{}' ({}): expected one input and one output", op.name, op.type));
    const Shape s = g_.tensor(op.inputs[0]).desc.shape;
    const auto rank = static_cast<std::int64_t>(s.size());
    std::int64_t axis = op.attr_int("axis", 1);
    if (axis < 0) axis += rank;
    if (axis == rank - 1 || rank == 0) {
      op.attrs["axis"] = std::int64_t{-1};
      g_.add_op(std::move(op));
      return;
    }
    Op flat = helper_op(op, "/flatten", "Flatten", op.inputs, {op.name + "/flatten:0"}, {{"axis", axis}});
    Op back = helper_op(op, "/reshape", "Reshape", {op.name + ":0"}, op.outputs,
                        {{"shape", s}, {"allowzero", std::int64_t{1}}});
    op.inputs = flat.outputs;
    op.outputs = back.inputs;
    op.attrs["axis"] = std::int64_t{1};
    g_.add_op(std::move(flat));
    g_.add_op(std::move(op));
    g_.add_op(std::move(back));
  }

  void check_declared(const onnx::ValueInfoProto& v, const TensorInfo& t) const {
    const auto& type = v.type();
    if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return;
    const auto dt = onnx_detail::dtype_of(type.tensor_type().elem_type());
    Shape s;
    for (const auto& d : type.tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;  // symbolic: nothing to compare
      s.push_back(d.dim_value());
    }
    if ((dt && *dt != t.desc.dtype) || s != t.desc.shape)
      throw GraphError(fmt::format("graph output '{}': the model declares {} {}, the imported graph computes {}",
                                   v.name(), onnx_detail::onnx_type_name(type.tensor_type().elem_type()), shape_str(s),
                                   desc_str(t.desc)));
  }

  const std::string& path_;
  const onnx::ModelProto& m_;
  const OnnxImportOptions& opts_;
  std::int64_t opset_;
  Graph g_;
  std::map<std::string, Tensor> consts_;
  std::set<std::string> used_, frozen_, bound_, taken_;
};

}  // namespace

std::vector<std::string> onnx_unsupported_ops(const std::string& path) {
  onnx::ModelProto m;
  load(path, m);
  return unsupported_ops(m.graph());
}

OnnxModelIo onnx_model_io(const std::string& path) {
  onnx::ModelProto m;
  load(path, m);
  OnnxModelIo io;
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  for (const auto& v : m.graph().input())
    if (!inits.count(v.name())) io.inputs.push_back(v.name());
  for (const auto& v : m.graph().output()) io.outputs.push_back(v.name());
  const std::int64_t opset = default_opset(m);
  for (const auto& n : m.graph().node()) {
    io.op_types.insert(n.op_type());
    const FoldRule* rule = fold_rule(n.op_type(), opset);
    for (int i = 0; i < n.input_size(); ++i)
      if (is_folded(rule, static_cast<std::size_t>(i)) &&
          std::find(io.inputs.begin(), io.inputs.end(), n.input(i)) != io.inputs.end())
        io.shape_inputs.insert(n.input(i));
  }
  return io;
}

Graph import_onnx(const std::string& path, const OnnxImportOptions& opts) {
  onnx::ModelProto m;
  load(path, m);
  if (const auto bad = unsupported_ops(m.graph()); !bad.empty())
    throw OnnxUnsupportedError(OnnxUnsupportedError::Kind::OpTypes, bad,
                               fmt::format("{}: unsupported op types: {} (supported: {})", path, fmt::join(bad, ", "),
                                           fmt::join(forward_op_types(), ", ")));
  try {
    return Importer(path, m, opts).run();
  } catch (const OnnxUnsupportedError& e) {
    throw OnnxUnsupportedError(e.kind(), e.items(), fmt::format("{}: {}", path, e.what()));
  } catch (const GraphError& e) {
    throw GraphError(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace probelab::graph
