// The insertion pass: adds probe nodes to a graph snapshot (the article's 探针插入策略).
//
// Three op types are registered in graph::OpRegistry (register_probe_ops(), idempotent):
//   ProbeCapture     data-capture probe on an op's output edge (or input edge with data_mode input)
//   ProbeSync        before/after a collective op: hash/statistics of its inputs/outputs on every
//                    rank, for the cross-rank consistency check; executed after a barrier
//   ProbeBreakpoint  conditional breakpoint on an op selected by a `break` action
//   ProbeIntegrity   hash of a tensor selected by `integrity.tensors`: after its producer (output
//                    edge) and before each consumer (input edge); a carried tensor X (updated in
//                    place into X/updated) is hashed after the op writing X/updated, and before the
//                    readers of X
// Each has exactly one input (the observed tensor) and NO outputs: probes never change the data
// flow, so graph semantics, tensor names and reference results are unchanged, and the existing op
// ids stay valid (probe ops are appended). Because they have no outputs, run the pass after
// dead-op elimination (on the executed snapshot). Their reference kernels do nothing.
//
// Attributes (all probe ops):
//   target (str)        observed tensor            target_op (str)   observed op
//   is_input (int 0/1)  input edge of target_op    output_index (int) slot in target_op's list
//   position (str)      "after" | "before"         source_format (str) format of the tensor in
//                                                  HBM (the device converts private -> NCHW/ND)
//   watch_point (str)   watch point id ("consistency" for sync probes)
//   mode (str)          statistics | full | hash   sample_rate (float)
// ProbeBreakpoint also: condition (str, may be empty), halt_on_exception (int).
//
// Probe op names: "<target_op>/probe_capture:<out|in><index>", "/probe_sync:...",
// "/probe_break:out<index>", "/probe_integrity:<out|in><index>". One capture probe per edge: several watch points selecting the same
// edge are merged (mode = most detailed of full > statistics > hash, rate = max, ids joined by ',').
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "probes/probe_config.h"

namespace probelab::probes {

inline constexpr std::string_view kProbeCaptureType = "ProbeCapture";
inline constexpr std::string_view kProbeSyncType = "ProbeSync";
inline constexpr std::string_view kProbeBreakpointType = "ProbeBreakpoint";
inline constexpr std::string_view kProbeIntegrityType = "ProbeIntegrity";

/// Registers the four probe op types in graph::OpRegistry::instance(); safe to call repeatedly.
void register_probe_ops();
bool is_probe_op(const graph::Op& op);

/// Op types treated as collectives (sync probes): AllReduce, ReduceScatter, AllGather, Broadcast.
bool is_collective_type(std::string_view type);
/// A collective that moves values and adds nothing (AllGather, Broadcast): no order of additions
/// and no accumulator changes its result.
bool collective_moves_values(std::string_view type);

enum class ProbeKind : std::uint8_t { Capture, Sync, Breakpoint, Integrity };
std::string_view probe_kind_name(ProbeKind k);
enum class ProbePosition : std::uint8_t { Before, After };

struct ProbeSite {
  ProbeKind kind = ProbeKind::Capture;
  ProbePosition position = ProbePosition::After;
  std::uint32_t probe_op_id = 0;
  std::string probe_op;
  std::uint32_t target_op_id = 0;
  std::string target_op;
  std::string tensor;
  std::uint16_t index = 0;
  bool is_input = false;
  CaptureMode mode = CaptureMode::Statistics;
  double sample_rate = 1.0;
  std::vector<std::size_t> watch_points;  // indices into ProbeConfig::watch_points
};

struct InsertionResult {
  std::vector<ProbeSite> probes;  // in probe op id order
  /// probe op id -> index in `probes`
  std::map<std::uint32_t, std::size_t> by_probe_op;
  /// Probe op ids to submit right before / right after the target op's kernel task.
  std::vector<std::uint32_t> before(std::uint32_t op_id) const;
  std::vector<std::uint32_t> after(std::uint32_t op_id) const;
  const ProbeSite* site(std::uint32_t probe_op_id) const;
  std::vector<std::string> warnings;  // e.g. a watch point that selected nothing

  std::map<std::uint32_t, std::vector<std::uint32_t>> before_, after_;
};

/// Adds probe ops for `cfg` to `g` (validated afterwards). Throws ConfigError for a scope regex
/// that does not compile (naming the watch point), GraphError from validation.
InsertionResult insert_probes(graph::Graph& g, const ProbeConfig& cfg);

/// Ops selected by watch point `wp` (glob over op names, or over tensor names selecting the
/// producer's edge), filtered by scope and direction, in id order. Probe ops never match.
struct SelectedEdge {
  std::uint32_t op_id;
  std::uint16_t index;
  bool is_input;
};
std::vector<SelectedEdge> select_edges(const graph::Graph& g, const WatchPoint& wp);

/// The insertion pass's warning for a watch point that selects no edge: "watch point 'wp0' selects
/// no op or tensor". A harness that checks a config against the graph before inserting words it so.
std::string no_selection_warning(const WatchPoint& wp);

}  // namespace probelab::probes
