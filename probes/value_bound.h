// Bounds on what an op can compute: from the magnitudes of its inputs (max |x|, l2 norm, minimum,
// over the finite elements), an upper bound of max |y| by the op's arithmetic. The provenance
// (provenance.h) uses it to find a finite value no upstream op could have written.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "graph/graph.h"

namespace probelab::probes {

/// Magnitudes of a tensor as an op read it (finite elements).
struct Magnitude {
  double max_abs = 0, l2 = 0;
  double min = 0;  // signed
  std::uint64_t count = 0;
};

/// An upper bound of max |y| over output `slot` of `op` from its inputs' magnitudes (in input
/// order; nullopt: unknown or an omitted optional input), by the op's arithmetic: max |x| for
/// ops that select, move or shrink values (Relu, Reshape, pooling, ReluGrad: |dY|...), the sum of
/// the inputs' max |x| for Add/Sub/Sum, |alpha| max |x| for Scale, max|a| max|b| for Mul, and
/// Cauchy-Schwarz l2(a) l2(b) (+ max |bias|) for every dot-product op (MatMul, Gemm, Conv and
/// their gradients), |scale| sqrt(count) + |B| for batch/layer normalization with batch
/// statistics, |scale| (|X| + |mean|) / sqrt(min var + epsilon) + |B| with running statistics
/// (BatchNormalizationGrad and LayerNormalizationGrad: dX within |scale| (2 |dY| + l2(dY)) /
/// sqrt(epsilon) for statistics of their own, dB within sqrt(count) l2(dY), dScale too or, with
/// running statistics, times (|X| + |mean|) / sqrt(min var + epsilon)),
/// |p| + lr (|grad| + ...) for SgdUpdate; the input or its clamp bounds for Clip, 1 for the
/// saturating ops (HardSigmoid, Erf, Sin, Cos, Softsign), max(|X|, alpha) for Elu/Celu (Selu:
/// times gamma), max |X| max(1, |slope|) for PRelu, the selected inputs for Where; max(1, |X|)^|p|
/// for Pow with exponents > 0, max |dY| for SliceGrad (a scatter into zeros), sqrt|X|, e^|X|, |A| / min B and |log| at the ends for Div,
/// Reciprocal and Log of operands whose captured minimum is > 0 (a decomposed LayerNorm); |dY| times the
/// largest derivative for TanhGrad/SigmoidGrad (from |Y|) and for PointwiseGrad of a forward op
/// whose derivative is bounded (Clip, the piecewise-linear activations, Max/Min/Sum/Where...; Sqrt,
/// Reciprocal and Log of an operand whose captured minimum is > 0); nullopt for
/// ops without such a bound (Div, Exp, ...) or when an input it needs is unknown.
/// With `dot_len` (dot_length()), MatMul, Gemm and Conv take the smallest of Cauchy-Schwarz over
/// the whole operands, k max|a| max|b| and sqrt(k) max|a| l2(b) (and exchanged) over k terms;
/// Einsum (a gradient of one too) k times the product of its operands' max |x|; SoftmaxGrad over
/// rows of k (the axis' length; Cauchy-Schwarz without it); k max|dY| for GatherNDGrad and
/// GatherElementsGrad (scatter-adds of at most k values each). SgdUpdate and AdamUpdate take their
/// learning rate as `lr` times `lr_factor` (RankEvidence::lr_factor), or as at least 1 when that
/// is 0 (unknown); AdamUpdate's step is at most lr |m'| / ((1 - beta1) eps), its denominator at
/// least eps whatever its second moment holds.
std::optional<double> value_bound(const graph::Op& op, std::uint16_t slot, std::span<const std::optional<Magnitude>> in,
                                  std::optional<double> dot_len = std::nullopt, double lr_factor = 0);

/// The number of terms of each dot product of a MatMul (A's last dimension), Gemm (A's inner
/// dimension) or Conv (W's count per output channel: C / group times the kernel), or of each sum
/// of products of an Einsum (the sizes of the labels its output lacks), or the row length of a
/// SoftmaxGrad (its axis), or the most values a GatherNDGrad / GatherElementsGrad
/// adds into one element (index tuples per batch; indices along the axis), from the shapes in `g`;
/// nullopt for other ops or unknown shapes.
std::optional<double> dot_length(const graph::Graph& g, const graph::Op& op);

}  // namespace probelab::probes
