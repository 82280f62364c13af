#include "graph/onnx/onnx_functions.h"

#include <map>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "graph/graph.h"

namespace probelab::graph::onnx_detail {
namespace {

bool default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

std::int64_t default_opset(const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>& imports) {
  for (const auto& o : imports)
    if (default_domain(o.domain())) return o.version();
  return -1;
}

class Inliner {
 public:
  explicit Inliner(const onnx::ModelProto& m) : model_opset_(default_opset(m.opset_import())) {
    for (const auto& f : m.functions()) functions_[{f.domain(), f.name()}] = &f;
  }
  bool any() const { return !functions_.empty(); }

  void graph(onnx::GraphProto& g) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    for (onnx::NodeProto& n : *g.mutable_node()) node(std::move(n), out, 0);
    g.mutable_node()->Swap(&out);
  }

 private:
  void node(onnx::NodeProto n, google::protobuf::RepeatedPtrField<onnx::NodeProto>& out, int depth) {
    const auto it = functions_.find({n.domain(), n.op_type()});
    if (it == functions_.end()) {
      for (auto& a : *n.mutable_attribute())
        if (a.type() == onnx::AttributeProto_AttributeType_GRAPH) graph(*a.mutable_g());
      *out.Add() = std::move(n);
      return;
    }
    expand(n, *it->second, out, depth);
  }

  void expand(const onnx::NodeProto& call, const onnx::FunctionProto& f, google::protobuf::RepeatedPtrField<onnx::NodeProto>& out,
              int depth) {
    const std::string label = fmt::format("function {}{}{} called by node '{}'", f.domain(), f.domain().empty() ? "" : ":",
                                          f.name(), call.name());
    if (depth > 32) throw GraphError(fmt::format("{}: calls nest deeper than 32 (a recursion?)", label));
    if (const std::int64_t v = default_opset(f.opset_import()); v >= 0 && model_opset_ >= 0 && v != model_opset_)
      throw GraphError(fmt::format("{}: its body imports opset {} of the default domain, the model {}", label, v,
                                   model_opset_));
    const std::string prefix = (call.name().empty() ? fmt::format("{}#{}", f.name(), ++anonymous_) : call.name()) + "/";
    std::map<std::string, std::string> names;  // formal -> actual
    for (int i = 0; i < f.input_size(); ++i) names[f.input(i)] = i < call.input_size() ? call.input(i) : "";
    for (int i = 0; i < f.output_size(); ++i)
      names[f.output(i)] = i < call.output_size() && !call.output(i).empty() ? call.output(i) : prefix + f.output(i);
    auto rename = [&](const std::string& v) {
      if (v.empty()) return v;
      const auto n = names.find(v);
      return n != names.end() ? n->second : prefix + v;
    };
    std::map<std::string, const onnx::AttributeProto*> given;
    for (const auto& a : call.attribute()) given[a.name()] = &a;
    for (int k = 0; k < f.node_size(); ++k) {
      onnx::NodeProto b = f.node(k);
      b.set_name(prefix + (b.name().empty() ? fmt::format("#{}", k) : b.name()));
      for (auto& in : *b.mutable_input()) in = rename(in);
      for (auto& o : *b.mutable_output()) o = rename(o);
      google::protobuf::RepeatedPtrField<onnx::AttributeProto> attrs;
      for (const auto& a : b.attribute()) {
        if (a.type() == onnx::AttributeProto_AttributeType_GRAPH || a.type() == onnx::AttributeProto_AttributeType_GRAPHS)
          throw GraphError(fmt::format("{}: body node '{}' ({}) holds a subgraph, which inlining does not support", label,
                                       f.node(k).name(), f.node(k).op_type()));
        if (a.ref_attr_name().empty()) {
          *attrs.Add() = a;
        } else if (const auto g = given.find(a.ref_attr_name()); g != given.end()) {
          onnx::AttributeProto& v = *attrs.Add() = *g->second;
          v.set_name(a.name());
        }
      }
      b.mutable_attribute()->Swap(&attrs);
      node(std::move(b), out, depth + 1);
    }
  }

  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions_;
  std::int64_t model_opset_;
  int anonymous_ = 0;
};

}  // namespace

void inline_local_functions(onnx::ModelProto& m) {
  Inliner inliner(m);
  if (!inliner.any()) return;
  inliner.graph(*m.mutable_graph());
  m.clear_functions();
}

}  // namespace probelab::graph::onnx_detail
