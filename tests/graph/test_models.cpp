// The bundled models under scenarios/models/: they load, validate, run on the CPU reference, keep
// their results through the snapshots, and have the structure the scenarios rely on.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/autodiff.h"
#include "graph/model_yaml.h"
#include "graph/op_registry.h"
#include "graph/print.h"
#include "graph/snapshot.h"

namespace probelab::graph {
namespace {

std::string model_path(const std::string& file) { return std::string(PROBELAB_SOURCE_DIR) + "/scenarios/models/" + file; }

std::size_t count_type(const Graph& g, const std::string& type) {
  std::size_t n = 0;
  for (const Op& op : g.ops()) {
    const OpDef* d = OpRegistry::instance().find(op.type);
    n += (d ? d->type : op.type) == type ? 1 : 0;
  }
  return n;
}

// Loads, snapshots and runs a model; checks the loss is finite and identical in every snapshot.
SnapshotSet check_model(const std::string& file) {
  const ModelFile m = load_model_yaml(model_path(file));
  EXPECT_NO_THROW(m.graph.validate());
  SnapshotSet s = build_snapshots(m.graph);
  EXPECT_NO_THROW(s.optimized.validate());
  EXPECT_NO_THROW(s.fused.validate());
  const auto feeds = make_feeds(m, 1);
  const Tensor loss = run_graph_reference(s.original, feeds, RefPrecision::F32).at("loss");
  EXPECT_EQ(loss.numel(), 1);
  EXPECT_TRUE(std::isfinite(loss.to_f32()[0])) << file;
  EXPECT_GT(loss.to_f32()[0], 0.0f) << file;
  EXPECT_EQ(run_graph_reference(s.fused, feeds, RefPrecision::F32).at("loss"), loss) << file;
  const double loss64 = run_graph_reference(s.original, feeds, RefPrecision::F64).at("loss").to_f64()[0];
  EXPECT_NEAR(loss64, loss.to_f32()[0], 1e-4 * std::fabs(loss64)) << file;
  EXPECT_FALSE(format_graph(s.fused).empty());
  return s;
}

TEST(BundledModels, Mlp) {
  const SnapshotSet s = check_model("mlp.yaml");
  EXPECT_EQ(count_type(s.fused, "FusedLayerNormRelu"), 1u);
  EXPECT_EQ(count_type(s.fused, "FusedMatMulBiasGelu"), 1u);
  EXPECT_EQ(fate_of(s, "fc2/gelu").fused_into, "fc2/matmul+bias+gelu");
}

TEST(BundledModels, ResNetHasSixteenConvs) {
  const SnapshotSet s = check_model("resnet16.yaml");
  EXPECT_EQ(count_type(s.original, "Conv"), 16u);
  for (int i = 1; i <= 16; ++i) EXPECT_NE(s.original.find_op("conv" + std::to_string(i)), nullptr) << i;
  EXPECT_EQ(s.original.select_ops("conv*").size(), 16u);
  EXPECT_EQ(s.original.select_scope("resnet/layer[4-6]/.*").size(), 3u * 7u);  // conv, bn, relu, conv, bn, add, relu
  // the first conv of each block (and stem and head) fuse with BatchNorm and ReLU
  EXPECT_EQ(count_type(s.fused, "FusedConvBnRelu"), 9u);
  EXPECT_EQ(fate_of(s, "conv15").kind, OpFate::Kind::Kept);
  EXPECT_EQ(fate_of(s, "conv14").kind, OpFate::Kind::Fused);
}

TEST(BundledModels, ResNetTrainingGraphHasConvGradients) {
  const ModelFile m = load_model_yaml(model_path("resnet16.yaml"));
  const Graph t = build_training_graph(m.graph, "loss");
  EXPECT_NO_THROW(t.validate());
  std::vector<std::string> names;
  for (const TensorInfo* ti : t.select_tensors("conv*/gradient")) names.push_back(ti->name);
  EXPECT_NE(std::find(names.begin(), names.end(), "conv15/gradient"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "conv15/weight/gradient"), names.end());
  EXPECT_GE(names.size(), 31u);  // 16 weight gradients + at least 15 output gradients
}

TEST(BundledModels, TransformerBlock) {
  const SnapshotSet s = check_model("transformer_block.yaml");
  EXPECT_EQ(count_type(s.original, "Softmax"), 1u);
  EXPECT_EQ(count_type(s.original, "LayerNormalization"), 2u);
  EXPECT_GE(count_type(s.original, "MatMul"), 6u);
  EXPECT_EQ(count_type(s.fused, "FusedMatMulBiasGelu"), 1u);
  const OpProvenance p = trace_to_original(s, Stage::Fused, "mlp/fc1+fc1_bias+gelu");
  EXPECT_EQ(p.original_ops, (std::vector<std::string>{"mlp/fc1", "mlp/fc1_bias", "mlp/gelu"}));
}

}  // namespace
}  // namespace probelab::graph
