// Conversions between spec::OpArgs and graph::Op.
#include "chip_model/kernels/op_args_graph.h"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

namespace probelab::chip::kernels {

std::string body_tensor_name(const spec::OpArgs& a, std::int32_t index) {
  const auto n_in = static_cast<std::int32_t>(a.inputs.size());
  const auto n_out = static_cast<std::int32_t>(a.outputs.size());
  if (index < 0) return {};
  if (index < n_in) return fmt::format("in{}", index);
  if (index < n_in + n_out) return fmt::format("out{}", index - n_in);
  return fmt::format("t{}", index);
}

graph::Op op_from_args(const spec::OpArgs& a) {
  graph::Op op;
  op.name = a.op_name.empty() ? a.op_type : a.op_name;
  op.type = a.op_type;
  op.attrs = a.attrs;
  for (std::size_t i = 0; i < a.inputs.size(); ++i)
    op.inputs.push_back(a.inputs[i].dtype == spec::kAbsentTensor ? std::string{} : fmt::format("in{}", i));
  for (std::size_t i = 0; i < a.outputs.size(); ++i) op.outputs.push_back(fmt::format("out{}", i));
  for (const spec::FusedInner& f : a.fused_body) {
    graph::Op inner;
    inner.name = f.name.empty() ? f.type : f.name;
    inner.type = f.type;
    inner.attrs = f.attrs;
    for (std::int32_t t : f.inputs) inner.inputs.push_back(body_tensor_name(a, t));
    for (std::int32_t t : f.outputs) inner.outputs.push_back(body_tensor_name(a, t));
    op.fused_from.push_back(inner.name);
    op.fused_body.push_back(std::move(inner));
  }
  return op;
}

spec::OpArgs args_from_op(const graph::Op& op, std::vector<spec::TensorRef> inputs,
                          std::vector<spec::TensorRef> outputs) {
  if (inputs.size() != op.inputs.size() || outputs.size() != op.outputs.size())
    throw std::runtime_error(fmt::format("op '{}' ({}): {} input and {} output refs for {} inputs and {} outputs",
                                         op.name, op.type, inputs.size(), outputs.size(), op.inputs.size(),
                                         op.outputs.size()));
  spec::OpArgs a;
  a.op_type = op.type;
  a.op_name = op.name;
  a.attrs = op.attrs;
  a.inputs = std::move(inputs);
  a.outputs = std::move(outputs);
  if (op.fused_body.empty()) return a;
  std::map<std::string, std::int32_t> index;
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    if (!op.inputs[i].empty()) index.emplace(op.inputs[i], static_cast<std::int32_t>(i));
  for (std::size_t i = 0; i < op.outputs.size(); ++i)
    index.emplace(op.outputs[i], static_cast<std::int32_t>(op.inputs.size() + i));
  auto next = static_cast<std::int32_t>(op.inputs.size() + op.outputs.size());
  const std::int32_t first_internal = next;
  for (const graph::Op& inner : op.fused_body) {
    spec::FusedInner f;
    f.type = inner.type;
    f.name = inner.name;
    f.attrs = inner.attrs;
    for (const std::string& t : inner.inputs) {
      if (t.empty()) {
        f.inputs.push_back(-1);
        continue;
      }
      auto it = index.find(t);
      if (it == index.end())
        throw std::runtime_error(fmt::format("fused op '{}': body op '{}' reads '{}' before it is written", op.name,
                                             inner.name, t));
      f.inputs.push_back(it->second);
    }
    for (const std::string& t : inner.outputs) {
      auto [it, fresh] = index.emplace(t, next);
      if (fresh) ++next;
      f.outputs.push_back(it->second);
    }
    a.fused_body.push_back(std::move(f));
  }
  a.num_internal = static_cast<std::uint32_t>(next - first_internal);
  return a;
}

graph::TensorDesc logical_desc(const spec::TensorRef& t) {
  graph::TensorDesc d;
  d.dtype = static_cast<graph::DType>(t.dtype);
  d.shape.assign(t.dims, t.dims + t.rank);
  d.format = graph::Format::ND;
  return d;
}

graph::TensorDesc stored_desc(const spec::TensorRef& t) {
  graph::TensorDesc d = logical_desc(t);
  d.format = static_cast<graph::Format>(t.format);
  return d;
}

}  // namespace probelab::chip::kernels
