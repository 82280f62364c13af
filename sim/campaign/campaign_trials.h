// The trial list of a campaign: trial i is a pure function of (fault model, executed graph,
// scenario steps/ranks, campaign seed, i) — drawn from its own counter-seeded generator, so the
// list derives from the seed alone, a longer campaign extends a shorter one, and any subset of
// trials (a worker's, a rank's, a resumed run's) is generated without the others.
//
// Sampling: `uniform` picks a fault entry by weight; `per_kind` and `per_op` stratify: trial i
// belongs to stratum i mod S (strata = the sorted distinct kinds, or op names), then an eligible
// entry is picked by weight. Sites are then drawn uniformly: op (among the entry's resolved ops,
// sorted by name), step, rank, tensor side and slot, element, bits, target, `choose` values.
// With a site census of the fault-free run (site_census.h), only sites it reached are drawn: an op
// is eligible only if one of the entry's sides/slots/targets was reached at one of its steps and
// ranks, and (step, rank) is drawn among the executions that reached the drawn site.
// An hbm flip's cycle is drawn from the flipped tensor's live window in the fault-free run (after
// its producer, before its last consumer starts; to the end for outputs) with `cycle: live`, or
// from the whole run with `cycle: any`.
//
// Each trial is one replayable injection descriptor (kind first, explicit seed), appended to the
// scenario's injections. Its ground truth is the op it corrupts (with the ops a fused op replaced);
// an HBM flip's truth is the producer and the consumers of the flipped tensor. The true cause
// class: a NaN written into an op's result: nan_source, an Inf: overflow (data_corruption either way
// when the run replays that op on its captured inputs, which cannot reproduce an injected value);
// NaN/Inf written into an op's input: data_corruption (no op wrote it); a finite value, a bit flip
// anywhere, a stuck lane: data_corruption; FP16 accumulation: fp16_accumulation_overflow;
// collective order: collective_order; other kinds: none (not scored for cause).
//
// Performance faults (hbm_channel_degraded, link_degraded, straggler, core_throttled, launch_delay) are scored on
// the perf findings (sim/run/perf_findings.h) instead of the precision diagnosis: the truth is the
// slowed component, named as perf_component() names a finding ("hbm_channel r0 ch5", "link r1
// hccs->r2", "straggler r2", "core r0 c7", "launch r0"), and the true cause is the finding's cause. A degraded
// link's dst is drawn among the chips src has a link to (TrialSpace::first_link).
//
// A dead link (link_down) is drawn like a degraded one, at a device cycle drawn uniformly over the
// fault-free run (`cycle` in choose/set overrides it). It is scored on the job's hang report
// (TrialSpec::hang_scored): the truth is the dead link ("link r5 nic.tx"; with both_directions
// also its reverse), the suspects are the links report.json hang.lost names, first lost first, and
// the cause is link_down. A link that dies carrying nothing more leaves the job finishing: masked.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "graph/graph.h"
#include "sim/campaign/site_census.h"
#include "sim/scenario/campaign_model.h"
#include "sim/scenario/prepared_run.h"

namespace probelab::sim {

struct TrialSpec {
  std::uint64_t index = 0;
  std::string stratum;                 // "" under uniform sampling
  std::size_t entry = 0;               // index of the fault entry
  std::string kind;
  std::string op;                      // op whose execution is hit (hbm: the tensor's producer); "" if none
  std::string target;                  // bitflip target, "" otherwise
  std::vector<std::string> truth_ops;  // names a correct localization may give (sorted)
  std::string truth_cause;             // cause class a correct diagnosis gives ("" : not scored)
  std::string truth_cause_replayed;    // the same when the run replays the op ("" : as truth_cause)
  bool nonfinite = false;              // the fault writes NaN/Inf (nan, inf)
  bool perf = false;                   // a performance fault: truth_ops holds the slowed component
  bool hang_scored = false;            // a dead link: truth_ops holds it, scored on the job's hang
  std::optional<std::uint64_t> element;  // injected element of `op`'s tensor (value kinds)
  std::string side;                    // output | input (value kinds)
  std::string tensor_name;             // the tensor of that side and slot
  std::uint16_t slot = 0;
  std::optional<std::uint32_t> step, rank;
  YAML::Node descriptor;               // the injection descriptor
  nlohmann::json descriptor_json() const;
};

/// What the trial generator needs to know of the scenario.
struct TrialSpace {
  const graph::Graph* executed = nullptr;  // the snapshot the chips run (fused)
  std::uint32_t steps = 1;
  std::uint32_t ranks = 1;
  std::uint64_t cycle_span = 1;            // device cycles of the fault-free run (hbm flip cycles)
  /// Device cycles [first start, last end] of each op's kernel tasks in the fault-free run; an
  /// hbm flip (cycle: live) lands between its tensor's producer and last consumer.
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> op_windows;
  /// Sites the fault-free run reached (nullptr: every site of every op is assumed reachable).
  const SiteCensus* census = nullptr;
  /// Name of the link chip `src` sends on to chip `dst` when it reaches dst directly (an HCCS
  /// link to a neighbour, or its NIC towards another server), "" otherwise; null: single chip.
  std::function<std::string(std::uint32_t src, std::uint32_t dst)> first_link = nullptr;
};

/// TrialSpace::first_link of the job's cluster (sim/scenario/injections.h cluster_first_link);
/// null for one chip.
std::function<std::string(std::uint32_t, std::uint32_t)> trial_first_link(const PreparedRun& run);

/// True for the kinds scored on perf findings.
bool is_perf_kind(const std::string& kind);

class TrialGenerator {
 public:
  /// Resolves every entry's op globs and type filters against the executed graph. Throws
  /// ScenarioError (naming the entry) when an entry matches no op, names steps/ranks outside
  /// the scenario, or the model has no fault entry.
  TrialGenerator(const FaultModel& model, const TrialSpace& space);

  const std::vector<std::string>& strata() const { return strata_; }
  TrialSpec trial(std::uint64_t seed, std::uint64_t index) const;
  /// Trials 0..n-1.
  std::vector<TrialSpec> trials(std::uint64_t seed, std::uint64_t n) const;

 private:
  struct Entry {
    const FaultEntry* spec = nullptr;
    std::vector<std::uint32_t> ops;  // op ids, sorted by op name
    std::vector<std::uint64_t> steps, ranks;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> links;  // link kinds: (src, dst) with a direct link
  };
  std::size_t pick_entry(const std::vector<std::size_t>& eligible, std::uint64_t r) const;
  void fill_sites(const Entry& e, std::uint32_t op_id, std::uint64_t rng_seed, TrialSpec& t) const;
  /// (rank, step) executions of `op` at the entry's steps and ranks that reached `site` ("": all).
  std::vector<SiteCensus::Execution> executions(const Entry& e, const graph::Op& op, const std::string& site) const;
  /// The sides/slots (value kinds) or targets (bitflip) of `op` the entry may draw and the census
  /// saw reached; empty: none.
  std::vector<std::pair<std::string, std::uint16_t>> reachable_slots(const Entry& e, const graph::Op& op) const;
  std::vector<std::string> reachable_targets(const Entry& e, const graph::Op& op) const;
  std::uint64_t live_cycle(std::mt19937_64& gen, const std::string& tensor, bool live) const;

  FaultModel model_;
  TrialSpace space_;
  std::vector<Entry> entries_;
  std::vector<std::string> strata_;
  std::vector<std::vector<std::size_t>> stratum_entries_;  // per stratum: eligible entries
};

/// splitmix64 step (counter-based seeding of trial generators).
std::uint64_t campaign_mix(std::uint64_t x);

}  // namespace probelab::sim
