// The YAML model format: text -> graph (parse_model_yaml), shape inference and validation included.
#include "fuzz/fuzz_util.h"
#include "graph/model_yaml.h"
#include "sim/scenario/bad_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace probelab;
  try {
    graph::parse_model_yaml(fuzz::text(data, size), (fuzz::scratch_dir() / "model.yaml").string());
  } catch (const std::exception& e) {
    if (!sim::is_bad_input(e)) fuzz::unclassified(e);
  }
  return 0;
}
