// `probelab list [chips|ops|injectors|probes|expectations ...]`: every knob with its default and doc.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chip_model/chip_config.h"
#include "chip_model/collective/cluster_config.h"
#include "graph/op_registry.h"
#include "sim/run/catalog.h"
#include "sim/cli/commands.h"
#include "sim/scenario/expectation.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::cli {

namespace {

void list_chips() {
  fmt::print("== chips ==\n");
  auto presets = chip::chip_preset_names();
  chip::ChipConfig def = chip::chip_preset("ascend910b");
  fmt::print("presets: {}\n", fmt::join(presets, ", "));
  for (const auto& p : presets) {
    chip::ChipConfig c = chip::chip_preset(p);
    fmt::print("  {}: {}\n", p, chip::chip_preset_summary(p));
    std::vector<std::string> keys;
    for (const auto& k : chip::chip_key_params()) keys.push_back(fmt::format("{}={}", k, chip::get_param(c, k)));
    fmt::print("    {}\n    peak Cube FP16 {:.1f} TFLOPS, Vector-side read ports {:.0f} GB/s (AI cores, or their AIVs, x mte_bytes_per_cycle x clock)\n",
               fmt::join(keys, " "), c.peak_cube_flops() / 1e12,
               static_cast<double>(c.num_cores) * c.vector_per_core() * c.mte_bytes_per_cycle * c.clock_mhz / 1e3);
    std::vector<std::string> diff;
    for (const auto& info : chip::chip_params())
      if (chip::get_param(c, info.name) != chip::get_param(def, info.name) &&
          std::count(chip::chip_key_params().begin(), chip::chip_key_params().end(), info.name) == 0)
        diff.push_back(fmt::format("{}={}", info.name, chip::get_param(c, info.name)));
    if (!diff.empty()) fmt::print("    also differs from ascend910b: {}\n", fmt::join(diff, " "));
  }
  fmt::print("\nparameters (scenario `chip: {{preset: P, overrides: {{name: value}}}}`, defaults of ascend910b):\n");
  fmt::print("{}\n", chip::describe_chip_params(def));
  fmt::print("cluster parameters (scenario `cluster: {{name: value}}`, for jobs of more than one chip):\n");
  fmt::print("{}\n", chip::describe_cluster_params());
}

void list_ops() {
  fmt::print("== ops ==\n");
  for (const auto& s : sim::describe_ops()) fmt::print("{}\n", s);
}

void list_injectors() {
  fmt::print("== injectors ==\n");
  for (const auto& s : sim::describe_injectors()) fmt::print("{}\n", s);
}

void list_probes() {
  fmt::print("== probe options (scenario `probes:` section) ==\n");
  for (const auto& [key, doc] : sim::probe_options()) fmt::print("  {:<34} {}\n", key, doc);
}

void list_expectations() {
  fmt::print("== expectation kinds (scenario `expectations:` list) ==\n");
  for (const auto& [k, doc] : sim::expectation_kinds()) fmt::print("  {:<14} {}\n", k, doc);
  fmt::print("  detection kinds: {}\n", fmt::join(sim::detection_kinds(), ", "));
  fmt::print("  diagnosis causes: {}\n", fmt::join(sim::cause_classes(), ", "));
}

}  // namespace

Command add_list(CLI::App& app) {
  auto* sub = app.add_subcommand("list", "List chips (parameters), ops (attributes), injectors (parameters), "
                                         "probe options and expectation kinds");
  auto what = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  auto markdown = std::make_shared<bool>(false);
  sub->add_flag("--json", *as_json, "Print every registry as JSON (the sections named, or all)");
  sub->add_option("what", *what, "Sections to print: chips, ops, injectors, probes, expectations (default: all)")
      ->check(CLI::IsMember({"chips", "ops", "injectors", "probes", "expectations"}));
  sub->add_flag("--markdown", *markdown, "With `ops`: print the op table of README.md (Markdown) instead");
  return [what, as_json, markdown] {
    if (*markdown) {
      if (what->size() != 1 || what->front() != "ops" || *as_json)
        throw sim::ScenarioError("probelab list", 0, 0, "--markdown", "`probelab list ops --markdown`",
                                 what->empty() ? "all sections" : fmt::format("{}", fmt::join(*what, " ")));
      fmt::print("{}", sim::ops_markdown_table());
      std::fflush(stdout);
      return 0;
    }
    auto want = [&](const char* s) { return what->empty() || std::count(what->begin(), what->end(), s) > 0; };
    if (*as_json) {
      const nlohmann::json all = sim::catalog_json();
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [section, key] : std::vector<std::pair<const char*, const char*>>{
               {"chips", "chips"}, {"ops", "ops"}, {"injectors", "injectors"}, {"probes", "probe_options"},
               {"expectations", "expectations"}})
        if (want(section)) out[key] = all[key];
      fmt::print("{}\n", out.dump(2));
      std::fflush(stdout);
      return 0;
    }
    bool first = true;
    auto section = [&](const char* s, void (*f)()) {
      if (!want(s)) return;
      if (!first) fmt::print("\n");
      first = false;
      f();
    };
    section("chips", list_chips);
    section("ops", list_ops);
    section("injectors", list_injectors);
    section("probes", list_probes);
    section("expectations", list_expectations);
    std::fflush(stdout);
    return 0;
  };
}

}  // namespace probelab::cli
