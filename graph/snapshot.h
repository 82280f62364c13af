// The three snapshots of a model graph and the provenance that links them.
//   original   the graph as loaded or built (plus autodiff ops for training graphs)
//   optimized  after constant folding and dead-op elimination (graph/passes.h)
//   fused      after pattern fusion of the optimized graph
// Ops keep their names through the passes unless removed (folded/dead) or fused; a fused op lists
// the ops it replaced in Op::fused_from, so every op of every snapshot maps back to original ops.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes.h"

namespace probelab::graph {

enum class Stage : std::uint8_t { Original, Optimized, Fused };
std::string_view stage_name(Stage s);  // "original", "optimized", "fused"

struct SnapshotOptions {
  OptimizeOptions optimize;
  bool fuse = true;  // false: `fused` is a copy of `optimized`
};

struct SnapshotSet {
  Graph original, optimized, fused;
  OptimizeLog optimize_log;  // original ops folded into constants / eliminated as dead

  const Graph& at(Stage s) const;
};

/// Builds all three snapshots. The original is validated first (GraphError on a bad graph).
SnapshotSet build_snapshots(const Graph& original, const SnapshotOptions& opts = {});

/// Where an op of some snapshot comes from.
struct OpProvenance {
  std::string op;                          // the op asked about
  Stage stage = Stage::Original;           // the snapshot it was looked up in
  Stage introduced_in = Stage::Original;   // the stage whose pass created it
  std::string type;                        // its type
  std::vector<std::string> original_ops;   // the original ops it stands for, in execution order
};
/// Maps an op of snapshot `stage` back to the original ops. Throws GraphError when the snapshot has
/// no op of that name.
OpProvenance trace_to_original(const SnapshotSet& s, Stage stage, const std::string& op);

/// What became of an original op in the later snapshots.
struct OpFate {
  enum class Kind : std::uint8_t { Kept, Folded, Eliminated, Fused } kind = Kind::Kept;
  std::string fused_into;  // for Fused: the fused op's name in the fused snapshot
};
std::string_view op_fate_name(OpFate::Kind k);  // "kept", "folded", "eliminated", "fused"
/// Throws GraphError when the original snapshot has no op of that name.
OpFate fate_of(const SnapshotSet& s, const std::string& original_op);

}  // namespace probelab::graph
