// Expectations of a scenario and their evaluation against a finished run's report (report.json,
// schema in sim/run/report.h). Each list entry of `expectations:` is a one-key mapping naming its
// kind; `probelab list expectations` prints every kind with its parameters.
//
// Kinds are registered by name (ExpectationRegistry): one file under sim/scenario/expectations/
// defines a kind's parameters, parsing, validation against the scenario and evaluation, and one line
// in expectations/builtin.cpp registers it. The built-in kinds:
//
//   - detection: {kind: nan, op: "attn/softmax*", element: 17, step: 2, rank: 0, max_latency_cycles: 5000}
//       some anomaly matches every given field (only `kind` is required; `op` and `tensor` are
//       globs over the op and the tensor concerned, e.g. tensor: "conv15/gradient");
//       kinds: overflow, underflow, invalid, nan_input, inf_input, nan (= invalid or nan_input),
//       inf (= inf_input, or a latch whose value is +-inf), condition (a probe condition fired),
//       integrity (an edge hash differs between producer and consumer), any. The latency bound
//       applies to the matching anomaly.
//   - no_detection: {}            nothing flagged: no anomaly, no condition fired and (unless
//                                 `comparisons: false`) no failing reference comparison;
//                                 optional `kind`/`op`/`step`/`rank` narrow it to matching
//                                 anomalies (and, for step/rank, comparisons): "nothing before
//                                 step 2" is one entry per step
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
//       candidate has cause C. Optional on the same candidate: `step`, `rank`, `element` (exact)
//       and `path: [glob, ...]` (its propagation path holds hops matching the globs, in order;
//       a hop reads "op@step" or "tensor", followed by " (rank N)" on another rank than the
//       candidate's)
//   - capture: {overhead_below_percent: 3, dropped: 0, variant: single}
//       capture overhead (simulated cycles, against the same run without probes) below P %;
//       `dropped`: exact count N, or ">= N" / "<= N" / "> N" / "< N"; `variant` picks a variant run
//   - perf_finding: {cause: hbm_channel, rank: 0, channel: 5, ops: ["*matmul*"], top: true, only: false}
//       report.json perf.findings (sim/run/perf_findings.h) holds a finding of cause hbm_channel |
//       link (src, dst) | straggler | launch at those fields, naming ops matching every glob;
//       `top` (default true): it is the first finding; `only`: no finding of another cause
//   - quantization: {op: mlp/fc2, operand: activations, steps: [5, 20], underflow: ">= 1500", variant: v}
//       report.json quantization (sim/run/quant_report.h; a variant's with `variant`): the codes of
//       the layers matching `op` saturated / flushed to zero, summed over the steps, within bounds
//   - loss: {drop_percent: ">= 1", rank: 0, from_step: 0, to_step: 9, variant: fp16_weights}
//       the training loss of `rank` (default 0) fell by a bound in percent from `from_step`
//       (default 0) to `to_step` (default the last): 100 (loss[from] - loss[to]) / |loss[from]|;
//       "== 0" is a loss that did not move at all; `variant` picks a variant run
//   - hang: {rank: 1, step: 3, op: "*reduce_scatter*", apart: true, link: "r3 nic*"}   (or `hang: true`)
//       the job hangs (report.json "hang"): some blocked rank matches every given field;
//       `apart`: ranks are at different collectives under one call number; `link`: a message was
//       lost on a dead link of that name (link_down). A run that hangs fails unless a hang
//       expectation holds
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/yaml_view.h"

namespace probelab::sim {

/// The verdict of one expectation.
struct ExpectationResult {
  bool passed = false;
  std::string expected;  // one line, what the scenario asked for
  std::string actual;    // one line, what the run showed
};

/// What a parsed expectation is checked against once the whole scenario is known.
struct ExpectationScope {
  std::int64_t steps = 1;
  std::int64_t ranks = 1;
  std::vector<std::string> variants;  // variant names of the scenario
};

/// One parsed expectation of some kind.
class ExpectationCheck {
 public:
  virtual ~ExpectationCheck() = default;
  /// Rejects what cannot hold in this scenario (a step beyond `steps`, an unknown variant):
  /// throws ScenarioError through `entry` (the list entry; `entry[kind]` is the body).
  virtual void validate(const ExpectationScope& scope, const YamlView& entry) const;
  /// Evaluates against a report (the JSON written as report.json, before its `expectations` field).
  virtual ExpectationResult evaluate(const nlohmann::json& report) const = 0;
  /// The parsed parameters with defaults applied, as JSON (for tests and `probelab show`).
  virtual nlohmann::json params() const = 0;
};

/// A kind of expectation: its name, a one-line description, and its parser. `parse` receives the
/// kind's body (a mapping, or the scalar written after the key) and validates keys and values.
struct ExpectationKind {
  std::string name;
  std::string doc;
  std::function<std::unique_ptr<ExpectationCheck>(const YamlView& body)> parse;
};

class ExpectationRegistry {
 public:
  static ExpectationRegistry& instance();  // the built-in kinds are registered on first use
  void add(ExpectationKind kind);          // throws std::logic_error on a duplicate name
  const ExpectationKind* find(const std::string& name) const;
  const std::map<std::string, ExpectationKind>& all() const { return kinds_; }

 private:
  ExpectationRegistry() = default;
  std::map<std::string, ExpectationKind> kinds_;
};

/// Registers every built-in kind (sim/scenario/expectations/builtin.cpp).
void register_builtin_expectations(ExpectationRegistry& r);

struct Expectation {
  std::string kind;
  std::shared_ptr<const ExpectationCheck> check;
  int line = 0;  // line in the scenario file (1-based; 0 unknown)
};

/// The expectation kinds with a one-line description each (for `probelab list`).
std::vector<std::pair<std::string, std::string>> expectation_kinds();
/// The anomaly kinds a detection expectation may name.
const std::vector<std::string>& detection_kinds();

/// Parses one list entry (a one-key mapping); validates keys, values and globs.
Expectation parse_expectation(const YamlView& entry);

/// Evaluates against a report (the JSON written as report.json, before its `expectations` field).
ExpectationResult evaluate(const Expectation& e, const nlohmann::json& report);

}  // namespace probelab::sim
