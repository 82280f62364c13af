#include "sim/scenario/prepared_run.h"

#include <fmt/format.h>

#include <algorithm>

#include "chip_model/collective/cluster_topology.h"
#include "graph/graph.h"
#include "graph/init.h"
#include "probes/insertion_pass.h"
#include "sim/scenario/bad_input.h"
#include "sim/scenario/injections.h"
#include "sim/scenario/model_loader.h"

namespace probelab::sim {

namespace {

// The chip of `chip: {preset, overrides}`: every error names the file, line and key.
chip::ChipConfig resolve_chip(const Scenario& s) {
  const ChipSpec& c = s.chip;
  const YamlView root = s.view();
  const YamlView chip_view = c.source ? *c.source : YamlView(YAML::Node(), s.file.string(), "chip", root.mark());
  chip::ChipConfig cfg;
  const std::string preset = c.preset.empty() ? std::string("ascend910b") : c.preset;
  try {
    cfg = chip::chip_preset(preset);
  } catch (const chip::ConfigError&) {
    const YamlView at = chip_view.is_map() && chip_view.get("preset") ? *chip_view.get("preset") : chip_view;
    at.fail(fmt::format("a chip preset ({})", fmt::join(chip::chip_preset_names(), ", ")), "'" + preset + "'");
  }
  for (const auto& [key, value] : c.overrides) {
    const auto& params = chip::chip_params();
    const auto info = std::find_if(params.begin(), params.end(), [&](const chip::ParamInfo& p) { return p.name == key; });
    const YamlView at = (*chip_view.get("overrides"))[key];
    if (info == params.end()) at.fail("a chip parameter (`probelab list chips`)", "unknown parameter '" + key + "'");
    try {
      chip::set_param(cfg, key, value);
    } catch (const chip::ConfigError&) {
      at.fail(chip::expected_value(*info), "'" + value + "'");
    }
  }
  try {
    cfg.validate();
  } catch (const chip::ConfigError& e) {
    chip_view.fail("a consistent chip configuration", e.what());
  }
  return cfg;
}

}  // namespace

void fail_cluster_fit(const Scenario& s, const chip::ClusterFitError& e, std::string_view processes) {
  YamlView root = s.view();
  const bool map = e.where() == "cluster.partition";
  YamlView at = map && s.cluster.source ? (*s.cluster.source)["partition"] : root.get("ranks") ? root["ranks"] : root;
  at.fail(processes.empty() || !map ? e.expected() : fmt::format("{} ({})", e.expected(), processes), e.got());
}

namespace {

/// The cluster parameters, checked against the job: the ranks fit the servers, an explicit
/// partition map keeps servers whole. Errors name the scenario key and line.
chip::ClusterConfig resolve_cluster(const Scenario& s, const chip::ChipConfig& chip) {
  chip::ClusterConfig c;
  for (const auto& [k, v] : s.cluster.params) chip::set_cluster_param(c, k, v, s.file.string());
  YamlView root = s.view();
  const std::uint32_t ranks = static_cast<std::uint32_t>(s.ranks);
  try {
    const chip::ClusterTopology topo(chip, c, ranks);
    if (!s.cluster.partition.empty()) {
      // The processes the map implies (the run's own count is checked when it starts): 0 up to
      // the highest index it names, each simulating a server.
      const std::uint32_t procs = *std::max_element(s.cluster.partition.begin(), s.cluster.partition.end()) + 1;
      std::vector<bool> used(procs, false);
      for (const std::uint32_t p : s.cluster.partition) used[p] = true;
      if (const auto gap = std::find(used.begin(), used.end(), false); gap != used.end() && s.cluster.source)
        (*s.cluster.source)["partition"].fail(
            fmt::format("every process from 0 to {} (the highest index the map names) simulating a server", procs - 1),
            fmt::format("no chip on process {}", gap - used.begin()));
      chip::PartitionMap::explicit_map(topo, s.cluster.partition, procs, "cluster.partition");
    }
  } catch (const chip::ClusterFitError& e) {
    fail_cluster_fit(s, e);
  } catch (const chip::ConfigError& e) {
    (root.get("ranks") ? root["ranks"] : root).fail(e.what(), std::to_string(ranks) + " ranks");
  }
  return c;
}

}  // namespace

namespace {

// The device stores no float64: a model whose executed graph holds one (a float64 input or weight,
// or an exporter's Cast to DOUBLE that survives folding) is bad input, named before anything runs.
void check_device_dtypes(const Scenario& s, const graph::Graph& executed) {
  for (const auto& [name, info] : executed.tensors()) {
    if (info.desc.dtype != graph::DType::F64) continue;
    const graph::Op* op = executed.producer(name);
    throw ScenarioError(s.model.path.empty() ? s.file.string() : s.model.path.string(), 0, 0, "",
                        "a model whose tensors the device can store (no float64: the chip holds FP32, FP16, BF16, "
                        "FP8 and integers)",
                        fmt::format("tensor '{}' is float64 ({})", name,
                                    op ? fmt::format("output of op '{}' ({})", op->name, op->type) : "an input or weight"));
  }
}

}  // namespace

PreparedRun prepare_run(const Scenario& s) {
  PreparedRun r;
  r.scenario = s;
  const std::string where = s.file.string();
  r.chip = resolve_chip(s);
  // One float mode: precision.overflow_mode when given (it must agree with an explicit
  // chip.overrides.fp_mode), else the chip's.
  if (s.precision.overflow_mode_given) {
    if (s.chip.overrides.count("fp_mode") && r.chip.fp_mode != s.precision.overflow_mode)
      s.view()["precision"]["overflow_mode"].fail(
          fmt::format("the same float mode as chip.overrides.fp_mode ({})", r.chip.fp_mode),
          "'" + s.precision.overflow_mode + "'");
    r.chip.fp_mode = s.precision.overflow_mode;
    if (r.chip.fp_mode == "inf_nan" && !r.chip.supports_inf_nan)
      s.view()["precision"]["overflow_mode"].fail(
          fmt::format("saturation: chip preset '{}' has the saturation float mode only (supports_inf_nan=false)",
                      r.chip.preset),
          "'" + s.precision.overflow_mode + "'");
  } else {
    r.scenario.precision.overflow_mode = r.chip.fp_mode;
  }
  r.cluster = resolve_cluster(s, r.chip);

  LoadedModel model = load_model(s.model);
  if (!s.data.inputs.empty()) {  // the scenario's initialisers of model inputs win over the model file's
    const YamlView inputs = s.view()["data"]["inputs"];
    const auto& names = model.graph.inputs();
    for (const auto& [name, text] : s.data.inputs) {
      if (std::find(names.begin(), names.end(), name) == names.end() || model.graph.initializers().count(name))
        inputs[name].fail(fmt::format("an input of the model fed by data ({})", fmt::join(names, ", ")), "'" + name + "'");
      model.input_inits[name] = graph::parse_init(text);
    }
  }
  r.workload = build_workload(s, model.graph, model.input_inits, r.cluster);
  check_device_dtypes(s, r.workload.snapshots.fused);
  if (const auto& ls = s.training.loss_scaling) {
    const graph::Op* op = r.workload.snapshots.fused.find_op(ls->scale_op);
    if (!op || op->type != "Scale")
      (*ls->source)["scale_op"].fail("the name of a Scale op of the training graph (it multiplies the loss)",
                                     "'" + ls->scale_op + "'" + (op ? " (a " + op->type + ")" : ""));
  }

  if (s.has_probes()) {
    probes::ProbeConfig cfg;
    try {
      cfg = probes::ProbeConfig::from_yaml(s.probes, where);
    } catch (const probes::ConfigError& e) {  // its key is relative to `probes`
      if (s.probes_source && s.probes_source->overridden(e.key()))
        s.probes_source->fail_at(e.key(), "a value the probe config accepts", e.reason());
      throw;
    }
    for (const auto& w : cfg.load_warnings) r.warnings.push_back(w);
    if (cfg.enabled && cfg.consistency.enabled && cfg.consistency.reference_rank >= static_cast<std::uint32_t>(s.ranks)) {
      const std::string expected = fmt::format("a reference rank of the job (0..{})", s.ranks - 1);
      const std::string got = std::to_string(cfg.consistency.reference_rank);
      const auto c = s.probes_source && s.probes_source->is_map() ? s.probes_source->get("consistency") : std::nullopt;
      const auto ref = c && c->is_map() ? c->get("reference_rank") : std::nullopt;
      if (!ref) throw ScenarioError(s.file.string(), 0, 0, "probes.consistency.reference_rank", expected, got);
      ref->fail(expected, got);
    }
    if (cfg.enabled) {
      graph::Graph trial = r.workload.snapshots.fused;
      probes::insert_probes(trial, cfg);  // compiles scope regexes, checks the graph stays valid
      if (const std::string why = probes_select_nothing(cfg, r.workload.snapshots.fused, s.steps, s.ranks); !why.empty())
        r.warnings.push_back("probes: the config selects nothing to capture: " + why);
      r.probes = std::move(cfg);
    } else {
      r.warnings.push_back(fmt::format("probes: {} is false: nothing is captured and no exception is reported",
                                       cfg.format == "msprobe" ? "msprobe's dump_enable" : "enabled"));
    }
  }
  if (s.quantization) {
    r.quantization = quantization_attrs(*s.quantization, r.workload.snapshots.fused);
    add_quant_state(r.workload.snapshots.fused, r.quantization);
  }
  validate_injections(r);
  return r;
}

bool PreparedRun::already_warned(const std::string& w) const {
  return std::any_of(warnings.begin(), warnings.end(), [&](const std::string& p) { return p.find(w) != std::string::npos; });
}

std::string probes_select_nothing(const probes::ProbeConfig& cfg, const graph::Graph& executed, int steps, int ranks) {
  if (cfg.watch_points.empty())
    return "it has no watch point (add watch_points: [\"*\"], or `scope`; a config is read as msprobe's config.json "
           "when its keys are msprobe's)";
  std::vector<std::string> why;
  for (const auto& wp : cfg.watch_points) {
    if (probes::select_edges(executed, wp).empty()) {
      why.push_back(probes::no_selection_warning(wp));
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
  try {
    Scenario s = parse_scenario(base.source_text, base.file, o);
    s.variants.clear();
    s.expectations.clear();
    PreparedRun r = prepare_run(s);
    r.variant = v.name;
    return r;
  } catch (const std::exception& e) {
    if (!is_bad_input(e) || !v.source) throw;
    // Name the variant and where its settings are: the error itself may only know "--set".
    const YamlView& at = *v.source;
    const YAML::Mark m = at.mark();
    throw ScenarioError(at.file(), m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1, at.path(),
                        fmt::format("settings that make a valid scenario (variant '{}')", v.name), e.what());
  }
}

std::vector<std::string> variant_warnings(const PreparedRun& main, const PreparedRun& variant) {
  std::vector<std::string> out;
  for (const auto& w : variant.warnings)
    if (std::find(main.warnings.begin(), main.warnings.end(), w) == main.warnings.end())
      out.push_back(variant_warning(variant.variant, w));
  return out;
}

std::string variant_warning(const std::string& variant, const std::string& warning) {
  return fmt::format("variant '{}': {}", variant, warning);
}

bool variant_changes_probes_only(const Variant& v) {
  for (const auto& [key, value] : v.sets)
    if (key != "probes" && key.rfind("probes.", 0) != 0) return false;
  return true;
}

}  // namespace probelab::sim
