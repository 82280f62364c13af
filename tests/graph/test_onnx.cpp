// ONNX importer: initializers and Constant nodes, folding of shape inputs, symbolic dimensions,
// legacy opsets, errors (every unsupported op listed), and autodiff on an imported model.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "graph/autodiff.h"
#include "graph/onnx/onnx_import.h"
#include "graph/op_registry.h"

namespace probelab::graph {
namespace {

const std::string kData = std::string(PROBELAB_SOURCE_DIR) + "/tests/graph/data/";
const std::string kOnnx = "/usr/share/libonnx-testdata/data/";

OnnxImportOptions batch2() {
  OnnxImportOptions o;
  o.dim_params["batch"] = 2;
  return o;
}

TEST(OnnxImport, InitializersConstantsAndSymbolicDims) {
  const Graph g = import_onnx(kData + "small_mlp.onnx", batch2());
  EXPECT_EQ(g.name(), "small_mlp");
  EXPECT_EQ(g.tensor("W").kind, TensorKind::Weight);
  EXPECT_EQ(g.tensor("B").kind, TensorKind::Weight);
  EXPECT_EQ(g.find_tensor("shape"), nullptr) << "the Constant feeding Reshape's shape is folded away";
  EXPECT_EQ(g.tensor("x").desc.shape, (Shape{2, 4}));
  const Op* reshape = g.find_op("/out/Reshape");
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->inputs, std::vector<std::string>{"a"});
  EXPECT_EQ(reshape->attr_ints("shape"), (std::vector<std::int64_t>{3, -1}));
  EXPECT_EQ(reshape->scope, "out/Reshape");
  const std::map<std::string, Tensor> feeds{{"x", Tensor::from_f32({2, 4}, std::vector<float>{1, 2, 3, 4, -1, 20, 0, 0})}};
  const auto v = run_graph_reference(g, feeds, RefPrecision::F32);
  // x @ W = [x0 + x3, x1 + x3, x2 + x3]; + B; relu
  EXPECT_EQ(v.at("y").shape(), (Shape{3, 2}));
  EXPECT_EQ(v.at("y").to_f32(), (std::vector<float>{5.5f, 0, 7, 0, 10, 0}));
}

TEST(OnnxImport, SymbolicDimsNeedAValue) {
  try {
    import_onnx(kData + "small_mlp.onnx");
    FAIL();
  } catch (const GraphError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("small_mlp.onnx"), std::string::npos) << m;
    EXPECT_NE(m.find("'batch'"), std::string::npos) << m;
  }
}

TEST(OnnxImport, AllUnsupportedOpsAreListedInOneError) {
  const std::string model = kOnnx + "node/test_softmax_axis_0_expanded/model.onnx";
  EXPECT_EQ(onnx_unsupported_ops(model), (std::vector<std::string>{"Exp", "ReduceMax"}));
  try {
    import_onnx(model);
    FAIL();
  } catch (const OnnxUnsupportedError& e) {
    EXPECT_EQ(e.kind(), OnnxUnsupportedError::Kind::OpTypes);
    EXPECT_EQ(e.items(), (std::vector<std::string>{"Exp", "ReduceMax"}));
    EXPECT_NE(std::string(e.what()).find("unsupported op types: Exp, ReduceMax"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, ShapeInputsMustBeConstantOrBound) {
  const std::string model = kOnnx + "node/test_reshape_reordered_all_dims/model.onnx";
  const OnnxModelIo io = onnx_model_io(model);
  ASSERT_EQ(io.inputs.size(), 2u);
  EXPECT_EQ(io.shape_inputs, std::set<std::string>{io.inputs[1]});
  EXPECT_EQ(io.op_types, std::set<std::string>{"Reshape"});
  try {
    import_onnx(model);
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("must be a constant"), std::string::npos) << e.what();
  }
  OnnxImportOptions o;
  o.bind_inputs.emplace(io.inputs[1], read_onnx_tensor(kOnnx + "node/test_reshape_reordered_all_dims/test_data_set_0/input_1.pb"));
  const Graph g = import_onnx(model, o);
  ASSERT_EQ(g.ops().size(), 1u);
  EXPECT_EQ(g.ops()[0].inputs.size(), 1u);
  EXPECT_EQ(g.ops()[0].attr_ints("shape"), (std::vector<std::int64_t>{4, 2, 3}));
  EXPECT_EQ(g.find_tensor(io.inputs[1]), nullptr);
}

TEST(OnnxImport, LegacySoftmaxFlattensTrailingDims) {
  const Graph g = import_onnx(kData + "legacy_softmax.onnx");
  std::vector<std::string> types;
  for (const Op& op : g.ops()) types.push_back(op.type);
  EXPECT_EQ(types, (std::vector<std::string>{"Flatten", "Softmax", "Reshape"}));
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = 0.1f * float(i % 7) - 0.2f * float(i / 12);
  const auto v = run_graph_reference(g, {{"x", Tensor::from_f32({2, 3, 4}, x)}}, RefPrecision::F64);
  const auto y = v.at("y").to_f64();
  for (int b = 0; b < 2; ++b) {  // softmax over all 12 trailing elements of each batch entry
    double z = 0;
    for (int j = 0; j < 12; ++j) z += std::exp(double(x[b * 12 + j]));
    for (int j = 0; j < 12; ++j) EXPECT_NEAR(y[b * 12 + j], std::exp(double(x[b * 12 + j])) / z, 1e-7);
  }
}

TEST(OnnxImport, LegacyBatchNormStatisticsAreConstants) {
  const Graph g = import_onnx(kOnnx + "pytorch-converted/test_BatchNorm2d_eval/model.onnx");
  const Op& bn = g.ops().at(0);
  EXPECT_EQ(bn.type, "BatchNormalization");
  EXPECT_FALSE(bn.has_attr("is_test"));
  EXPECT_EQ(g.tensor(bn.inputs[1]).kind, TensorKind::Weight);
  EXPECT_EQ(g.tensor(bn.inputs[3]).kind, TensorKind::Constant);
  EXPECT_EQ(g.tensor(bn.inputs[4]).kind, TensorKind::Constant);
}

TEST(OnnxImport, ImportedModelTrains) {
  Graph g = import_onnx(kOnnx + "pytorch-converted/test_Conv2d_groups/model.onnx");
  const std::string out = g.outputs().at(0);
  Op mean;
  mean.name = "loss";
  mean.type = "ReduceMean";
  mean.inputs = {out};
  mean.outputs = {"loss"};
  mean.attrs = {{"keepdims", std::int64_t{0}}};
  g.add_op(mean);
  const Graph t = build_training_graph(g, "loss");
  t.validate();
  std::size_t updates = 0;
  for (const Op& op : t.ops()) updates += op.direction == Direction::Optimizer;
  EXPECT_EQ(updates, g.initializers().size());
  const std::string in = g.inputs().at(0);
  const Tensor x = read_onnx_tensor(kOnnx + "pytorch-converted/test_Conv2d_groups/test_data_set_0/input_0.pb");
  const auto v = run_graph_reference(t, {{in, x}}, RefPrecision::F32);
  for (const auto& [name, init] : g.initializers()) {
    ASSERT_TRUE(v.count(gradient_name(name))) << name;
    EXPECT_EQ(v.at(gradient_name(name)).shape(), init.shape());
  }
}

TEST(OnnxImport, UnreadableFilesNameThePath) {
  try {
    read_onnx_tensor("/nonexistent/input_0.pb");
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/input_0.pb"), std::string::npos);
  }
  EXPECT_THROW(import_onnx(kData + "small_mlp.textproto"), GraphError);
}

}  // namespace
}  // namespace probelab::graph
