// Diagnosis: ranked root-cause candidates from every piece of evidence the runtime has.
//
// Evidence and what it yields (scores order the candidates; only the order is meaningful):
//  - origins of non-finite values (provenance.h), in causal order: the first one is the best
//    candidate of all (0.95), later ones follow (0.9 down). The cause follows from the latch:
//      invalid (or an origin without a latch)   nan_source
//      overflow raised by an FP16 accumulator or a split-K partial (latch detail bits), or by a
//        collective accumulating in FP16         fp16_accumulation_overflow
//      overflow of an FP32 result on its conversion to the output dtype   output_range_overflow
//      overflow in the computation itself    overflow
//    and when the CPU replay of the op on its captured inputs (ReplayCheck) does not reproduce
//    the latched anomaly: data_corruption (a hardware or data-corruption suspect).
//    An origin that wrote a finite value beyond what its inputs allow (Origin::jump, see
//    provenance.h), which a later op overflowed on: data_corruption of that op's output.
//    Origins in memory (a value no op wrote) and host data: data_corruption of that tensor and
//    element, blamed on the op that read it, with the writer and the cycle window; except an
//    initializer of the model that is non-finite as loaded (a -Inf mask): nan_source of that tensor.
//  - edge integrity: a tensor whose hash at its consumer differs from its producer's
//    (IntegrityViolation): data_corruption of that tensor between the two captures (0.97).
//  - every condition that fired is a candidate with its statistic, threshold and step; the class
//    follows from the statistic: nan_count/inf_count above a bound -> nan_source; an upper bound
//    exceeded on a magnitude (max_abs, max, abs_mean, l2 and their finite_ variants) -> overflow; a
//    magnitude (max_abs, abs_mean, l2, std, finite_ variants) below a lower bound, or zero_count
//    above one -> underflow; anything else -> condition. The causally first trigger of a
//    (step, class) scores 0.8 (nan_source: 0.92 unless provenance puts its origin elsewhere),
//    later ones 0.3.
//  - reference comparisons: the first failing op 0.6 (precision; a fused op's decomposition:
//    fused_op_precision 0.87). Otherwise an error with the shape of corrupted values is
//    data_corruption: no NaN/Inf mismatch, at most 2 elements or 10% of them outside 0.5%, and
//    the worst at least 1024 ULP off, or at least 32 ULP off while the elements beyond 0.1% are
//    as few (the op is right to rounding everywhere else; lost precision, e.g. an FP16
//    accumulator, spreads errors of a few ULP over most elements instead); any failure of an op
//    that only moves or selects values (Reshape, Flatten, Transpose, Gather, Relu, MaxPool...),
//    whose replay is bit-exact.
//    A first divergence causally before the first non-finite origin on the
//    same rank (an earlier step, or the same step and upstream of it) explains that origin: 0.97.
//  - cross-rank divergence at a collective: collective_order (0.9), elsewhere data_corruption.
//  - corrupt capture records: data_corruption of the capture path (0.2).
// Underflow latches: underflow (0.6).
// Suggestions name the configuration the evidence shows: the accumulator dtype, the output
// dtype, the loss scale of the graph (a Scale op on the loss), the collective's accumulation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/graph.h"
#include "probes/anomaly.h"
#include "probes/compare.h"
#include "probes/consistency.h"
#include "probes/provenance.h"

namespace probelab::probes {

enum class CauseClass : std::uint8_t {
  NanSource,                // an op produced the first NaN/Inf of a history
  Fp16AccumulationOverflow, // an FP16 accumulator / split-K partial / FP16 collective buffer overflowed
  OutputRangeOverflow,      // an FP32-accumulated result overflowed only on conversion to the output dtype
  Overflow,                 // overflow in the computation itself
  Underflow,                // underflow / gradient vanishing
  CollectiveOrder,          // ranks diverge at a collective (reduction order, nondeterminism)
  FusedOpPrecision,         // a fused op's inner op loses precision
  DataCorruption,           // values changed without an arithmetic cause (memory, hardware)
  Precision,                // an op fails the reference comparison (no finer class)
  Condition,                // a user condition fired on a statistic no other class covers
  QuantizationOverflow,     // a quantized Cube operand saturated its low-bit format (e.g. a lagging FP8 scale)
};
/// "nan_source", "fp16_accumulation_overflow", "output_range_overflow", "overflow", "underflow",
/// "collective_order", "fused_op_precision", "data_corruption", "precision", "condition",
/// "quantization_overflow"
std::string_view cause_class_name(CauseClass c);
/// Every class, in enum order.
const std::vector<CauseClass>& all_cause_classes();

struct Candidate {
  std::string op;           // executed op
  std::string tensor;       // tensor concerned, when known
  std::string inner_op;     // fused ops: the inner op named by decomposition
  std::string forward_op;   // backward ops: Op::grad_of
  CauseClass cause = CauseClass::NanSource;
  double score = 0;         // higher is more likely; only the order is meaningful
  std::optional<std::uint32_t> step, rank;
  std::optional<std::uint64_t> element;  // the element concerned (latched, corrupted)
  std::vector<std::string> propagation_path;  // origins: the path to the latest anomaly explained
  std::uint64_t explains = 0;               // anomalies whose history starts here
  std::string replay;       // "reproduced" | "not_reproduced" | "" (no replay possible)
  std::vector<std::string> evidence;
  std::string suggestion;
};

/// The CPU reference replay of an op on its captured inputs, checked at a latched element.
struct ReplayCheck {
  std::uint32_t rank = 0, step = 0, op_id = 0;
  AnomalyKind kind = AnomalyKind::Invalid;
  bool reproduced = false;
  std::string detail;  // e.g. "the FP32 replay gives 1.25 at element 17 (device: nan)"
};

/// A tensor whose hash at a consumer differs from the hash of what its producer wrote.
struct IntegrityViolation {
  std::uint32_t rank = 0;
  std::string tensor;                  // as the consumer reads it
  std::string writer_op;               // "" when the host wrote it (initial value)
  std::uint32_t writer_step = 0;
  std::string reader_op;
  std::uint32_t reader_step = 0;
  std::uint64_t written_hash = 0, read_hash = 0;
  std::uint64_t window_lo = 0, window_hi = 0;  // device cycles of the two captures
};
nlohmann::json to_json(const IntegrityViolation& v);

struct DiagnosisInput {
  const graph::Graph* graph = nullptr;  // executed snapshot (topology, op types, dtypes)
  std::span<const Origin> origins;      // causal order (resolve_provenance)
  std::span<const TriggerEvent> triggers;
  std::span<const OpComparison> comparisons;
  std::span<const ReplayCheck> replays;
  std::span<const IntegrityViolation> integrity;
  const ConsistencyResult* consistency = nullptr;
  /// For the first divergence at a collective: the most an order of additions changes in its
  /// result (collective_order_limit(), on its first divergent rank), when known.
  std::optional<double> divergence_order_limit;
  /// For a first divergence known only by its hash: the least it can be, from the captured max |x|
  /// and smallest value of the edge on the divergent rank and its reference, when both were seen.
  std::optional<double> divergence_lower_bound;
  std::uint64_t corrupt_records = 0;
};

/// Ranks candidates: one per (op, cause), best first, at most `top_k`.
std::vector<Candidate> diagnose(const DiagnosisInput& in, std::size_t top_k = 3);

nlohmann::json to_json(const Candidate& c);

}  // namespace probelab::probes
