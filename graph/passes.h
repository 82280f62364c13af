// Graph passes that produce the optimized and fused snapshots. Each pass returns a new Graph and
// leaves its input untouched; op names survive the passes unless an op is removed or fused.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace probelab::graph {

/// What optimize_graph() removed, in the input graph's op order.
struct OptimizeLog {
  /// Nodes the ONNX importer already folded (Graph::import_folded of the original snapshot).
  std::vector<std::string> folded_at_import;
  std::vector<std::string> folded;  // ops replaced by Constant initializers holding their values
  std::vector<std::string> dead;    // ops whose results reach no graph output
};

struct OptimizeOptions {
  bool fold_constants = true;
  bool eliminate_dead = true;
};

/// Constant folding, then dead-op elimination.
/// - Folding: a forward op whose inputs are all Constant initializers (or results of folded ops) and
///   none of whose outputs is a graph output is evaluated with run_reference (FP32, rounded to the
///   declared dtype) and replaced by Constant initializers. Ops without a reference kernel stay.
/// - Dead ops: ops from which no graph output and no optimizer-op output can be reached are
///   removed. A graph without outputs keeps all its ops.
/// Initializers and tensors no op uses any more are dropped; graph inputs are kept.
Graph optimize_graph(const Graph& g, const OptimizeOptions& opts = {}, OptimizeLog* log = nullptr);

/// A fusion pattern: a chain of op types, each op reading output 0 of the previous one.
struct FusionPattern {
  std::string fused_type;          // e.g. "FusedMatMulBiasGelu"
  std::vector<std::string> chain;  // canonical op types, e.g. {"MatMul", "Add", "Gelu"}
};
/// The built-in patterns: MatMul+Add+Gelu -> FusedMatMulBiasGelu, LayerNormalization+Relu ->
/// FusedLayerNormRelu, Conv+BatchNormalization(inference)+Relu -> FusedConvBnRelu.
const std::vector<FusionPattern>& fusion_patterns();

/// Replaces every non-overlapping match of a pattern by one fused op (ops visited in topological
/// order, patterns tried in the order above). A chain matches only when every intermediate tensor
/// (every output of all but the last op) is read by the next op of the chain alone, exactly once,
/// and is not a graph output. The fused op:
/// - is named after the replaced ops: "fc1/matmul+add+gelu" when they share the prefix "fc1/",
///   otherwise their full names joined by '+' (made unique with a "#<n>" suffix if needed);
/// - takes the chain's external inputs in order of first use, writes the last op's outputs;
/// - has the longest common scope of the replaced ops, the first replaced op's direction, the first
///   sample rate set among them, and capture only if all of them allow it;
/// - records Op::fused_from and Op::fused_body as op.h documents.
Graph fuse_graph(const Graph& g);

/// Builds a graph holding `ops` (in the given order, ids reassigned) and the tensors they use,
/// taking tensor descs, kinds and initializers from `src`, plus `extra_initializers` (name ->
/// value, declared as Constant). Keeps the inputs and outputs of `src`.
Graph rebuild_graph(const Graph& src, std::vector<Op> ops, const std::map<std::string, Tensor>& extra_initializers = {});

}  // namespace probelab::graph
