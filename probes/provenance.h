// Causal provenance of non-finite values: where the history of every NaN/Inf the runtime saw
// starts, and the path from there. Runs at the end of a run over all evidence of every rank:
// exception latches (AnomalyRecord), what captures showed of each tensor edge (NaN/Inf counts,
// hashes), and per step whether the latches saw every report (StepEvidence).
//
// Causal order: ops of one step run in the executed graph's order; a tensor read at step s was
// written either by its producer at step s, or — a weight, an optimizer state: a tensor "X" that
// op U updates into "X/updated" in place — by U at step s-1 (at the first step: the host's
// upload of the initial value, known from the graph), or by the host (fed inputs); the output of
// a collective at step s holds every rank's input to it at step s.
//
// Resolution of one anomaly, from its op backwards:
//  - an op that read a non-finite input (nan_input/inf_input latch on that slot, or a capture of
//    that input edge showing NaN/Inf): follow the input's writer;
//  - the writer's output was non-finite (a capture of that output showed NaN/Inf, or the writer
//    latched anything in that step): the writer is on the path; repeat from it;
//  - the writer's output was finite (a capture showed no NaN/Inf), or the writer latched nothing
//    in a step whose latches saw every report: no op wrote the value read — the tensor was
//    corrupted in memory between the write and the read (origin memory: tensor, element, window);
//    a host-written tensor (initial value finite in the graph, or a fed input) likewise
//    (origin memory for a finite initial value, host_data for a fed input or a non-finite
//    initial value);
//  - a collective's output: this rank's input to it if that was non-finite, else the first rank
//    (in rank order) whose input was: the collective is a carrier naming that rank;
//  - an op that produced a non-finite value from finite inputs (invalid/overflow latch and no
//    non-finite input evidence, nor a non-finite writer of any input) is the origin (op).
// An op on the path with no evidence either way is presumed to have propagated it when one of its
// inputs' writers shows non-finite evidence, else presumed to be the origin (Origin::presumed).
// Underflow anomalies carry no non-finite value: each is its own origin.
//
// Finite values out of range (value_bound()): an op that produced the first non-finite value from
// finite inputs (an overflow, say) may only have consumed a finite value that an op upstream
// could not have computed. From the op, the search follows its inputs backwards through the large
// values (every input whose max |x| is at least 2^-10 of the op's largest input, in decreasing
// magnitude; through collectives on every rank; weights and optimizer state into the previous
// step), reading each tensor's magnitudes from the captures of its writer (or of the read edge,
// or the initial value). The first op whose captured output max |x| exceeds 16 times the bound
// its inputs' magnitudes put on its result wrote a value no arithmetic gives: it becomes the
// origin (Origin::jump), the overflowing op is on the path. No such op (every value grew within
// its bound), or magnitudes unknown: the overflowing op stays the origin. A collective's result
// on a rank is bounded by its input on every member of its communicator: a gather's or a
// broadcast's by the largest, a sum's by the sum of their largest, a mean's by that sum over the
// divisor (a corrupted receive buffer is a collective's own jump). An op reached again
// through another of its outputs has that output checked too (its inputs are followed once).
// No search when the op's inputs cannot explain its result: they bound every value it computes
// below half its output type's range, or (a NaN; an overflow is the size of the values and is
// always searched) it computed a finite result at an earlier step from inputs at least half as
// large, a result that stays below half the range when grown by the ratio of the two steps'
// bounds (a result already near the range clears nothing).

#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "probes/anomaly.h"
#include "probes/value_bound.h"

namespace probelab::probes {

/// What captures showed of one tensor edge in one step.
struct EdgeObservation {
  bool has_stats = false;  // NaN/Inf counts known (statistics or a full tensor)
  std::uint64_t nan_count = 0, inf_count = 0, count = 0;
  std::optional<std::uint64_t> hash;
  std::optional<double> max_abs, l2, min;  // over the finite elements (statistics or a full tensor)
  std::uint64_t cycle = 0;  // device cycle of the record
  bool nonfinite() const { return has_stats && nan_count + inf_count > 0; }
  bool finite() const { return has_stats && nan_count + inf_count == 0; }
};

/// (step, op id, is_input, slot) of a tensor edge.
using EdgeKey = std::tuple<std::uint32_t, std::uint32_t, bool, std::uint16_t>;

/// Per step: exception kinds (1u << ExcKindBit) some report of which was not latched.
struct StepEvidence {
  std::uint32_t suppressed_kinds = 0;
};

/// What the host uploaded into a tensor (its initial value), as far as the provenance needs it:
/// magnitudes over the finite elements and where the value is not finite.
struct UploadSummary {
  Magnitude finite;                      // over the finite elements
  std::uint64_t elements = 0;            // all elements
  std::uint64_t nonfinite_count = 0;
  std::vector<std::uint64_t> nonfinite;  // indices of non-finite elements, ascending, the first kListed
  static constexpr std::size_t kListed = 4096;
  /// Magnitudes when every element is finite (what a bound may use), else nullopt.
  std::optional<Magnitude> magnitude() const;
  /// Whether element `e` is finite (an element past the listed ones of a longer list: not known
  /// finite, so false); without an element, whether all are.
  bool is_finite(std::optional<std::uint64_t> e) const;
};
UploadSummary summarize_upload(const graph::Tensor& value);

/// One rank's evidence. `anomalies` get their role, origin, source and path written back.
struct RankEvidence {
  std::uint32_t rank = 0;
  std::vector<AnomalyRecord>* anomalies = nullptr;
  const std::map<EdgeKey, EdgeObservation>* observations = nullptr;
  const std::map<std::uint32_t, StepEvidence>* steps = nullptr;  // steps with known latch completeness
  std::uint32_t enabled_kinds = 0;  // kRegExcEnable
  std::uint32_t first_step = 0;
  /// Values this rank's host uploaded in place of the graph's initializers (a tensor-parallel or
  /// ZeRO-1 shard, a checkpoint's value when the run resumed): the writer "upload" of those
  /// tensors reads these, every other initializer the graph's value.
  const std::map<std::string, UploadSummary>* uploads = nullptr;
  /// (step, input) -> what the host fed into a graph input at that step, when it said.
  const std::map<std::pair<std::uint32_t, std::string>, UploadSummary>* feeds = nullptr;
  /// Collective op id -> the communicator this rank ran it in: a collective's values move among
  /// the ranks of one communicator only (unknown: all ranks).
  const std::map<std::uint32_t, std::uint32_t>* comm_groups = nullptr;
  /// The most this rank's host multiplies an SgdUpdate's `lr` attribute by (a dynamic loss scaler
  /// divides it by its scale: 1 / the smallest scale, when that is below 1); 0: unknown.
  double lr_factor = 0;
};


/// An op origin that wrote a finite value beyond what its inputs allow.
struct ValueJump {
  double magnitude = 0;   // captured max |x| of the output
  double bound = 0;       // value_bound() of its inputs
  std::string consumer;   // "op@step": the op whose non-finite result it explains
};

/// Where a non-finite history starts.
struct Origin {
  OriginKind kind = OriginKind::Op;
  std::uint32_t rank = 0, step = 0;
  std::uint32_t op_id = 0;               // Op: the producer; Memory/HostData: the op that read it
  std::string tensor;                    // the tensor concerned (Op: the output, when known)
  std::optional<std::uint64_t> element;
  std::optional<std::uint32_t> writer_op, writer_step;  // Memory: who wrote the tensor last (none: host)
  std::optional<std::uint64_t> window_lo, window_hi;    // Memory: cycles between that write and the read
  bool presumed = false;                 // inferred without a latch at the origin
  const AnomalyRecord* latch = nullptr;  // the latch at the origin, if any
  std::optional<ValueJump> jump;         // Op: a finite value out of range, not a non-finite one
  std::string evidence;                  // one sentence: why this is the origin
  std::vector<const AnomalyRecord*> explains;  // anomalies whose history starts here, in rank then record order
  std::vector<std::string> path;         // path of the first anomaly it explains (origin first)
};

/// Resolves every anomaly of every rank (writes role, origin, source_*, corrupted_*,
/// propagation_path into the records) and returns the distinct origins in causal order (step,
/// position of the op in the executed graph, rank). Deterministic.
std::vector<Origin> resolve_provenance(const graph::Graph& executed, std::span<RankEvidence> ranks);

/// The most any order of its additions can change in collective `op`'s result at `step` on
/// `rank`: 2 n u S, with S the sum over the n members of the rank's communicator of the largest
/// |x| each put in (captured magnitudes) and u the unit roundoff of the coarser of its
/// accumulation and output dtypes (two orders' rounding errors, each at most (n - 1) u S, plus the
/// output's rounding); 0 for a gather or a broadcast, which add nothing. nullopt when a member's
/// magnitude is unknown, or `op` is not a collective of the graph.
std::optional<double> collective_order_limit(const graph::Graph& executed, std::span<RankEvidence> ranks,
                                             std::uint32_t rank, std::uint32_t step, std::uint32_t op);

/// Tensors carried across steps: initializer "X" -> "X/updated" (written by an op, in place).
std::map<std::string, std::string> carried_tensors(const graph::Graph& g);

}  // namespace probelab::probes
