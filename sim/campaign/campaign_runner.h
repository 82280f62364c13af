// A fault-injection campaign over one scenario (`probelab campaign`): prepares the scenario and
// its fault model (bad input throws before anything runs), runs the fault-free golden runs, then
// every trial in its own forked worker process (SystemC elaborates once per process), at most
// `jobs` at a time per rank, and writes under <out>/:
//   campaign.json   the campaign's identity (scenario, seed, fault model): --resume checks it
//   trials.jsonl    one line per finished trial (sim/campaign/campaign_store.h), appended as trials end
//   trials.csv      the same, sorted by trial index
//   summary.json    scores with 95% Wilson intervals (sim/campaign/campaign_stats.h); summary.txt for humans
//   summary.html    the same as a page: outcome bars with Wilson intervals per kind and per op
//                   (sim/campaign/campaign_html.h), written before summary.json
//   golden/run-<k>/ outputs of the fault-free runs (run 0 also records the site census the trials
//                   are drawn from: census.json); logs/trial-<i>.log of crashed or hung trials
//   clean/run-<k>/clean.json  the clean runs scored for false positives (campaign.clean_runs;
//                   kept across --resume)
// Under MPI (sim/campaign/campaign_comm.h) rank 0 runs the golden runs and writes every output; the other
// ranks need only the scenario. Results never depend on wall-clock time, jobs or ranks; only the
// trial timeout (a multiple of the fault-free run's wall time) and the progress display use it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/campaign/campaign_comm.h"
#include "sim/campaign/campaign_envelope.h"
#include "sim/campaign/campaign_store.h"
#include "sim/campaign/campaign_stats.h"
#include "sim/campaign/campaign_trials.h"
#include "sim/scenario/prepared_run.h"

namespace probelab::sim {

struct CampaignOptions {
  std::filesystem::path scenario;
  LoadOptions load;                         // --set, source root (the scenario seed stays as written)
  std::vector<std::string> faults;          // --fault: YAML fault entries replacing the scenario's list
  std::optional<std::uint64_t> trials;      // --trials (else campaign.trials)
  std::optional<std::uint64_t> seed;        // --seed: campaign seed (else campaign.seed, else the scenario's)
  int jobs = 1;
  std::filesystem::path out;                // empty: out/campaign/<scenario name>
  bool resume = false;
};

struct CampaignProgress {
  std::uint64_t done = 0;       // trials finished, including those found by --resume
  std::uint64_t total = 0;
  std::uint64_t resumed = 0;    // found in trials.jsonl at the start
  std::string last;             // "trial 17: top1"
};

class Campaign {
 public:
  explicit Campaign(CampaignOptions opts);

  /// Loads the scenario and its fault model and checks them against the model graph. Throws on
  /// bad input (ScenarioError and the other bad-input errors).
  void prepare();

  const std::string& name() const { return base_.scenario.name; }
  std::uint64_t trials() const { return trials_; }
  std::uint64_t seed() const { return seed_; }
  const std::filesystem::path& out_dir() const { return out_; }

  /// Runs the campaign. Returns summary.json on rank 0 (null elsewhere). `progress` is called on
  /// rank 0 after every finished trial.
  nlohmann::json run(CampaignComm& comm, const std::function<void(const CampaignProgress&)>& progress = {});

 private:
  struct Shared;  // what rank 0 broadcasts
  Shared golden(double& wall_seconds);
  /// The clean runs (campaign.clean_runs), reusing finished ones under --resume.
  std::vector<CleanRun> clean_runs(unsigned timeout_s) const;
  int run_trial(const TrialSpec& t, const Shared& sh, const std::filesystem::path& work,
                const std::filesystem::path& scratch) const;
  nlohmann::json identity() const;
  /// Every campaign.clean_runs.vary value a clean run may apply (a range: both ends) loads and
  /// prepares as that run would. Throws ScenarioError naming the vary key.
  void check_clean_vary(const std::filesystem::path& file) const;
  /// The fault model has performance faults (scored on perf findings; they flag clean runs too).
  bool scores_perf() const;
  /// Rank 0, before anything is written: --out is (or can be made) a writable directory whose
  /// trials.jsonl and campaign.json are regular files if present; removes scratch directories
  /// (work.<pid>) of processes that are gone. Throws ScenarioError.
  void prepare_output_dir() const;
  /// --resume: campaign.json must parse and match `id` (and must exist when trials do); returns
  /// the finished trials. Throws ScenarioError.
  LoadedTrials resume_trials(const nlohmann::json& id) const;

  CampaignOptions opts_;
  PreparedRun base_;
  FaultModel model_;
  std::uint64_t trials_ = 0, seed_ = 0;
  std::filesystem::path out_;
};

}  // namespace probelab::sim
