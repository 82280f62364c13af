#include "sim/run/catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "chip_model/chip_config.h"
#include "chip_model/collective/cluster_config.h"
#include "chip_model/kernels/kernel.h"
#include "graph/fused_ops.h"
#include "graph/onnx/onnx_import.h"
#include "graph/op_registry.h"
#include "graph/passes.h"
#include "injectors/injector.h"
#include "probes/diagnosis.h"
#include "probes/insertion_pass.h"
#include "sim/scenario/expectation.h"

namespace probelab::sim {

std::vector<std::string> describe_ops() {
  graph::ensure_fused_ops_registered();
  probes::register_probe_ops();
  std::vector<std::string> out;
  const auto& reg = graph::OpRegistry::instance();
  for (const auto& [type, def] : reg.all()) {
    std::string s = fmt::format("{}{}", type, def.backward ? " (backward)" : "");
    if (!def.aliases.empty()) s += fmt::format(" [aliases: {}]", fmt::join(def.aliases, ", "));
    s += fmt::format(" — {}\n", def.doc);
    std::string ins = def.input_names.empty()
                          ? fmt::format("{}..{}", def.min_inputs, def.max_inputs < 0 ? std::string("n") : std::to_string(def.max_inputs))
                          : fmt::format("{}", fmt::join(def.input_names, ", "));
    std::string outs = def.output_names.empty() ? std::to_string(def.num_outputs)
                                                : fmt::format("{}", fmt::join(def.output_names, ", "));
    s += fmt::format("    inputs: {}  outputs: {}", ins, outs);
    for (const auto& a : def.attrs) {
      s += fmt::format("\n    attr {:<16} {}", a.name,
                       a.required ? std::string("required")
                                  : a.default_value ? "default " + graph::attr_value_str(*a.default_value)
                                                    : std::string("optional"));
      if (!a.doc.empty()) s += "  " + a.doc;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string ops_markdown_table() {
  graph::ensure_fused_ops_registered();
  const auto& reg = graph::OpRegistry::instance();
  const auto cube = chip::kernels::KernelRegistry::instance().explicit_types();
  std::string out = "| op | aliases | on the chip | training | what it computes |\n|---|---|---|---|---|\n";
  std::vector<std::string> backward, fused;
  std::set<std::string> fused_types;
  for (const auto& p : graph::fusion_patterns()) fused_types.insert(p.fused_type);
  for (const auto& [type, def] : reg.all()) {
    if (fused_types.count(type)) {
      fused.push_back(type);
      continue;
    }
    if (def.backward) {
      backward.push_back(type);
      continue;
    }
    const bool on_cube = std::find(cube.begin(), cube.end(), type) != cube.end();
    const bool collective = probes::is_collective_type(type);  // no reference: its result needs every rank
    if (!def.reference && !on_cube && !collective) continue;    // probe ops
    std::string doc;  // a literal | escaped so it stays inside its Markdown cell
    for (char c : def.doc) doc += c == '|' ? std::string("\\|") : std::string(1, c);
    out += fmt::format("| {} | {} | {} | {} | {} |\n", type, fmt::join(def.aliases, ", "),
                       collective ? "collective engine" : on_cube ? "Cube" : "Vector",
                       def.gradient ? "gradient" : "inference only", doc);
  }
  for (const auto& [type, doc] : graph::onnx_importer_ops())
    out += fmt::format("| {} |  | (import) | - | ONNX import: {} |\n", type, doc);
  out += fmt::format("\nBackward ops (autodiff emits them; every one runs on the chip): {}.\n", fmt::join(backward, ", "));
  out += fmt::format("\nFused ops (the fusion pass emits them): {}.\n", fmt::join(fused, ", "));
  return out;
}

std::vector<std::string> describe_injectors() {
  std::vector<std::string> out;
  for (const auto& [name, info] : inject::InjectorRegistry::instance().all()) {
    std::string s = fmt::format("{} — {}", name, info.doc);
    for (const auto& p : info.params)
      s += fmt::format("\n    {:<16} {:<22} {}{}", p.name, p.type,
                       p.required() ? std::string("required") : p.default_value == "-" ? std::string("optional")
                                                                                        : "default " + p.default_value,
                       p.doc.empty() ? "" : "  " + p.doc);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> cause_classes() {
  std::vector<std::string> out;
  for (probes::CauseClass c : probes::all_cause_classes())
    if (c != probes::CauseClass::Condition) out.emplace_back(probes::cause_class_name(c));
  return out;
}

const std::vector<std::pair<std::string, std::string>>& probe_options() {
  static const std::vector<std::pair<std::string, std::string>> k = {
      {"enabled", "true | false (default true)"},
      {"seed", "sampling seed (default: the scenario seed)"},
      {"mode", "default capture mode: statistics | full | hash"},
      {"sample_rate", "default sampling probability in [0, 1]"},
      {"direction", "forward | backward | optimizer | all"},
      {"steps, ranks", "lists of ints and \"a-b\" ranges, or all"},
      {"scope", "ECMAScript regex, whole match on the op's scope path"},
      {"data_mode", "[input, output] | all: which edges of a selected op"},
      {"watch_points", "globs over op/tensor names, or maps {name, match, scope, steps, ranks, direction, mode,"},
      {"", "  sample_rate, data_mode, halt_on_exception, conditions, actions}"},
      {"conditions", "expressions over statistics: abs_mean < 1e-6, nan_count > 0, max_abs > 65504 && step >= 3"},
      {"actions", "full_dump | stats_dump | break | enable_verbose | stop"},
      {"rules", "\"EXPR -> action[, action]\" over counters (overflow_count > 3 -> enable_verbose)"},
      {"exceptions.kinds", "overflow, underflow, invalid, nan_input: latched kinds"},
      {"capture", "{buffer_bytes, ping_pong: true|false, overrun: stall|drop, in_kernel_statistics: true|false, async_full: true|false, drain: auto|step|buffer_full}"},
      {"output", "{dir, compression: zstd|none, zstd_level, delta, level: all|triggered|none}"},
      {"consistency", "{enabled, reference_rank, sync_at_collectives, mode: hash|statistics|full, tolerance, steps}"},
      {"compare", "{enabled, ops: [globs], decompose_fused, criteria: {...}}"},
  };
  return k;
}

namespace {

using nlohmann::json;

const char* param_type_name(chip::ParamType t) {
  switch (t) {
    case chip::ParamType::UInt: return "uint";
    case chip::ParamType::Double: return "double";
    case chip::ParamType::Bool: return "bool";
    case chip::ParamType::String: return "string";
  }
  return "?";
}

// One parameter of a chip or cluster table, with its default.
json param_json(const chip::ParamInfo& p, const std::string& def) {
  json j = {{"name", p.name}, {"type", param_type_name(p.type)}, {"unit", p.unit}, {"default", def},
            {"doc", p.doc}, {"source", p.source}};
  if (p.type == chip::ParamType::UInt || p.type == chip::ParamType::Double) {
    j["min"] = p.min;
    j["max"] = p.max;
  }
  if (!p.choices.empty()) j["choices"] = p.choices;
  return j;
}

json chips_json() {
  const chip::ChipConfig def = chip::chip_preset("ascend910b");
  json params = json::array();
  for (const auto& p : chip::chip_params()) params.push_back(param_json(p, chip::get_param(def, p.name)));
  json presets = json::array();
  for (const auto& name : chip::chip_preset_names()) {
    const chip::ChipConfig c = chip::chip_preset(name);
    json differs = json::object();
    for (const auto& p : chip::chip_params())
      if (chip::get_param(c, p.name) != chip::get_param(def, p.name)) differs[p.name] = chip::get_param(c, p.name);
    json key = json::object();
    for (const auto& k : chip::chip_key_params()) key[k] = chip::get_param(c, k);
    presets.push_back({{"name", name},
                       {"summary", chip::chip_preset_summary(name)},
                       {"key", key},
                       {"peak_cube_tflops", c.peak_cube_flops() / 1e12},
                       {"differs", differs}});
  }
  json cluster = json::array();
  const chip::ClusterConfig cdef;
  for (const auto& p : chip::cluster_params()) cluster.push_back(param_json(p, chip::get_cluster_param(cdef, p.name)));
  return {{"presets", presets}, {"params", params}, {"cluster_params", cluster}};
}

json ops_json() {
  graph::ensure_fused_ops_registered();
  probes::register_probe_ops();
  json out = json::array();
  for (const auto& [type, def] : graph::OpRegistry::instance().all()) {
    json attrs = json::array();
    for (const auto& a : def.attrs)
      attrs.push_back({{"name", a.name}, {"required", a.required},
                       {"default", a.default_value ? json(graph::attr_value_str(*a.default_value)) : json(nullptr)},
                       {"doc", a.doc}});
    out.push_back({{"type", type}, {"doc", def.doc}, {"backward", def.backward}, {"aliases", def.aliases},
                   {"inputs", def.input_names}, {"outputs", def.output_names}, {"min_inputs", def.min_inputs},
                   {"max_inputs", def.max_inputs}, {"attrs", attrs}});
  }
  return out;
}

json injectors_json() {
  json out = json::array();
  for (const auto& [name, info] : inject::InjectorRegistry::instance().all()) {
    json params = json::array();
    for (const auto& p : info.params)
      params.push_back({{"name", p.name}, {"type", p.type}, {"required", p.required()},
                        {"default", p.required() || p.default_value == "-" ? json(nullptr) : json(p.default_value)},
                        {"doc", p.doc}});
    out.push_back({{"name", name}, {"doc", info.doc}, {"params", params}});
  }
  return out;
}

}  // namespace

json catalog_json() {
  json probes = json::array();
  for (const auto& [key, doc] : probe_options()) {
    if (!key.empty()) {
      probes.push_back({{"key", key}, {"doc", doc}});
    } else if (!probes.empty()) {  // a continuation line of the previous key's doc
      const auto text = doc.find_first_not_of(' ');
      probes.back()["doc"] = probes.back()["doc"].get<std::string>() + " " + doc.substr(text == std::string::npos ? 0 : text);
    }
  }
  json kinds = json::array();
  for (const auto& [k, doc] : expectation_kinds()) kinds.push_back({{"kind", k}, {"doc", doc}});
  return {{"chips", chips_json()},
          {"ops", ops_json()},
          {"injectors", injectors_json()},
          {"probe_options", probes},
          {"expectations", {{"kinds", kinds}, {"detection_kinds", detection_kinds()}, {"causes", cause_classes()}}}};
}

}  // namespace probelab::sim
