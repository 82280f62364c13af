// ONNX import: a node giving an input that only a later opset of its op has names the model's
// opset and the opset that added the input; one giving an attribute that a later opset made an
// input, at such an opset, names the input it is there.
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

TEST(OnnxOpsetInputs, ClipBoundsAreAttributesBeforeOpset11AndInputsFromIt) {
  EXPECT_NE(import_error("clip_inputs_opset6.onnx")
                .find("node 'clip' (Clip): has 3 inputs, but at the model's opset 6 Clip takes 1: input 2 ('max') is "
                      "an input of Clip from opset 11 on (at opset 6, the attribute 'max')"),
            std::string::npos)
      << import_error("clip_inputs_opset6.onnx");
  EXPECT_NE(import_error("clip_attributes_opset11.onnx")
                .find("node 'clip' (Clip): has the attribute 'max', but at the model's opset 11 Clip takes max as input "
                      "2 (an attribute of Clip before opset 11)"),
            std::string::npos)
      << import_error("clip_attributes_opset11.onnx");
  // the opset-6 form imports, its bounds as the op's attributes
  const Graph g = import_onnx(kDir + "clip_attributes_opset6.onnx");
  ASSERT_EQ(g.ops().size(), 1u);
  EXPECT_EQ(g.ops()[0].inputs.size(), 1u);
  EXPECT_EQ(g.ops()[0].attr_float("min"), -1.0);
  EXPECT_EQ(g.ops()[0].attr_float("max"), 1.0);
}

TEST(OnnxOpsetInputs, AnAttributeALaterOpsetMadeAnInputIsNamedWithTheInput) {
  EXPECT_NE(import_error("squeeze_axes_attribute_opset13.onnx")
                .find("node 'squeeze' (Squeeze): has the attribute 'axes', but at the model's opset 13 Squeeze takes "
                      "axes as input 1 (an attribute of Squeeze before opset 13)"),
            std::string::npos)
      << import_error("squeeze_axes_attribute_opset13.onnx");
}

}  // namespace
}  // namespace probelab::graph
