// Cross-rank consistency: every rank's sync-probe samples (hash, statistics or tensor of the same
// (step, op edge)) compared against a reference rank (msdebug --mode=consistency_check
// --reference_rank=0 in the article).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/spec/capture_record.h"
#include "graph/tensor.h"
#include "probes/probe_config.h"

namespace probelab::probes {

struct SyncSample {
  std::uint32_t rank = 0, step = 0;
  /// Replica group: the check compares a sample only with samples of its group (the ranks whose
  /// values must agree, e.g. the members of a sub-communicator), against the group's reference
  /// (the reference rank when it is a member, else the group's lowest rank).
  std::uint32_t group = 0;
  std::string op;              // the observed op (a collective for sync probes)
  std::uint32_t order = 0;     // position of the op in the executed order (topological)
  std::string tensor;
  bool is_input = false;
  std::uint16_t index = 0;
  std::optional<std::uint64_t> hash;
  std::optional<spec::CaptureStats> stats;
  std::optional<graph::Tensor> data;  // logical layout
};

/// How one (step, edge) differs from the reference rank.
struct Divergence {
  std::uint32_t step = 0;
  std::string op, tensor;
  bool is_input = false;
  std::uint16_t index = 0;
  /// Ranks that differ from their group's reference; or the reference itself, when two or more
  /// others all differ from it and agree with each other (the odd one out is the reference).
  std::vector<std::uint32_t> ranks;
  std::vector<double> rank_diffs;    // each of those ranks' own difference (same measure, NaN: unknown)
  /// Each of those ranks' group reference (the rank itself when it is the reference out of line):
  /// the reference rank, or the lowest rank of a group that does not hold it.
  std::vector<std::uint32_t> references;
  /// Difference measure: tensors: max |x_r - x_ref| over elements and ranks; statistics:
  /// max over ranks of max(|dmin|, |dmax|, |dmean|, |dmax_abs|); hash only: NaN (bits differ,
  /// size unknown).
  double max_abs_diff = 0;
  std::string basis;  // "tensor" | "statistics" | "hash"
};

struct ConsistencyResult {
  // Ranks are compared within their replica group (SyncSample::group); reference_rank below is
  // the reference of the group that holds it.
  bool checked = false;
  bool consistent = true;
  std::uint32_t reference_rank = 0;
  std::vector<std::uint32_t> ranks;       // ranks seen
  std::uint64_t comparisons = 0;          // (rank, step, edge) triples compared
  std::vector<std::string> ops;           // the ops compared, in executed order
  std::optional<Divergence> first;        // earliest step, then earliest op in executed order
  std::vector<Divergence> divergences;    // all, in (step, order) order
  /// Growth: for the first divergent edge, its difference at every step checked (NaN for
  /// hash-only steps where bits differ, 0 where equal), in step order.
  std::vector<std::pair<std::uint32_t, double>> growth;
  bool growing = false;                   // growth strictly increases over the last steps (>= 2)
  std::vector<std::string> missing;       // e.g. "rank 3 has no sample for step 2 op ar0 out0"
};

ConsistencyResult check_consistency(std::span<const SyncSample> samples, const ConsistencyOptions& opts);

nlohmann::json to_json(const Divergence& d);
nlohmann::json to_json(const ConsistencyResult& r);

}  // namespace probelab::probes
