// The generic Vector kernel and its cost model, shared with the fused kernel.
#pragma once

#include <span>
#include <vector>

#include "chip_model/kernels/kernel.h"
#include "graph/op.h"
#include "graph/tensor.h"

namespace probelab::chip::kernels {

/// Vector passes per element of an op type (Vector cycles per element = passes * 4 bytes /
/// vector_bytes_per_cycle). Estimates from instruction counts of typical Vector implementations:
/// 0 for pure data movement (MTE only), 1 for simple elementwise ops and reductions, ~4 for
/// transcendental activations, 5-6 for softmax / normalisations, window size for pools, 12 Adam.
double vector_passes(const graph::Op& op);

/// Runs `op` on graph's FP32 reference kernel: inputs converted to FP32 exactly (FTZ reads
/// subnormals as zero; integer inputs unchanged), outputs as FP32 vectors (integer outputs
/// converted to float).
std::vector<FloatBuffer> run_vector_f32(const graph::Op& op, std::span<const graph::Tensor* const> inputs,
                                               const num::Mode& mode);

/// Same, returning the output tensors (FP32 or integer, logical layout).
std::vector<graph::Tensor> run_vector(const graph::Op& op, std::span<const graph::Tensor* const> inputs,
                                      const num::Mode& mode);

/// The generic kernel's result: run_vector's outputs as FP32 values, integer and bool outputs
/// also held exactly (Computed::exact).
Computed compute_vector(const KernelCall& call);

/// Streaming Vector cost of an op given its loaded inputs and output descs.
OpWork vector_work(const KernelCall& call);

}  // namespace probelab::chip::kernels
