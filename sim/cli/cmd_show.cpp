// `probelab show MODEL|SCENARIO`: a model's graph and its snapshots (original, optimized, fused,
// with fusion provenance); for a scenario also the resolved scenario (after --set), the chip
// parameters it changes, the training graph it builds and the probe sites it inserts.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "graph/print.h"
#include "graph/snapshot.h"
#include "probes/insertion_pass.h"
#include "sim/cli/commands.h"
#include "sim/scenario/model_loader.h"
#include "sim/scenario/prepared_run.h"
#include "sim/scenario/source_root.h"

namespace probelab::cli {

namespace {

struct ShowArgs {
  std::string what;
  std::vector<std::string> sets;
  std::string stage = "all";
  bool attrs = false;
};

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
  if (looks_like_scenario(path)) {
    sim::LoadOptions lo;
    lo.source_root = root;
    for (const auto& s : a.sets) lo.sets.push_back(sim::parse_set(s));
    sim::Scenario s = sim::load_scenario(path, lo);
    sim::PreparedRun run = sim::prepare_run(s);
    fmt::print("== scenario {} ({}) ==\n{}\n\n", s.name, s.file.string(), YAML::Dump(s.resolved));
    fmt::print("model file: {}\n", s.model.path.string());
    fmt::print("chip: preset {}", run.chip.preset);
    const chip::ChipConfig preset = chip::chip_preset(run.chip.preset);
    for (const auto& info : chip::chip_params()) {
      const std::string v = chip::get_param(run.chip, info.name);
      if (v != chip::get_param(preset, info.name)) fmt::print(", {}={}", info.name, v);
    }
    fmt::print("\ndata inputs: {}\n", fmt::join(run.workload.data_inputs, ", "));
    if (!run.workload.loss.empty()) fmt::print("loss: {}\n", run.workload.loss);
    if (!run.workload.collectives.empty())
      fmt::print("collectives: {}\n", fmt::join(run.workload.collectives, ", "));
    fmt::print("\n");
    print_snapshots(run.workload.snapshots, a);
    if (run.probes) {
      graph::Graph g = run.workload.snapshots.fused;
      const probes::InsertionResult ins = probes::insert_probes(g, *run.probes);
      fmt::print("== probe sites ({}) ==\n", ins.probes.size());
      for (const auto& p : ins.probes)
        fmt::print("  {:<10} {:<6} {} {}{} ({}, rate {})\n", probes::probe_kind_name(p.kind),
                   p.position == probes::ProbePosition::Before ? "before" : "after", p.target_op,
                   p.is_input ? "in" : "out", p.index, probes::capture_mode_name(p.mode), p.sample_rate);
      for (const auto& w : ins.warnings) fmt::print("  warning: {}\n", w);
    }
    return 0;
  }
  const sim::ModelSpec spec = sim::model_spec_from_arg(path, root);
  sim::LoadedModel m = sim::load_model(spec);
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
  sub->add_option("--stage", a->stage, "Snapshot to print: original, optimized, fused or all")
      ->check(CLI::IsMember({"original", "optimized", "fused", "all"}));
  sub->add_flag("--attrs", a->attrs, "Print op attributes");
  return [a] { return show(*a); };
}

}  // namespace probelab::cli
