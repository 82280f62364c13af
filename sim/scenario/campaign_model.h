// The fault model of a campaign: the `campaign:` section of a scenario (or the same keys given on
// the command line). It says what to sample — injector kinds and their sites — and how trials are
// scored. Validated at load (ScenarioError naming file, line:column, key, what was expected);
// op globs are resolved against the executed graph later (sim/campaign/campaign_trials.h).
//
//   campaign:
//     trials: 400                 # default trial count (`--trials` overrides)
//     seed: 1                     # campaign seed: the trial list derives from it alone (`--seed`)
//     sampling: per_kind          # uniform (by weight) | per_kind | per_op (stratified round robin)
//     golden_runs: 2              # fault-free runs (scenario seed, seed+1, ...): output envelope
//     envelope: {atol: 0, rtol: 0}          # slack around the golden envelope
//     sdc_tolerance: {max_ulp: 4, rtol: 0}  # outputs outside the envelope by at most this much
//                                 #   (ULP in the output dtype, or relative deviation) are
//                                 #   `tolerated`, not SDC; SDC is broken down by severity
//     clean_runs:                 # distinct fault-free runs scored for false positives
//       runs: 300                 #   how many (0: none; the golden runs are not scored for them)
//       vary:                     #   --set keys, each a list of values or an "a-b" integer range;
//         data.seed: "1-100000"   #   run k draws one value of each key (a counter-based draw from
//         precision.compute: [fp16, bf16]  # k and the key), so runs differ in data, dtype,
//                                 #   model... Runs whose outputs are bit-identical count once.
//     timeout: {factor: 20, min_seconds: 30} # trial timeout: factor x the fault-free run's wall time
//     faults:                     # one entry per fault family
//       - kind: nan               # an injector kind (`probelab list injectors`)
//         weight: 1               # relative frequency (uniform sampling, and within a stratum)
//         ops: ["attn/*"]         # globs over the executed graph's op names (default ["*"])
//         op_types: [MatMul]      # only ops of these types (default: any)
//         tensor: [output]        # nan/inf/value: sides drawn from (output, input)
//         element: random         # random (uniform over the tensor) or a fixed index
//         steps: all              # steps drawn from: list of ints / "a-b" ranges, or all
//         ranks: all              # ranks drawn from, likewise
//         targets: [l0c, hbm]     # bitflip: targets drawn from (hbm|l1|l0a|l0b|l0c|accumulator|ub)
//         bits: ["0-15"]          # bitflip/stuck_at: bit positions drawn from (default: every bit)
//         flips: 1                # bitflip: distinct bits flipped per trial
//         cycle: live             # bitflip hbm: while the tensor is live (default) | any
//         choose: {lane: ["0-15"]}   # any descriptor key: a value drawn from the list per trial
//         set: {count: 1}         # any descriptor key: fixed for every trial
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sim/scenario/yaml_view.h"

namespace probelab::sim {

/// One fault family of the model.
struct FaultEntry {
  std::string kind;
  double weight = 1.0;
  std::vector<std::string> ops{"*"};
  std::vector<std::string> op_types;        // empty: any type
  std::vector<std::string> tensors{"output"};
  std::optional<std::uint64_t> element;     // nullopt: drawn uniformly
  std::vector<std::uint64_t> steps;         // empty: every step of the scenario
  std::vector<std::uint64_t> ranks;         // empty: every rank
  std::vector<std::string> targets;         // bitflip only; empty: [l0c]
  std::vector<std::uint64_t> bits;          // empty: every bit of the element (buffers: of the word)
  int flips = 1;
  bool live_cycles = true;                  // cycle: live | any
  std::vector<std::pair<std::string, std::vector<YAML::Node>>> choose;  // in file order
  YAML::Node set;                           // a mapping (or undefined)
  std::string where;                        // "file:line:col: campaign.faults[i]" for messages
};

/// Fault-free runs for the false-positive rate: run k applies one value of each `vary` key.
struct CleanRuns {
  std::uint64_t runs = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> vary;  // key -> values (YAML text), file order
  /// Per `vary` key: where its values are (messages) and whether they are an "a-b" range.
  struct Source {
    YAML::Mark mark;
    bool range = false;
  };
  std::vector<Source> vary_sources;
  /// The --set overrides of run k: for each key, the value at index splitmix64(k, key) mod count
  /// (a pure function of k and the key, so a longer list of runs extends a shorter one).
  std::vector<std::pair<std::string, std::string>> sets(std::uint64_t k) const;
};

struct FaultModel {
  std::uint64_t trials = 0;                 // 0: not given
  std::optional<std::uint64_t> seed;
  std::string sampling = "uniform";         // uniform | per_kind | per_op
  int golden_runs = 2;
  double atol = 0.0, rtol = 0.0;
  std::uint64_t sdc_max_ulp = 4;            // sdc_tolerance
  double sdc_rtol = 0.0;
  CleanRuns clean;
  double timeout_factor = 20.0;
  double timeout_min_seconds = 30.0;
  std::vector<FaultEntry> faults;
};

/// The keys of the `campaign:` section and of a fault entry (documentation order).
const std::vector<std::string>& campaign_keys();
const std::vector<std::string>& fault_entry_keys();

/// Parses and validates the `campaign:` section (kinds against the injector registry, keys
/// against what each kind accepts).
FaultModel parse_fault_model(const YamlView& v);
/// One fault entry (also used for `--fault` on the command line).
FaultEntry parse_fault_entry(const YamlView& v);

/// Indices from an int, an "a-b" range string, a list of those, or "all" (empty result).
std::vector<std::uint64_t> parse_index_list(const YamlView& v);

}  // namespace probelab::sim
