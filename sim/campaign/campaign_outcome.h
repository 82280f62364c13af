// What one campaign trial showed and how it is scored.
//
// An observation is extracted (in the worker process) from simulate()'s result: whether the
// injection fired and when, whether the probe runtime detected anything (an exception latch, a
// probe condition, a failing reference comparison, a cross-rank inconsistency), its ranked
// localization (diagnosis candidates best first; without a diagnosis, the source ops of
// exception latches in cycle order, then the first failing comparison), the detection latency and
// the output check against the golden envelope.
//
// Outcome classes, decided in this order:
//   hang          the worker was killed by the timeout, or the simulated job hung (report.json
//                 hang; a dead-link trial's hang is scored below instead)
//   crash         the worker died, or the simulation ended in an error (detected-unrecoverable)
//   not_fired     the injection never applied (its site was not reached): scored nowhere
//   top1 / top3   detected; the true op is the first / among the first three suspects
//   mislocalized  detected; the true op is not among the first three suspects
//   detected      detected; the fault has no op site (interrupts, capture records)
//   masked        nothing detected; every output within the golden envelope
//   tolerated     nothing detected; outputs outside the golden envelope, but within the SDC
//                 tolerance (sdc_tolerance: max ULP or relative deviation from the nearest bound)
//   sdc           nothing detected; some output outside the golden envelope beyond the tolerance
//                 (severity: low <= 16 ULP, medium <= 1024 ULP, high beyond, nonfinite)
//
// Besides the outcome, a trial is scored for what the diagnosis says (TrialRecord):
//   cause_correct  the top candidate's cause class is the trial's true cause (TrialSpec::truth_cause;
//                  truth_cause_replayed when the run replayed the true op at the injected step)
//   element_exact  a latch at the true op, step, rank and tensor names the injected element
// A performance fault (TrialSpec::perf) is scored on the perf findings instead: detected when the
// run has any, localized by their components (perf_suspects), its cause by theirs.
// A dead link (TrialSpec::hang_scored) is scored on the job's hang: a hang is its detection (at the
// cycle the first host noticed it), the links hang.lost names are its suspects (first lost first),
// their cause is link_down.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/campaign/campaign_envelope.h"
#include "sim/campaign/campaign_trials.h"

namespace probelab::sim {

enum class Outcome { Top1, Top3, Mislocalized, Detected, Masked, Tolerated, Sdc, Crash, Hang, NotFired };
std::string_view outcome_name(Outcome o);
std::optional<Outcome> parse_outcome(std::string_view s);
/// Every outcome in report order.
const std::vector<Outcome>& all_outcomes();

struct TrialObservation {
  std::string status = "ok";            // ok | error | crash | hang
  std::string error;
  bool fired = false;
  std::optional<std::uint64_t> inject_cycle;  // first application of the fault
  bool detected = false;
  std::uint64_t exceptions = 0, conditions = 0, failing_comparisons = 0, integrity = 0;
  bool inconsistent = false;
  std::vector<std::vector<std::string>> suspects;  // ranked; each: the names one suspect goes by
  std::vector<std::string> suspect_causes;         // cause class of each suspect ("" without a diagnosis)
  std::vector<std::string> perf_suspects;          // perf findings best first, as perf_component() names them
  std::vector<std::string> perf_causes;            // and their causes
  bool job_hang = false;                           // the simulated job hung (status hang, report.json hang)
  std::vector<std::string> hang_links;             // its lost messages' links ("link r5 nic.tx"), first lost first
  std::optional<std::uint64_t> hang_cycle;         // when the first host noticed it
  /// Exception latches (the first 256): where and which element.
  struct Latched {
    std::string op, kind, tensor;
    std::uint32_t step = 0, rank = 0;
    std::uint64_t element = 0;
    bool on_input = false;
  };
  std::vector<Latched> latched;
  /// Ops the runtime replayed on their captured inputs: (op, step, rank).
  std::vector<std::tuple<std::string, std::uint32_t, std::uint32_t>> replayed;
  std::optional<std::uint64_t> detection_cycle;    // host learned of the first exception at/after injection
  OutputCheck output;

  nlohmann::json to_json() const;
  static TrialObservation from_json(const nlohmann::json& j);
};

/// Extracts the observation from simulate()'s JSON (the run with the injection).
TrialObservation observe(const nlohmann::json& sim_result, const OutputCheck& output);

/// The component a perf finding names: "hbm_channel r0 ch5", "link r1 hccs->r2", "straggler r2",
/// "core r0 c7", "launch r0" (the same names a perf trial's truth uses, campaign_trials.h).
std::string perf_component(const nlohmann::json& finding);

/// Whether a fault-free run flagged anything (a false positive); with `perf` (a campaign of
/// performance faults) a perf finding counts too.
bool flags_anything(const TrialObservation& o, bool perf = false);

/// Outputs deviating by at most this much are tolerated, not SDC.
struct SdcTolerance {
  std::uint64_t max_ulp = 4;
  double rtol = 0.0;
};
/// "low" (<= 16 ULP), "medium" (<= 1024 ULP), "high", "nonfinite" of an output check outside the envelope.
std::string sdc_severity(const OutputCheck& c);

/// 1-based position of the first suspect naming a truth op; nullopt when none does.
std::optional<std::size_t> truth_rank(const TrialObservation& o, const std::vector<std::string>& truth_ops);

Outcome classify(const TrialObservation& o, const std::vector<std::string>& truth_ops, const SdcTolerance& tol = {});

/// One line of trials.jsonl: the trial, what it showed, its outcome.
struct TrialRecord {
  std::uint64_t index = 0;
  std::string stratum, kind, op, target;
  std::vector<std::string> truth_ops;
  std::string truth_cause;                     // the cause this trial is scored against ("": none)
  bool nonfinite = false;                      // the fault writes NaN/Inf
  nlohmann::json descriptor;
  TrialObservation obs;
  Outcome outcome = Outcome::Masked;
  std::optional<std::size_t> rank;             // truth_rank
  std::optional<std::uint64_t> latency_cycles; // detection_cycle - inject_cycle
  std::optional<bool> cause_correct;           // detected and a truth cause: the top cause matches
  std::optional<bool> element_exact;           // a latch at the injected op/step/rank/tensor: its element matches
  std::string severity;                        // sdc: sdc_severity()

  nlohmann::json to_json() const;
  /// Throws std::exception on a malformed record.
  static TrialRecord from_json(const nlohmann::json& j);
};

/// Scores a trial.
TrialRecord make_record(const TrialSpec& spec, TrialObservation obs, const SdcTolerance& tol = {});

}  // namespace probelab::sim
