// Python values -> YAML: a scenario given as a dict, a --set value given as a Python object.
// dict (string keys, in insertion order) -> mapping, list/tuple -> sequence, None -> null,
// bool -> true/false, int -> decimal, float -> shortest round-trip text (.nan, .inf), str ->
// scalar; numpy scalars through __index__ / __float__. Anything else is a TypeError naming the
// key path.
#pragma once

#include <string>

#include <pybind11/pybind11.h>
#include <yaml-cpp/yaml.h>

namespace probelab::python {

/// A value nested more than 256 levels deep (or one that contains itself) is a ValueError.
YAML::Node to_yaml_node(pybind11::handle value, const std::string& path = "", int depth = 0);
/// Block style for documents, flow style (one line) for --set values.
std::string to_yaml_text(pybind11::handle value, bool flow);

}  // namespace probelab::python
