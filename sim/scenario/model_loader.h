// Loading the model a scenario names: a YAML model file (graph/model_yaml.h) or an ONNX file
// (graph/onnx/). Errors are graph::GraphError naming the file.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "graph/graph.h"
#include "graph/init.h"
#include "sim/scenario/scenario.h"

namespace probelab::sim {

struct LoadedModel {
  graph::Graph graph;
  std::map<std::string, graph::InitSpec> input_inits;  // generators the model file gives its inputs
};

LoadedModel load_model(const ModelSpec& spec);

/// A model given on the command line: a bundled model name, or a .yaml/.onnx path. Throws
/// ScenarioError when neither exists.
ModelSpec model_spec_from_arg(const std::string& arg, const std::filesystem::path& source_root);

}  // namespace probelab::sim
