// What `probelab list` prints, gathered from the registries of every layer: op definitions,
// injectors, probe options, diagnosis cause classes.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace probelab::sim {

/// One multi-line block per registered op type (name order): inputs, outputs, attributes with
/// required/default and doc.
std::vector<std::string> describe_ops();
/// One block per registered injector with its parameters.
std::vector<std::string> describe_injectors();
/// Probe configuration keys with a one-line doc each.
const std::vector<std::pair<std::string, std::string>>& probe_options();
/// Cause classes of the probe runtime's diagnosis (what a diagnosis expectation may name).
std::vector<std::string> cause_classes();

}  // namespace probelab::sim
