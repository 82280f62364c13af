// `probelab show MODEL|SCENARIO`: a model's graph and its snapshots (original, optimized, fused,
// with fusion provenance; an ONNX model's symbolic dimensions bound with --dims); for a scenario also the resolved scenario (after --set), the chip
// parameters it changes, the training graph it builds and the probe sites it inserts.
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "graph/print.h"
#include "graph/snapshot.h"
#include "probes/insertion_pass.h"
#include "sim/cli/commands.h"
#include "sim/run/report.h"
#include "sim/run/resources.h"
#include "sim/scenario/model_loader.h"
#include "sim/scenario/prepared_run.h"
#include "sim/scenario/scenario_error.h"
#include "sim/scenario/source_root.h"

namespace probelab::cli {

namespace {

struct ShowArgs {
  std::string what;
  std::vector<std::string> sets;
  std::vector<std::string> dims;  // --dims name=value[,...], repeatable
  std::string stage = "all";
  bool attrs = false;
  bool json = false;
};

using nlohmann::json;

// The insertion pass's warnings that no preparation warning already says.
std::vector<std::string> later_warnings(const sim::PreparedRun& run, const probes::InsertionResult& ins) {
  std::vector<std::string> out;
  for (const auto& w : ins.warnings)
    if (!run.already_warned(w)) out.push_back(w);
  return out;
}

json graph_json(const graph::Graph& g) {
  json ops = json::array(), tensors = json::array();
  for (const auto& op : g.ops()) {
    json attrs = json::object();
    for (const auto& [k, v] : op.attrs) attrs[k] = graph::attr_value_str(v);
    ops.push_back({{"id", op.id}, {"name", op.name}, {"type", op.type}, {"scope", op.scope}, {"inputs", op.inputs},
                   {"outputs", op.outputs}, {"direction", std::string(graph::direction_name(op.direction))},
                   {"fused_from", op.fused_from}, {"grad_of", op.grad_of}, {"attrs", attrs}});
  }
  for (const auto& [name, t] : g.tensors())
    tensors.push_back({{"name", name}, {"dtype", std::string(graph::dtype_name(t.desc.dtype))}, {"shape", t.desc.shape},
                       {"format", std::string(graph::format_name(t.desc.format))},
                       {"kind", std::string(graph::tensor_kind_name(t.kind))}});
  return {{"name", g.name()}, {"inputs", g.inputs()}, {"outputs", g.outputs()}, {"ops", ops}, {"tensors", tensors}};
}

json snapshots_json(const graph::SnapshotSet& snaps, const ShowArgs& a) {
  json out = json::object();
  for (auto stage : {graph::Stage::Original, graph::Stage::Optimized, graph::Stage::Fused}) {
    if (a.stage != "all" && a.stage != graph::stage_name(stage)) continue;
    out[std::string(graph::stage_name(stage))] = graph_json(snaps.at(stage));
  }
  return out;
}

json yaml_json(const YAML::Node& n) {
  if (n.IsMap()) {
    json o = json::object();
    for (auto it = n.begin(); it != n.end(); ++it) o[it->first.as<std::string>()] = yaml_json(it->second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& e : n) a.push_back(yaml_json(e));
    return a;
  }
  if (!n.IsScalar()) return nullptr;
  if (n.Tag() != "!") {
    std::int64_t i = 0;
    double d = 0;
    bool b = false;
    if (YAML::convert<std::int64_t>::decode(n, i)) return i;
    if (YAML::convert<double>::decode(n, d)) return d;
    if (YAML::convert<bool>::decode(n, b)) return b;
  }
  return n.as<std::string>();
}

bool looks_like_scenario(const std::string& path) {
  if (!(path.ends_with(".yaml") || path.ends_with(".yml"))) return false;
  try {
    YAML::Node n = YAML::LoadFile(path);
    return n.IsMap() && n["model"].IsDefined() && n["name"].IsDefined() && !n["ops"].IsDefined() &&
           !n["layers"].IsDefined();
  } catch (const YAML::Exception&) {
    return true;  // let the scenario loader report the syntax error with its position
  }
}

void print_snapshots(const graph::SnapshotSet& snaps, const ShowArgs& a) {
  graph::PrintOptions po;
  po.attrs = a.attrs;
  fmt::print("{}\n", graph::format_snapshot_summary(snaps));
  for (auto stage : {graph::Stage::Original, graph::Stage::Optimized, graph::Stage::Fused}) {
    if (a.stage != "all" && a.stage != graph::stage_name(stage)) continue;
    fmt::print("== {} snapshot ==\n{}\n", graph::stage_name(stage), graph::format_graph(snaps.at(stage), po));
  }
}

int show(const ShowArgs& a) {
  const auto root = sim::find_source_root();
  std::string path = a.what;
  std::error_code ec;
  // A bare name: a bundled scenario first, then a bundled model.
  if (!std::filesystem::exists(path, ec) && std::filesystem::exists(root / "scenarios" / (path + ".yaml"), ec))
    path = (root / "scenarios" / (path + ".yaml")).string();
  std::map<std::string, std::int64_t> dims;
  for (const auto& d : a.dims)
    for (const auto& [name, value] : sim::parse_dims(d))
      if (!dims.emplace(name, value).second)
        throw sim::ScenarioError("--dims", 0, 0, "--dims", fmt::format("each dimension once ('{}' is given twice)", name),
                                 "'" + d + "'");
  if (looks_like_scenario(path)) {
    sim::LoadOptions lo;
    lo.source_root = root;
    for (const auto& s : a.sets) lo.sets.push_back(sim::parse_set(s));
    // --dims on a scenario: the same as --set model.dims.<name>=<value>.
    for (const auto& [name, value] : dims) lo.sets.push_back({"model.dims." + name, std::to_string(value)});
    sim::Scenario s = sim::load_scenario(path, lo);
    sim::PreparedRun run = sim::prepare_run(s);
    // Everything `run` would check before running: the variants too.
    std::vector<sim::PreparedRun> variants;
    for (const auto& v : s.variants) variants.push_back(sim::prepare_variant(s, v, lo));
    // The preparation warnings `run` reports: the scenario's, then each variant's own.
    std::vector<std::string> warnings = run.warnings;
    for (const auto& v : variants)
      for (auto& w : sim::variant_warnings(run, v)) warnings.push_back(std::move(w));
    if (a.json) {
      json chip = json::object();
      const chip::ChipConfig preset = chip::chip_preset(run.chip.preset);
      for (const auto& info : chip::chip_params())
        if (chip::get_param(run.chip, info.name) != chip::get_param(preset, info.name))
          chip[info.name] = chip::get_param(run.chip, info.name);
      json j = {{"scenario", s.name},
                {"file", s.file.string()},
                {"resolved", yaml_json(s.resolved)},
                {"model_file", s.model.path.string()},
                {"chip", {{"preset", run.chip.preset}, {"overrides", chip}}},
                {"data_inputs", run.workload.data_inputs},
                {"loss", run.workload.loss},
                {"collectives", run.workload.collectives},
                {"snapshots", snapshots_json(run.workload.snapshots, a)},
                {"warnings", warnings}};
      if (run.probes) {
        graph::Graph g = run.workload.snapshots.fused;
        const probes::InsertionResult ins = probes::insert_probes(g, *run.probes);
        json sites = json::array();
        for (const auto& p : ins.probes)
          sites.push_back({{"kind", std::string(probes::probe_kind_name(p.kind))},
                           {"position", p.position == probes::ProbePosition::Before ? "before" : "after"},
                           {"op", p.target_op}, {"edge", fmt::format("{}{}", p.is_input ? "in" : "out", p.index)},
                           {"mode", std::string(probes::capture_mode_name(p.mode))}, {"sample_rate", p.sample_rate}});
        j["probes"] = sim::probe_config_json(*run.probes);
        j["probes"]["source"] = run.probes->source;
        if (!run.probes->translated.empty()) j["probes"]["translated"] = yaml_json(YAML::Load(run.probes->translated));
        j["probes"]["sites"] = sites;
        j["probes"]["warnings"] = later_warnings(run, ins);
      }
      fmt::print("{}\n", j.dump(2));
      return 0;
    }
    fmt::print("== scenario {} ({}) ==\n{}\n\n", s.name, s.file.string(), YAML::Dump(s.resolved));
    fmt::print("model file: {}\n", s.model.path.string());
    fmt::print("chip: preset {}", run.chip.preset);
    const chip::ChipConfig preset = chip::chip_preset(run.chip.preset);
    for (const auto& info : chip::chip_params()) {
      const std::string v = chip::get_param(run.chip, info.name);
      if (v != chip::get_param(preset, info.name)) fmt::print(", {}={}", info.name, v);
    }
    fmt::print("\nestimated resources: {}\n", sim::estimate_resources(run).str());
    for (const auto& v : variants) fmt::print("variant {}: {}\n", v.variant, sim::estimate_resources(v).str());
    fmt::print("data inputs: {}\n", fmt::join(run.workload.data_inputs, ", "));
    if (!run.workload.loss.empty()) fmt::print("loss: {}\n", run.workload.loss);
    if (!run.workload.collectives.empty())
      fmt::print("collectives: {}\n", fmt::join(run.workload.collectives, ", "));
    fmt::print("\n");
    print_snapshots(run.workload.snapshots, a);
    if (run.probes && run.probes->format == "msprobe") {
      // What `run` uses: each msprobe key's translation, and the probelab config they make.
      fmt::print("== probes: msprobe config.json {}, translated ==\n{}", run.probes->source,
                 sim::mapping_text(sim::probe_config_json(*run.probes)["mapping"], "  ", 40));
      fmt::print("as probelab's config:\n");
      std::istringstream lines(run.probes->translated);
      for (std::string line; std::getline(lines, line);) fmt::print("  {}\n", line);
      fmt::print("\n");
    }
    if (run.probes) {
      graph::Graph g = run.workload.snapshots.fused;
      const probes::InsertionResult ins = probes::insert_probes(g, *run.probes);
      fmt::print("== probe sites ({}) ==\n", ins.probes.size());
      for (const auto& p : ins.probes)
        fmt::print("  {:<10} {:<6} {} {}{} ({}, rate {})\n", probes::probe_kind_name(p.kind),
                   p.position == probes::ProbePosition::Before ? "before" : "after", p.target_op,
                   p.is_input ? "in" : "out", p.index, probes::capture_mode_name(p.mode), p.sample_rate);
      for (const auto& w : later_warnings(run, ins)) fmt::print("  warning: {}\n", w);
    }
    for (const auto& w : warnings) fmt::print("warning: {}\n", w);
    return 0;
  }
  if (!a.sets.empty())
    throw sim::ScenarioError("--set", 0, 0, "--set", "no --set for a model (it overrides scenario keys; an ONNX model's "
                             "symbolic dimensions are bound with --dims name=value)", "'" + a.sets.front() + "'");
  sim::ModelSpec spec = sim::model_spec_from_arg(path, root);
  if (!dims.empty() && spec.source != sim::ModelSpec::Source::Onnx)
    throw sim::ScenarioError("--dims", 0, 0, "--dims",
                             "no --dims for a YAML model (dimensions are bound for ONNX models only)",
                             "'" + spec.path.string() + "'");
  spec.dims = dims;
  sim::LoadedModel m = sim::load_model(spec);
  if (a.json) {
    fmt::print("{}\n", json{{"model", spec.path.string()}, {"snapshots", snapshots_json(graph::build_snapshots(m.graph), a)}}.dump(2));
    return 0;
  }
  fmt::print("== model {} ==\n", spec.path.string());
  print_snapshots(graph::build_snapshots(m.graph), a);
  return 0;
}

}  // namespace

Command add_show(CLI::App& app) {
  auto a = std::make_shared<ShowArgs>();
  auto* sub = app.add_subcommand("show", "Print a model's graph and snapshots, or a resolved scenario");
  sub->add_option("MODEL_OR_SCENARIO", a->what,
                  "A scenario file or bundled scenario name, a model file (.yaml/.onnx) or bundled model name")
      ->required();
  sub->add_option("--set", a->sets, "Scenario override key=value (as for run); repeatable");
  sub->add_option("--dims", a->dims,
                  "Bind an ONNX model's symbolic input dimensions: name=value[,name=value...], e.g. batch=2,seq=128 "
                  "(for a scenario: the same as --set model.dims.name=value); repeatable");
  sub->add_option("--stage", a->stage, "Snapshot to print: original, optimized, fused or all")
      ->check(CLI::IsMember({"original", "optimized", "fused", "all"}));
  sub->add_flag("--attrs", a->attrs, "Print op attributes");
  sub->add_flag("--json", a->json, "Print the graphs (and the resolved scenario, its probe sites) as JSON");
  return [a] { return show(*a); };
}

}  // namespace probelab::cli
