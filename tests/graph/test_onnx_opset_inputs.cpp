// ONNX import: a node giving an input that only a later opset of its op has names the model's
// opset and the opset that added the input.
#include <gtest/gtest.h>

#include "graph/onnx/onnx_import.h"

namespace probelab::graph {
namespace {

const std::string kDir = std::string(PROBELAB_SOURCE_DIR) + "/tests/graph/data/onnx_import/";

std::string import_error(const std::string& model) {
  try {
    import_onnx(kDir + model);
  } catch (const GraphError& e) {
    return e.what();
  }
  return "no error";
}

TEST(OnnxOpsetInputs, AnInputALaterOpsetAddedIsNamedWithBothOpsets) {
  const struct {
    const char* model;
    const char* message;
  } cases[] = {
      {"reduce_axes_input_opset13.onnx",
       "node 'rlse' (ReduceLogSumExp): has 2 inputs, but at the model's opset 13 ReduceLogSumExp takes 1: input 1 "
       "('axes') is an input of ReduceLogSumExp from opset 18 on"},
      {"split_input_opset12.onnx",
       "node 'split' (Split): has 2 inputs, but at the model's opset 12 Split takes 1: input 1 ('split') is an input "
       "of Split from opset 13 on"},
      {"pad_axes_input_opset13.onnx",
       "node 'pad' (Pad): has 4 inputs, but at the model's opset 13 Pad takes 3: input 3 ('axes') is an input of Pad "
       "from opset 18 on"},
  };
  for (const auto& c : cases) {
    const std::string e = import_error(c.model);
    EXPECT_NE(e.find(c.message), std::string::npos) << c.model << ": " << e;
  }
}

}  // namespace
}  // namespace probelab::graph
