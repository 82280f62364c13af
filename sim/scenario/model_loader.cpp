#include "sim/scenario/model_loader.h"

#include <fmt/format.h>

#include "graph/model_yaml.h"
#include "sim/scenario/scenario_error.h"

#include "graph/onnx/onnx_import.h"

namespace probelab::sim {

namespace fs = std::filesystem;

LoadedModel load_model(const ModelSpec& spec) {
  LoadedModel m;
  if (spec.source == ModelSpec::Source::Onnx) {
    graph::OnnxImportOptions opts;
    opts.dim_params = spec.dims;
    opts.trainable_scalars = {spec.trainable.begin(), spec.trainable.end()};
    m.graph = graph::import_onnx(spec.path.string(), opts);
    return m;
  }
  graph::ModelFile f = graph::load_model_yaml(spec.path.string());
  m.graph = std::move(f.graph);
  m.input_inits = std::move(f.input_inits);
  return m;
}

ModelSpec model_spec_from_arg(const std::string& arg, const fs::path& source_root) {
  ModelSpec m;
  m.ref = arg;
  std::error_code ec;
  if (fs::is_regular_file(arg, ec)) {
    m.path = arg;
    m.source = fs::path(arg).extension() == ".onnx" ? ModelSpec::Source::Onnx : ModelSpec::Source::YamlFile;
    return m;
  }
  if (auto p = find_bundled_model(source_root, arg)) {
    m.path = *p;
    m.source = p->extension() == ".onnx" ? ModelSpec::Source::Onnx : ModelSpec::Source::Bundled;
    return m;
  }
  auto names = bundled_models(source_root);
  throw ScenarioError(arg, 0, 0, "", fmt::format("a model file or a bundled model ({})", fmt::join(names, ", ")),
                      "'" + arg + "' (not found)");
}

}  // namespace probelab::sim
