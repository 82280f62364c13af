// Op types created by fusion (graph/passes.h): FusedMatMulBiasGelu, FusedLayerNormRelu,
// FusedConvBnRelu. They have no attributes of their own; shape inference and the reference kernel
// run the op's fused_body in order (each body op through its own type's definition), so a fused op
// computes exactly what the ops it replaced computed.
#pragma once

#include "graph/op_registry.h"

namespace probelab::graph {

/// Adds the fused op types to `r`.
void register_fused_ops(OpRegistry& r);
/// Adds them to OpRegistry::instance() unless they are there already. Idempotent.
void ensure_fused_ops_registered();

/// Output descs of a fused op from its input descs, by inferring its body in order.
std::vector<TensorDesc> infer_fused_body(const Op& op, std::span<const TensorDesc> inputs);
/// Runs a fused op's body on the reference kernels; returns its outputs in precision `p`.
std::vector<Tensor> run_fused_body(const Op& op, std::span<const Tensor* const> inputs, RefPrecision p);

}  // namespace probelab::graph
