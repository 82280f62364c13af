// The per-rank result of a run of the probe runtime (report.json's "probes" section).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/anomaly.h"
#include "probes/capture_drain.h"
#include "probes/compare.h"
#include "probes/diagnosis.h"
#include "probes/dump_writer.h"

namespace probelab::probes {

struct BreakpointHit {
  std::string op;
  std::uint32_t op_id = 0, task_id = 0, stream = 0, step = 0;
  std::string condition;
  bool condition_held = true;  // host re-check of a condition the device could not evaluate
  std::uint64_t halt_cycle = 0, resume_cycle = 0;
  std::vector<std::string> dumped;  // files of the inputs/outputs dumped
  std::vector<std::string> missing; // tensors the locator could not place
};

struct StepSummary {
  std::uint32_t step = 0;
  std::uint32_t float_status = 0;  // float status bits raised during the step (kRegFloatStatus read
                                   // at step end, or the step's StepStatus record)
  std::uint64_t records = 0;       // capture records stamped with this step
  std::uint64_t anomalies = 0;
};

/// A `rewind` action fired: what the runner re-executes (sim/run/rewind.h). The run stops after
/// `step`; the re-execution starts at the last checkpoint at or before it.
struct RewindRequest {
  std::uint32_t step = 0, rank = 0;
  std::string by;           // "condition" | "rule"
  std::string expression;   // the condition or rule text
  std::string watch_point;  // conditions: the watch point
  std::string op, tensor;   // conditions: where it held; rules: the first op that latched this step
  bool full = true, all_ops = false, then_continue = false;  // RewindSpec
  std::vector<std::string> ops;  // the implicated ops to capture (empty with all_ops)
};
nlohmann::json to_json(const RewindRequest& r);

struct RuntimeReport {
  std::uint32_t rank = 0;
  std::vector<AnomalyRecord> anomalies;
  std::vector<TriggerEvent> triggers;
  std::vector<RuleEvent> rules_fired;
  std::vector<BreakpointHit> breakpoints;
  std::vector<StepSummary> steps;
  CaptureAccounting capture;
  std::map<std::string, std::uint64_t> counters;  // overflow_count, ..., anomaly_count
  std::uint64_t dump_files = 0, dump_bytes = 0, dump_raw_bytes = 0;
  std::uint64_t dump_entries = 0;                  // entries of the manifest (dump.json)
  std::vector<OpComparison> comparisons;
  std::optional<OpComparison> first_divergence;
  std::vector<Candidate> diagnosis;                // this rank's evidence only
  // Evidence kept for the causal provenance over all ranks (provenance.h), not in to_json():
  std::map<EdgeKey, EdgeObservation> observations;   // what captures showed of each tensor edge
  std::map<std::uint32_t, StepEvidence> step_evidence;  // per step: kinds with suppressed reports
  std::uint32_t enabled_kinds = 0;                 // kRegExcEnable as programmed
  std::uint32_t first_step = 0;
  std::map<std::string, UploadSummary> uploads;    // initial values the host uploaded in place of the graph's
  std::map<std::pair<std::uint32_t, std::string>, UploadSummary> feeds;  // (step, input) -> what the host fed
  std::map<std::uint32_t, std::uint32_t> comm_groups;  // collective op id -> communicator (RuntimeOptions::comm_group)
  double lr_factor = 0;  // the most the host multiplies an update's lr attribute by (0: unknown)
  std::vector<ReplayCheck> replays;                // CPU replays of latched ops on captured inputs
  std::vector<IntegrityViolation> integrity;       // edge hashes that differ
  /// XXH64 chained over the payload of every capture record drained, in drain order: two runs
  /// with the same fingerprint saw the same values (what makes clean runs distinct).
  std::uint64_t fingerprint = 0;
  bool stop_requested = false;
  std::vector<RewindRequest> rewinds;             // the first rewind action that fired (at most one)
  std::vector<std::string> warnings;
  nlohmann::json to_json() const;
};

}  // namespace probelab::probes
