// Expectations of a scenario and their evaluation against a finished run's report (report.json,
// schema in sim/report.h). Each list entry of `expectations:` is a one-key mapping naming its kind:
//
//   - detection: {kind: nan, op: "attn/softmax*", element: 17, step: 2, rank: 0, max_latency_cycles: 5000}
//       some anomaly matches every given field (only `kind` is required; `op` and `tensor` are
//       globs over the op and the tensor concerned, e.g. tensor: "conv15/gradient");
//       kinds: overflow, underflow, invalid, nan_input, nan (= invalid or nan_input), condition
//       (a probe condition fired), any. The latency bound applies to the matching anomaly.
//   - no_detection: {}            nothing flagged: no anomaly, no condition fired and (unless
//                                 `comparisons: false`) no failing reference comparison;
//                                 optional `kind`/`op` narrow it to matching anomalies
//   - comparison: {op: "ln_relu*", result: fails, inner_op: "*layer_norm", first: true}
//       `fails`: some comparison of a matching op failed (`inner_op`: its decomposition blamed an
//       inner op matching the glob; `first`: it is the first failing op); `passes`: at least one
//       comparison of a matching op exists and all passed
//   - consistency: {op: "grad_allreduce*", step: 0, min_divergence: 1e-3, growing: true}
//       ranks diverge first at that op (and step); the first divergence exceeds min_divergence;
//       `growing`: the per-step maximum divergence grows from the first to the last step.
//     consistency: {consistent: true}   every rank agrees with the reference rank
//   - diagnosis: {op: "conv15*", cause: underflow, top: 1, exclusive: true}
//       a candidate among the top `top` (default 1) is op X (and/or concerns tensor T: `tensor`
//       glob; one of op and tensor is required) with cause class C; `exclusive`: no other
//       candidate has cause C
//   - capture: {overhead_below_percent: 3, dropped: 0, variant: single}
//       capture overhead (simulated cycles, against the same run without probes) below P %;
//       `dropped`: exact count N, or ">= N" / "<= N" / "> N" / "< N"; `variant` picks a variant run
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/yaml_view.h"

namespace probelab::sim {

struct DetectionExpect {
  std::string kind;
  std::optional<std::string> op;
  std::optional<std::string> tensor;
  std::optional<std::int64_t> element, step, rank;
  std::optional<std::uint64_t> max_latency_cycles;
};

struct NoDetectionExpect {
  std::optional<std::string> kind;
  std::optional<std::string> op;
  bool comparisons = true;
};

struct ComparisonExpect {
  std::string op;
  bool fails = true;
  std::optional<std::string> inner_op;
  bool first = false;
  std::optional<std::int64_t> step, rank;
};

struct ConsistencyExpect {
  bool consistent = false;
  std::optional<std::string> op;
  std::optional<std::int64_t> step;
  std::optional<double> min_divergence;
  bool growing = false;
};

struct DiagnosisExpect {
  std::string op = "*";
  std::optional<std::string> tensor;
  std::string cause;
  int top = 1;
  bool exclusive = false;
};

/// A bound on a counter: `value <cmp> n`.
struct CountBound {
  std::string cmp = "==";  // == >= <= > <
  std::uint64_t n = 0;
  bool holds(std::uint64_t v) const;
  std::string str() const;  // "== 0", ">= 1"
};

struct CaptureExpect {
  std::optional<double> overhead_below_percent;
  std::optional<CountBound> dropped;
  std::optional<std::string> variant;
};

struct Expectation {
  std::string kind;  // detection, no_detection, comparison, consistency, diagnosis, capture
  std::variant<DetectionExpect, NoDetectionExpect, ComparisonExpect, ConsistencyExpect,
               DiagnosisExpect, CaptureExpect>
      body;
  int line = 0;  // line in the scenario file (1-based; 0 unknown)
};

/// The verdict of one expectation.
struct ExpectationResult {
  bool passed = false;
  std::string expected;  // one line, what the scenario asked for
  std::string actual;    // one line, what the run showed
};

/// The expectation kinds with a one-line description each (for `probelab list`).
const std::vector<std::pair<std::string, std::string>>& expectation_kinds();
/// The anomaly kinds a detection expectation may name.
const std::vector<std::string>& detection_kinds();

/// Parses one list entry (a one-key mapping); validates keys, values and globs.
Expectation parse_expectation(const YamlView& entry);

/// Evaluates against a report (the JSON written as report.json, before its `expectations` field).
ExpectationResult evaluate(const Expectation& e, const nlohmann::json& report);

}  // namespace probelab::sim
