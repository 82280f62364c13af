// What `probelab list` prints, gathered from the registries of every layer: op definitions,
// injectors, probe options, diagnosis cause classes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::sim {

/// One multi-line block per registered op type (name order): inputs, outputs, attributes with
/// required/default and doc.
std::vector<std::string> describe_ops();
/// The op table of README.md, generated from the registries: one Markdown row per forward op type
/// (name order) with its aliases, where it runs on the chip (a Cube kernel or the Vector unit),
/// whether it trains (a gradient) or is inference only, and its doc line; then the backward and
/// fused op types in one line each. Probe ops are not listed.
std::string ops_markdown_table();
/// One block per registered injector with its parameters.
std::vector<std::string> describe_injectors();
/// Probe configuration keys with a one-line doc each.
const std::vector<std::pair<std::string, std::string>>& probe_options();
/// Cause classes of the probe runtime's diagnosis (what a diagnosis expectation may name).
std::vector<std::string> cause_classes();

/// Every registry as data (`probelab list --json`, the Python API):
///   chips         {presets: [{name, differs: {param: value}}], params: [{name, type, unit, default,
///                  doc, source, min, max, choices}]} (defaults of ascend910b)
///   ops           [{type, doc, backward, aliases, inputs, outputs, min_inputs, max_inputs (-1: any),
///                   attrs: [{name, required, default, doc}]}]
///   injectors     [{name, doc, params: [{name, type, required, default, doc}]}]
///   probe_options [{key, doc}]
///   expectations  {kinds: [{kind, doc}], detection_kinds: [..], causes: [..]}
nlohmann::json catalog_json();

}  // namespace probelab::sim
