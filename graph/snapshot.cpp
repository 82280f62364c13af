// Snapshot construction and provenance, see snapshot.h.
#include "graph/snapshot.h"

#include <algorithm>

#include <fmt/format.h>

namespace probelab::graph {

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::Original: return "original";
    case Stage::Optimized: return "optimized";
    case Stage::Fused: return "fused";
  }
  return "invalid";
}

std::string_view op_fate_name(OpFate::Kind k) {
  switch (k) {
    case OpFate::Kind::Kept: return "kept";
    case OpFate::Kind::Folded: return "folded";
    case OpFate::Kind::Eliminated: return "eliminated";
    case OpFate::Kind::Fused: return "fused";
  }
  return "invalid";
}

const Graph& SnapshotSet::at(Stage s) const {
  switch (s) {
    case Stage::Original: return original;
    case Stage::Optimized: return optimized;
    case Stage::Fused: return fused;
  }
  throw GraphError("SnapshotSet::at: invalid stage");
}

SnapshotSet build_snapshots(const Graph& original, const SnapshotOptions& opts) {
  original.validate();
  SnapshotSet s;
  s.original = original;
  s.optimized = optimize_graph(original, opts.optimize, &s.optimize_log);
  s.optimize_log.folded_at_import = original.import_folded();
  s.fused = opts.fuse ? fuse_graph(s.optimized) : s.optimized;
  return s;
}

OpProvenance trace_to_original(const SnapshotSet& s, Stage stage, const std::string& name) {
  const Op* op = s.at(stage).find_op(name);
  if (!op)
    throw GraphError(fmt::format("{} snapshot of graph '{}' has no op '{}'", stage_name(stage), s.original.name(), name));
  OpProvenance p{name, stage, Stage::Original, op->type, {}};
  if (!op->fused_from.empty()) {
    // Fusion runs on the optimized snapshot, whose surviving ops carry their original names.
    p.introduced_in = Stage::Fused;
    for (const std::string& from : op->fused_from) {
      const OpProvenance inner = trace_to_original(s, Stage::Optimized, from);
      p.original_ops.insert(p.original_ops.end(), inner.original_ops.begin(), inner.original_ops.end());
    }
  } else if (s.original.find_op(name)) {
    p.original_ops = {name};
  } else {
    throw GraphError(fmt::format("op '{}' of the {} snapshot of graph '{}' has no origin in the original snapshot",
                                 name, stage_name(stage), s.original.name()));
  }
  return p;
}

OpFate fate_of(const SnapshotSet& s, const std::string& name) {
  if (!s.original.find_op(name))
    throw GraphError(fmt::format("graph '{}' has no op '{}'", s.original.name(), name));
  const auto& log = s.optimize_log;
  if (std::count(log.folded.begin(), log.folded.end(), name)) return {OpFate::Kind::Folded, {}};
  if (std::count(log.dead.begin(), log.dead.end(), name)) return {OpFate::Kind::Eliminated, {}};
  if (s.fused.find_op(name)) return {OpFate::Kind::Kept, {}};
  for (const Op& op : s.fused.ops())
    if (std::count(op.fused_from.begin(), op.fused_from.end(), name)) return {OpFate::Kind::Fused, op.name};
  throw GraphError(fmt::format("op '{}' of graph '{}' is missing from the fused snapshot without a record", name,
                               s.original.name()));
}

}  // namespace probelab::graph
