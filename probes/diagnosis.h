// Diagnosis: ranked root-cause candidates from every piece of evidence the runtime has.
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

namespace probelab::probes {

enum class CauseClass : std::uint8_t {
  NanSource,                // an op produced the first NaN/Inf of a step
  Fp16AccumulationOverflow, // overflow in an accumulating op (MatMul/Conv/reduction/collective) in FP16
  Overflow,                 // other overflow
  Underflow,                // underflow / gradient vanishing
  CollectiveOrder,          // ranks diverge at a collective (reduction order, nondeterminism)
  FusedOpPrecision,         // a fused op's inner op loses precision
  DataCorruption,           // bit flip / corruption: values changed without an arithmetic cause
  Precision,                // an op fails the reference comparison (no finer class)
};
std::string_view cause_class_name(CauseClass c);  // "nan_source", "fp16_accumulation_overflow",
                                                  // "overflow", "underflow", "collective_order",
                                                  // "fused_op_precision", "data_corruption", "precision"

struct Candidate {
  std::string op;           // executed op
  std::string tensor;       // tensor concerned, when known
  std::string inner_op;     // fused ops: the inner op named by decomposition
  std::string forward_op;   // backward ops: Op::grad_of
  CauseClass cause = CauseClass::NanSource;
  double score = 0;         // higher is more likely; only the order is meaningful
  std::optional<std::uint32_t> step, rank;
  std::vector<std::string> evidence;
  std::string suggestion;
};

struct DiagnosisInput {
  const graph::Graph* graph = nullptr;  // executed snapshot (topology, op types, dtypes)
  std::span<const AnomalyRecord> anomalies;
  std::span<const TriggerEvent> triggers;
  std::span<const OpComparison> comparisons;
  const ConsistencyResult* consistency = nullptr;
  std::uint64_t corrupt_records = 0;
};

/// Ranks candidates: one per (op, cause), best first, at most `top_k`.
std::vector<Candidate> diagnose(const DiagnosisInput& in, std::size_t top_k = 3);

nlohmann::json to_json(const Candidate& c);

}  // namespace probelab::probes
