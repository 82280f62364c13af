// Bridges between the device argument block (spec::OpArgs) and the graph IR: the device kernels
// rebuild a graph::Op from the args to reuse graph's shape inference and reference kernels.
#pragma once

#include <string>
#include <vector>

#include "chip_model/spec/op_args.h"
#include "graph/dtype.h"
#include "graph/op.h"

namespace probelab::chip::kernels {

static_assert(std::is_same_v<spec::OpAttrValue, graph::AttrValue>,
              "spec::OpAttrValue must be the same type as graph::AttrValue");
static_assert(static_cast<int>(graph::DType::U8) + 1 == spec::kNumDTypeValues);
static_assert(static_cast<int>(graph::Format::FRACTAL_NZ) + 1 == spec::kNumFormatValues);

/// Name of body tensor `index` of a rebuilt op: inputs "in<i>", outputs "out<i>", intermediates "t<i>".
std::string body_tensor_name(const spec::OpArgs& a, std::int32_t index);

/// The op described by `a`: type, name, attrs, inputs "in<i>" ("" when absent), outputs
/// "out<i>", and the fused body with tensors named by body_tensor_name().
graph::Op op_from_args(const spec::OpArgs& a);

/// The args block of graph op `op` (the inverse of op_from_args): type, name, attrs, operand
/// refs (an omitted optional input needs dtype kAbsentTensor) and, for a fused op, its body with
/// tensors numbered as in spec/op_args.h. Throws std::runtime_error naming the op when a body op
/// reads a tensor that is neither an op input nor written by an earlier body op, or when the ref
/// counts differ from the op's inputs/outputs.
spec::OpArgs args_from_op(const graph::Op& op, std::vector<spec::TensorRef> inputs,
                          std::vector<spec::TensorRef> outputs);

/// Logical desc of a tensor reference (format ND/NCHW as the logical layout, dtype as stored).
graph::TensorDesc logical_desc(const spec::TensorRef& t);
/// Desc of the bytes at t.addr (dtype, logical shape, stored format).
graph::TensorDesc stored_desc(const spec::TensorRef& t);

}  // namespace probelab::chip::kernels
