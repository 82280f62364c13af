// Definitions of the fused op types, see fused_ops.h.
#include "graph/fused_ops.h"

#include <fmt/format.h>

namespace probelab::graph {
namespace {

void check_body(const Op& op, std::size_t n_inputs) {
  if (op.fused_body.empty())
    throw GraphError(fmt::format("op '{}' ({}): fused op has an empty fused_body", op.name, op.type));
  if (n_inputs != op.inputs.size())
    throw GraphError(fmt::format("op '{}' ({}): {} input values for {} inputs", op.name, op.type, n_inputs,
                                 op.inputs.size()));
}

template <class V>
const V& lookup(const Op& op, const Op& inner, const std::map<std::string, V>& values, const std::string& name) {
  auto it = values.find(name);
  if (it == values.end())
    throw GraphError(fmt::format("op '{}' ({}): body op '{}' reads '{}', which is neither an input of the fused "
                                 "op nor written by an earlier body op", op.name, op.type, inner.name, name));
  return it->second;
}

template <class V>
const V& result(const Op& op, const std::map<std::string, V>& values, const std::string& name) {
  auto it = values.find(name);
  if (it == values.end())
    throw GraphError(fmt::format("op '{}' ({}): output '{}' is not written by its fused_body", op.name, op.type, name));
  return it->second;
}

OpDef fused_def(std::string type, std::string doc, std::vector<std::string> inputs) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.num_outputs = -1;
  d.min_outputs = 1;
  d.max_outputs = -1;
  d.input_names = std::move(inputs);
  d.output_names = {"Y"};
  d.infer = infer_fused_body;
  d.reference = [](const Op& op, std::span<const Tensor* const> in, std::span<Tensor> out, RefPrecision p) {
    auto values = run_fused_body(op, in, p);
    for (std::size_t i = 0; i < out.size() && i < values.size(); ++i) out[i] = std::move(values[i]);
  };
  return d;
}

}  // namespace

std::vector<TensorDesc> infer_fused_body(const Op& op, std::span<const TensorDesc> inputs) {
  check_body(op, inputs.size());
  std::map<std::string, TensorDesc> descs;
  for (std::size_t i = 0; i < inputs.size(); ++i) descs[op.inputs[i]] = inputs[i];
  for (const Op& inner : op.fused_body) {
    const OpDef& def = OpRegistry::instance().get(inner.type);
    std::vector<TensorDesc> in;
    for (const std::string& name : inner.inputs) in.push_back(name.empty() ? TensorDesc{} : lookup(op, inner, descs, name));
    const auto out = def.infer(inner, in);
    for (std::size_t i = 0; i < out.size() && i < inner.outputs.size(); ++i) descs[inner.outputs[i]] = out[i];
  }
  std::vector<TensorDesc> out;
  for (const std::string& name : op.outputs) out.push_back(result(op, descs, name));
  return out;
}

std::vector<Tensor> run_fused_body(const Op& op, std::span<const Tensor* const> inputs, RefPrecision p) {
  check_body(op, inputs.size());
  std::map<std::string, Tensor> values;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) values[op.inputs[i]] = *inputs[i];
  for (const Op& inner : op.fused_body) {
    std::vector<const Tensor*> in;
    for (const std::string& name : inner.inputs) in.push_back(name.empty() ? nullptr : &lookup(op, inner, values, name));
    auto out = run_reference(inner, in, p);
    for (std::size_t i = 0; i < out.size() && i < inner.outputs.size(); ++i) values[inner.outputs[i]] = std::move(out[i]);
  }
  std::vector<Tensor> out;
  for (const std::string& name : op.outputs) out.push_back(result(op, values, name));
  return out;
}

void register_fused_ops(OpRegistry& r) {
  r.add(fused_def("FusedMatMulBiasGelu", "Gelu(MatMul(A, B) + bias), fused; runs its fused_body", {"A", "B", "bias"}));
  r.add(fused_def("FusedLayerNormRelu", "Relu(LayerNormalization(X, scale, bias)), fused; runs its fused_body",
                  {"X", "scale", "bias?"}));
  r.add(fused_def("FusedConvBnRelu",
                  "Relu(BatchNormalization(Conv(X, W, B), scale, bias, mean, var)) in inference mode, fused; runs "
                  "its fused_body",
                  {"X", "W", "B?", "scale", "bias", "mean", "var"}));
}

void ensure_fused_ops_registered() {
  OpRegistry& r = OpRegistry::instance();
  if (!r.find("FusedMatMulBiasGelu")) register_fused_ops(r);
}

}  // namespace probelab::graph
