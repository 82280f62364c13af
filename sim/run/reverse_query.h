// Reverse queries on a finished run (`probelab query RUN ...`), answered from the run's
// checkpoints plus deterministic re-execution — never from stored tensors of every step:
//
//  nonfinite TENSOR     the first step at which TENSOR held a NaN or an Inf
//  exceeds TENSOR X     the first step at which max |TENSOR| exceeded X (an Inf exceeds any X)
//    A state tensor (weight, optimizer state: in every checkpoint) is first searched in the
//    checkpoint files on disk — bisection for nonfinite (a non-finite weight stays non-finite
//    under the optimizers' updates), a scan for exceeds — which bounds the step to one checkpoint
//    interval; any other tensor is bounded by the whole run. Then one re-execution of that
//    interval with a statistics probe on the tensor's writer and a `stop` condition finds the
//    step, and one more, of that step only, with a full capture finds the first element.
//  writer TENSOR ELEMENT [--step S]   which op last wrote the element by the end of step S
//    (default: the run's last step): the tensor's writer (its producer; for a state tensor
//    updated in place, the optimizer's update op; the host for fed inputs and never-updated
//    initializers), re-executed from the last checkpoint at or before the step with full
//    captures: the element before and after the write, and what each op reading it in the same
//    step saw — a reader that saw another value than the writer wrote means the memory changed
//    in between (no op wrote it).
// Every re-execution is a normal run directory under <out> (default <RUN>/query.<n>/...), and
// the answer is written to <out>/query.json. Requires a run with checkpoints (the scenario and
// the states live there).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace probelab::sim {

struct QueryOptions {
  std::string kind;       // nonfinite | exceeds | writer
  std::string tensor;
  double threshold = 0;   // exceeds
  std::uint64_t element = 0;  // writer
  std::optional<std::uint32_t> step;  // writer: default the last step
  std::uint32_t rank = 0;
  std::filesystem::path out;  // empty: <run>/query
  int jobs = 1;
};

struct QueryResult {
  bool found = false;
  nlohmann::json answer;  // query.json
};

/// Throws ScenarioError on bad input (no run, no checkpoints, unknown tensor, element or step out
/// of range); std::runtime_error when a re-execution fails.
QueryResult reverse_query(const std::filesystem::path& run, const QueryOptions& opts,
                          const std::function<void(const std::string&)>& progress = {});

}  // namespace probelab::sim
