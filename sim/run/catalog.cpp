#include "sim/run/catalog.h"

#include <fmt/format.h>

#include "graph/fused_ops.h"
#include "graph/op_registry.h"
#include "injectors/injector.h"
#include "probes/diagnosis.h"
#include "probes/insertion_pass.h"

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
  for (int c = 0; c <= static_cast<int>(probes::CauseClass::Precision); ++c)
    out.emplace_back(probes::cause_class_name(static_cast<probes::CauseClass>(c)));
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

}  // namespace probelab::sim
