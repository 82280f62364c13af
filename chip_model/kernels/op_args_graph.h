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
static_assert(static_cast<int>(graph::DType::F64) + 1 == spec::kNumDTypeValues);
static_assert(static_cast<int>(graph::Format::FRACTAL_NZ) + 1 == spec::kNumFormatValues);

/// Name of body tensor `index` of a rebuilt op: inputs "in<i>", outputs "out<i>", intermediates "t<i>".
std::string body_tensor_name(const spec::OpArgs& a, std::int32_t index);

/// The op described by `a`: type, name, attrs, inputs "in<i>" ("" when absent), outputs
/// "out<i>", and the fused body with tensors named by body_tensor_name().
graph::Op op_from_args(const spec::OpArgs& a);

/// Logical desc of a tensor reference (format ND/NCHW as the logical layout, dtype as stored).
graph::TensorDesc logical_desc(const spec::TensorRef& t);
/// Desc of the bytes at t.addr (dtype, logical shape, stored format).
graph::TensorDesc stored_desc(const spec::TensorRef& t);

}  // namespace probelab::chip::kernels
