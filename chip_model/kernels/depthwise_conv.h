// Depthwise convolution (one input channel per group) on the Cube's FP32-accumulation path,
// computed without im2col columns: the same bits as cube_gemm over im2col (cube_gemm.h), far
// fewer host operations (a depthwise GEMM is 1 x kH*kW times kH*kW x P per channel, where the
// columns and their packing cost more than the products).
//
// Why the bits are the same: FP16 operands without NaN or infinity are multiples of 2^-24, so every
// product is exact in FP32 and every sum is zero or at least 2^-48 in magnitude: no accumulation
// step raises a flag; the GEMM's order is k = (kh, kw) ascending from +0 with acc = RN32(acc + a*b)
// (one FMA here too); a padding tap adds a zero product, which leaves every value the accumulator
// can hold (+0 or non-zero) unchanged, so it is skipped. Subnormal operands are read as the GEMM
// reads them (as signed zeros when the Mode flushes) and flagged DenormalIn where it flags them.
#pragma once

#include <cstdint>
#include <optional>

#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/kernels/cube_gemm.h"
#include "graph/tensor.h"
#include "numerics/bulk.h"
#include "numerics/mode.h"

namespace probelab::chip::kernels {

/// Y = conv(X, W) for `images` images of `groups` groups with s.c == 1 input channel and `mg`
/// output channels each: Y[(n * groups + g) * mg + j][p] at y + ((n * groups + g) * mg + j) * P
/// (P = oh * ow), X [images, groups, h, w] and W [groups * mg, 1, kh, kw] in FP16. When the
/// operands and `acc` allow it (FP16 without NaN or infinity in X and W; FP32 accumulation without
/// split-K) writes every element of Y and returns the flags the per-group GEMMs would have raised,
/// indices into Y; otherwise writes nothing and returns nullopt, and the caller runs the im2col GEMM.
std::optional<num::BulkReport> depthwise_conv(const ConvShape& s, std::int64_t images, std::int64_t groups,
                                              std::int64_t mg, const graph::Tensor& x, const graph::Tensor& w,
                                              const AccumulationMode& acc, const num::Mode& mode, float* y);

}  // namespace probelab::chip::kernels
