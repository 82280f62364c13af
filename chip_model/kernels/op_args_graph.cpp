// OpArgs -> graph::Op reconstruction.
#include "chip_model/kernels/op_args_graph.h"

namespace probelab::chip::kernels {

std::string body_tensor_name(const spec::OpArgs& a, std::int32_t index) {
  const auto n_in = static_cast<std::int32_t>(a.inputs.size());
  const auto n_out = static_cast<std::int32_t>(a.outputs.size());
  if (index < 0) return {};
  if (index < n_in) return "in" + std::to_string(index);
  if (index < n_in + n_out) return "out" + std::to_string(index - n_in);
  return "t" + std::to_string(index);
}

graph::Op op_from_args(const spec::OpArgs& a) {
  graph::Op op;
  op.name = a.op_name.empty() ? a.op_type : a.op_name;
  op.type = a.op_type;
  op.attrs = a.attrs;
  for (std::size_t i = 0; i < a.inputs.size(); ++i)
    op.inputs.push_back(a.inputs[i].dtype == spec::kAbsentTensor ? std::string{} : "in" + std::to_string(i));
  for (std::size_t i = 0; i < a.outputs.size(); ++i) op.outputs.push_back("out" + std::to_string(i));
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
