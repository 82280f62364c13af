// Einsum as a batched matrix product, for the device kernels (graph/ops/einsum_gemm.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "graph/op.h"
#include "graph/tensor.h"

namespace probelab::graph::ops {

/// A two-operand Einsum that is C[b, m, n] = sum_k A[b, m, k] B[b, k, n]: A's dimensions permuted
/// by perm_a into (batch labels, M labels, K labels), B's by perm_b into (batch, K, N), and the
/// output's labels already in (batch, M, N) order; each group's sizes multiplied.
struct EinsumGemm {
  std::vector<std::size_t> perm_a, perm_b;
  std::int64_t batch = 1, m = 1, n = 1, k = 1;
};

/// The plan of Einsum `op` over input shapes `shapes` when it is such a product: two operands,
/// no label repeated within a term, none summed in one operand alone, no broadcast "...", and the
/// output ordered batch, M, N (e.g. "bhqd,bhkd->bhqk", "td,edh->teh"); nullopt otherwise.
std::optional<EinsumGemm> einsum_as_gemm(const Op& op, const std::vector<Shape>& shapes);

/// `t` with its dimensions permuted: dimension i of the result is dimension perm[i] of t (any dtype).
Tensor permuted(const Tensor& t, const std::vector<std::size_t>& perm);

}  // namespace probelab::graph::ops
