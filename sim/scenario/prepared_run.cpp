#include "sim/scenario/prepared_run.h"

#include <fmt/format.h>

#include "graph/graph.h"
#include "probes/insertion_pass.h"
#include "sim/scenario/injections.h"
#include "sim/scenario/model_loader.h"

namespace probelab::sim {

PreparedRun prepare_run(const Scenario& s) {
  PreparedRun r;
  r.scenario = s;
  const std::string where = s.file.string();
  // chip: PRESET | {preset, overrides: {param: value}} (parsed into s.chip).
  r.chip = chip::chip_preset(s.chip.preset.empty() ? "ascend910b" : s.chip.preset);
  for (const auto& [key, value] : s.chip.overrides) chip::set_param(r.chip, key, value, where + ": chip.overrides");
  r.chip.validate();

  LoadedModel model = load_model(s.model);
  r.workload = build_workload(s, model.graph, model.input_inits);

  if (s.has_probes()) {
    probes::ProbeConfig cfg = probes::ProbeConfig::from_yaml(s.probes, where);
    if (cfg.enabled) {
      graph::Graph trial = r.workload.snapshots.fused;
      probes::insert_probes(trial, cfg);  // compiles scope regexes, checks the graph stays valid
      r.probes = std::move(cfg);
    }
  }
  validate_injections(r);
  return r;
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
