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

TEST(OnnxOpsetInputs, ReduceAxesInputBeforeOpset18IsNamed) {
  const std::string e = import_error("reduce_axes_input_opset13.onnx");
  EXPECT_NE(e.find("node 'rlse' (ReduceLogSumExp): has 2 inputs, but at the model's opset 13 ReduceLogSumExp takes 1: "
                   "input 1 ('axes') is an input of ReduceLogSumExp from opset 18 on"),
            std::string::npos)
      << e;
}

TEST(OnnxOpsetInputs, SplitInputBeforeOpset13IsNamed) {
  const std::string e = import_error("split_input_opset12.onnx");
  EXPECT_NE(e.find("node 'split' (Split): has 2 inputs, but at the model's opset 12 Split takes 1: input 1 ('split') is "
                   "an input of Split from opset 13 on"),
            std::string::npos)
      << e;
}

TEST(OnnxOpsetInputs, PadAxesInputBeforeOpset18IsNamed) {
  const std::string e = import_error("pad_axes_input_opset13.onnx");
  EXPECT_NE(e.find("node 'pad' (Pad): has 4 inputs, but at the model's opset 13 Pad takes 3: input 3 ('axes') is an "
                   "input of Pad from opset 18 on"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace probelab::graph
