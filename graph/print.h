// Human-readable text of graphs and snapshots (used by `probelab show`).
#pragma once

#include <string>

#include "graph/graph.h"
#include "graph/snapshot.h"

namespace probelab::graph {

struct PrintOptions {
  bool attrs = true;         // print op attributes
  bool tensors = true;       // print input/output descs of each op
  bool fused_bodies = true;  // print the ops inside fused ops
};

/// Header line, inputs, initializers, ops in topological order (id, name, type, direction, scope,
/// inputs/outputs with descs, attributes, debug options, fusion provenance), outputs.
std::string format_graph(const Graph& g, const PrintOptions& opts = {});
/// Op counts of the three snapshots, folded and eliminated ops, and each fused op with the original
/// ops it replaced.
std::string format_snapshot_summary(const SnapshotSet& s);

}  // namespace probelab::graph
