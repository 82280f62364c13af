// Differential replay: compares the dumps of two runs (e.g. with and without an injection, or two
// chip configs) capture by capture and finds the first op whose captured values differ.
// A run is an output directory of `probelab run` (<out>/<scenario>), or any directory holding
// dump.json manifests; only a run's own dumps are read (sim/run/run_manifests.h: not those of a
// replay, query or `dump decode` written inside it, nor variants/).
// Captures are matched by (rank, step, op, edge); full tensors are compared element by element,
// statistics field by field, hashes bitwise.
//
// The first divergent op is the causally first divergent capture, the order `diffs` is in: by
// step, then by the op's place in its rank's executed order (report.json `ops`, which lists each
// rank's ops in executed, topological order; without a report, the op_id the dump recorded, the
// graph's topological index), inputs before outputs, then by rank, then manifest order. The ranks
// run the same program, so an op that diverges on rank 6 is named before a later op that
// diverges on rank 4 because of it (e.g. a hierarchical allreduce's `inter` on one rank before the
// `intra_ag` that spreads its result) — the op the run's own consistency check names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::sim {

struct CaptureDiff {
  std::string op, edge, tensor;
  std::uint32_t step = 0, rank = 0;
  std::string basis;         // "tensor" | "statistics" | "hash" | "shape"
  double max_abs_diff = 0;   // NaN when only bits are known to differ
  std::string note;
};

/// A manifest or dump file that could not be read: missing, corrupt (checksum), not a manifest,
/// or naming a path outside its run. Compare reports every one and exits with 2.
struct DamagedFile {
  std::string run;      // "run A" | "run B"
  std::string file;     // the manifest (dump.json) the entry belongs to
  std::string problem;  // names the dump file and what is wrong with it
};

struct RunComparison {
  std::size_t matched = 0;   // captures present in both runs
  std::size_t equal = 0;
  std::vector<std::string> only_a, only_b;  // "rank r step s op edge"
  std::vector<CaptureDiff> diffs;           // in causal order (above), from run A's captures
  std::vector<DamagedFile> damaged;         // captures that could not be compared (not counted equal)
  std::optional<CaptureDiff> first() const {
    return diffs.empty() ? std::nullopt : std::optional<CaptureDiff>(diffs.front());
  }
  nlohmann::json to_json() const;
};

/// Throws ScenarioError when a directory does not exist or holds no dump.json. Damaged
/// manifests and files do not stop the comparison: each is listed in `damaged`.
RunComparison compare_runs(const std::filesystem::path& a, const std::filesystem::path& b);

}  // namespace probelab::sim
