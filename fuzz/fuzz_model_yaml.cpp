// The YAML model format: text -> graph (parse_model_yaml), shape inference and validation included.
#include "fuzz/fuzz_util.h"
#include "graph/graph.h"
#include "graph/model_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace probelab;
  try {
    graph::parse_model_yaml(fuzz::text(data, size), (fuzz::scratch_dir() / "model.yaml").string());
  } catch (const graph::GraphError&) {
    // bad input (exit 2): the only error type of the graph layer, which knows no layer above it
  } catch (const std::exception& e) {
    fuzz::unclassified(e);
  }
  return 0;
}
