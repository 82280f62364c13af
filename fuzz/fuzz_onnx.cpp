// ONNX import: a file's bytes -> graph (import_onnx reads a path, so the input is written first).
#include "fuzz/fuzz_util.h"
#include "graph/graph.h"
#include "graph/onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace probelab;
  const auto path = fuzz::scratch_dir() / "model.onnx";
  fuzz::write_file(path, fuzz::text(data, size));
  try {
    graph::import_onnx(path.string());
  } catch (const graph::GraphError&) {
    // bad input (exit 2): the only error type of the graph layer, which knows no layer above it
  } catch (const std::exception& e) {
    fuzz::unclassified(e);
  }
  return 0;
}
