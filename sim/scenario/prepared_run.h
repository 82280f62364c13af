// A scenario resolved against every layer, ready to simulate: the chip config, the workload
// graphs, the probe config and the injector descriptors, all validated. Resolving happens in the
// parent process before anything runs, so bad input (exit code 2) is reported before any
// simulation starts; simulations run in forked children that inherit this object.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chip_model/chip_config.h"
#include "chip_model/collective/cluster_config.h"
#include "graph/tensor.h"


#include "probes/probe_config.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/workload.h"

namespace probelab::sim {

struct PreparedRun {
  Scenario scenario;
  chip::ChipConfig chip;
  chip::ClusterConfig cluster;  // the job fits it (checked)
  Workload workload;
  std::optional<probes::ProbeConfig> probes;  // nullopt: no probes section, or enabled: false
  std::string variant;                        // "" for the scenario itself
  /// Found while preparing, shown in the summary and kept in report.json's warnings: probe
  /// config keys with no equivalent (msprobe), a probe config that selects nothing. `probelab run
  /// --strict` makes them bad input.
  std::vector<std::string> warnings;
  /// Whether one of `warnings` already says `w`, a warning of a later stage: the insertion pass's
  /// "watch point 'wp0' selects no op or tensor" is part of "the config selects nothing ...".
  bool already_warned(const std::string& w) const;
  /// A resumed run (scenario.resume): each rank's checkpoint, read once by check_resume_fits
  /// (sim/run/resume_fit.h); the simulation starts from it.
  std::map<std::uint32_t, std::map<std::string, graph::Tensor>> resume_values;
  /// Quantization attributes per op name of the executed graph (empty: nothing quantized).
  std::map<std::string, spec::OpAttrs> quantization;
};

/// Why a probe config captures nothing in this scenario ("" when it captures something): no
/// watch point, watch points that match no op or tensor, or steps/ranks outside the run.
std::string probes_select_nothing(const probes::ProbeConfig& cfg, const graph::Graph& executed, int steps, int ranks);

/// Loads the model and validates the scenario against the chip config, the cluster (the ranks
/// must fit its servers; an explicit partition map must not split a server), the graph, the probe
/// config and the injector registry. Throws ScenarioError / chip::ConfigError /
/// probes::ConfigError / graph::GraphError (bad input).
PreparedRun prepare_run(const Scenario& s);

/// Bad input (ScenarioError) for a job that does not fit its cluster or cannot be split over
/// processes: at the scenario's `cluster.partition` line for an explicit map, else at `ranks`;
/// `processes` (an explicit map only) says where the process count came from.
[[noreturn]] void fail_cluster_fit(const Scenario& s, const chip::ClusterFitError& e, std::string_view processes = {});

/// The scenario with variant `v` applied (its sets on top of `opts.sets`), prepared. Re-parses
/// the text `base` was loaded from (a file or a document built in memory).
PreparedRun prepare_variant(const Scenario& base, const Variant& v, const LoadOptions& opts);

/// The variant's preparation warnings that the scenario's own run (`main`) does not give too, each
/// prefixed "variant 'NAME': " so that the summary and `--strict` name the variant.
std::vector<std::string> variant_warnings(const PreparedRun& main, const PreparedRun& variant);
/// `warning` named as variant `variant`'s: "variant 'NAME': warning" (preparation and simulation
/// warnings alike).
std::string variant_warning(const std::string& variant, const std::string& warning);

/// Whether a variant only changes the probe configuration (then it shares the scenario's
/// no-probe baseline run).
bool variant_changes_probes_only(const Variant& v);

}  // namespace probelab::sim
