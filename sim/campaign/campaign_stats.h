// Scoring a campaign: rates with 95% Wilson score intervals, latency percentiles, and the summary
// (summary.json, summary.txt) and trials.csv. Everything here is a pure function of the trial
// records sorted by index (and of the fault-free runs' observations), so the same campaign gives
// the same bytes with one process, --jobs J or K MPI ranks.
//
// Rates (each {k, n, rate, ci95: [lo, hi]}; rate and interval null when n = 0):
//   coverage            (detected + crash + hang) / (those + sdc): faults that were not masked
//                       and were noticed, crashes and hangs counting as detected-unrecoverable
//   probe_coverage      detected / (detected + sdc): what the probe runtime itself caught
//   top1, top3          localization accuracy over detected trials with an op site
//   source_top1         top1 over the localized trials whose fault writes NaN/Inf (nan, inf)
//   cause_correct       detected trials with a true cause whose top candidate names that cause
//   element_exact       trials with a latch at the injected op/step/rank/tensor naming the injected element
//   sdc_rate, tolerated_rate, masked_rate, unrecoverable_rate   over fired trials; sdc_by_severity
//   not_fired_rate      over all trials (the sampler draws reachable sites only: should be ~0)
//   false_positive_rate distinct clean runs (campaign.clean_runs; bit-identical outputs count once)
//                       that flagged anything; the golden runs' flags are reported beside it
// Latency: detection latency in device cycles (fault applied -> host read the exception),
// nearest-rank percentiles p50/p90/p99 and max.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/campaign/campaign_outcome.h"

namespace probelab::sim {

struct Interval {
  double lo = 0.0, hi = 0.0;
};

/// 95% Wilson score interval of k successes in n trials (z = 1.959963984540054); n > 0.
Interval wilson_interval(std::uint64_t k, std::uint64_t n);

/// Nearest-rank percentile (p in (0, 100]) of values (any order); values non-empty.
std::uint64_t percentile(std::vector<std::uint64_t> values, double p);

/// {k, n, rate, ci95}.
nlohmann::json rate_json(std::uint64_t k, std::uint64_t n);

/// One fault-free run scored for false positives.
struct CleanRun {
  std::uint64_t index = 0;
  std::vector<std::pair<std::string, std::string>> sets;  // the --set overrides it ran with
  std::string status = "ok";  // ok | error | crash | hang
  std::string error;
  std::uint64_t digest = 0;   // of every output tensor (bit-identical runs share it)
  bool flagged = false;
  std::string flag;           // what flagged, e.g. "invalid at fc1 step 2"
  nlohmann::json to_json() const;
  static CleanRun from_json(const nlohmann::json& j);
};

/// What the summary states about the campaign besides its trials.
struct CampaignInfo {
  std::string scenario;          // scenario name
  std::uint64_t seed = 0;        // campaign seed
  std::uint64_t trials = 0;      // trials requested
  std::string sampling;
  std::vector<TrialObservation> golden;  // fault-free runs
  bool golden_deterministic = true;
  std::vector<CleanRun> clean;           // clean runs for the false-positive rate
  std::uint64_t sdc_max_ulp = 4;         // the SDC tolerance the trials were scored with
  double sdc_rtol = 0.0;
  bool perf = false;                     // the fault model has performance faults (perf findings flag clean runs)
};

/// summary.json. `records` in any order (sorted by index here); records with index >= trials
/// are ignored.
nlohmann::json campaign_summary(const CampaignInfo& info, std::vector<TrialRecord> records);
/// summary.txt from summary.json.
std::string campaign_summary_text(const nlohmann::json& summary);
/// trials.csv (header + one row per record, sorted by index).
std::string trials_csv(std::vector<TrialRecord> records);

}  // namespace probelab::sim
