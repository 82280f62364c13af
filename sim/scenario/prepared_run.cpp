#include "sim/scenario/prepared_run.h"

#include <fmt/format.h>

#include <algorithm>

#include "chip_model/collective/cluster_topology.h"
#include "graph/graph.h"
#include "probes/insertion_pass.h"
#include "sim/scenario/injections.h"
#include "sim/scenario/model_loader.h"

namespace probelab::sim {

namespace {

/// The cluster parameters, checked against the job: the ranks fit the servers, an explicit
/// partition map keeps servers whole. Errors name the scenario key and line.
chip::ClusterConfig resolve_cluster(const Scenario& s, const chip::ChipConfig& chip) {
  chip::ClusterConfig c;
  for (const auto& [k, v] : s.cluster.params) chip::set_cluster_param(c, k, v, s.file.string());
  YamlView root(s.resolved, s.file.string(), "");
  const std::uint32_t ranks = static_cast<std::uint32_t>(s.ranks);
  try {
    const chip::ClusterTopology topo(chip, c, ranks);
    if (!s.cluster.partition.empty()) {
      const std::uint32_t procs = *std::max_element(s.cluster.partition.begin(), s.cluster.partition.end()) + 1;
      chip::PartitionMap::explicit_map(topo, s.cluster.partition, procs, "cluster.partition");
    }
  } catch (const chip::ConfigError& e) {
    const bool partition = std::string(e.what()).starts_with("cluster.partition");
    YamlView at = partition && s.cluster.source ? (*s.cluster.source)["partition"]
                  : root.get("ranks")            ? root["ranks"]
                                                 : root;
    at.fail(e.what(), partition ? "the partition map" : std::to_string(ranks) + " ranks");
  }
  return c;
}

}  // namespace

PreparedRun prepare_run(const Scenario& s) {
  PreparedRun r;
  r.scenario = s;
  const std::string where = s.file.string();
  // chip: PRESET | {preset, overrides: {param: value}} (parsed into s.chip).
  r.chip = chip::chip_preset(s.chip.preset.empty() ? "ascend910b" : s.chip.preset);
  for (const auto& [key, value] : s.chip.overrides) chip::set_param(r.chip, key, value, where + ": chip.overrides");
  r.chip.validate();
  r.cluster = resolve_cluster(s, r.chip);

  LoadedModel model = load_model(s.model);
  r.workload = build_workload(s, model.graph, model.input_inits, r.cluster);

  if (s.has_probes()) {
    probes::ProbeConfig cfg = probes::ProbeConfig::from_yaml(s.probes, where);
    for (const auto& w : cfg.load_warnings) r.warnings.push_back(w);
    if (cfg.enabled) {
      graph::Graph trial = r.workload.snapshots.fused;
      probes::insert_probes(trial, cfg);  // compiles scope regexes, checks the graph stays valid
      if (const std::string why = probes_select_nothing(cfg, r.workload.snapshots.fused, s.steps, s.ranks); !why.empty())
        r.warnings.push_back("probes: the config selects nothing to capture: " + why);
      r.probes = std::move(cfg);
    } else {
      r.warnings.push_back("probes: enabled is false: nothing is captured and no exception is reported");
    }
  }
  validate_injections(r);
  return r;
}

std::string probes_select_nothing(const probes::ProbeConfig& cfg, const graph::Graph& executed, int steps, int ranks) {
  if (cfg.watch_points.empty())
    return "it has no watch point (add watch_points: [\"*\"], or `scope`; an msprobe config.json needs its dump_path "
           "or task section to be recognised)";
  std::vector<std::string> why;
  for (const auto& wp : cfg.watch_points) {
    if (probes::select_edges(executed, wp).empty()) {
      why.push_back(fmt::format("watch point '{}' matches no op or tensor", wp.id));
      continue;
    }
    bool step = false, rank = false;
    for (int i = 0; i < steps; ++i) step = step || wp.steps.contains(i);
    for (int i = 0; i < ranks; ++i) rank = rank || wp.ranks.contains(i);
    if (step && rank) return "";
    if (!step) why.push_back(fmt::format("watch point '{}' steps {} miss the run's steps 0-{}", wp.id, wp.steps.str(), steps - 1));
    if (!rank) why.push_back(fmt::format("watch point '{}' ranks {} miss the run's ranks 0-{}", wp.id, wp.ranks.str(), ranks - 1));
  }
  std::string out;
  for (const auto& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

PreparedRun prepare_variant(const Scenario& base, const Variant& v, const LoadOptions& opts) {
  LoadOptions o = opts;
  for (const auto& [key, value] : v.sets) o.sets.push_back(SetOverride{key, value});
  Scenario s = parse_scenario(base.source_text, base.file, o);
  s.variants.clear();
  s.expectations.clear();
  PreparedRun r = prepare_run(s);
  r.variant = v.name;
  return r;
}

bool variant_changes_probes_only(const Variant& v) {
  for (const auto& [key, value] : v.sets)
    if (key != "probes" && key.rfind("probes.", 0) != 0) return false;
  return true;
}

}  // namespace probelab::sim
