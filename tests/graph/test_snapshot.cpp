// Optimized and fused snapshots, fused op definitions and provenance.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/fused_ops.h"
#include "graph/init.h"
#include "graph/op_registry.h"
#include "graph/passes.h"
#include "graph/print.h"
#include "graph/snapshot.h"

namespace probelab::graph {
namespace {

TensorDesc f32(Shape s) { return {DType::F32, std::move(s), Format::ND}; }

Op make(std::string name, std::string type, std::vector<std::string> in, std::vector<std::string> out, Attrs a = {}) {
  Op op;
  op.name = std::move(name);
  op.type = std::move(type);
  op.scope = "net/" + op.name;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  op.attrs = std::move(a);
  return op;
}

void add_input(Graph& g, const std::string& name, Shape s) {
  g.add_tensor({name, f32(std::move(s)), TensorKind::Input});
  g.mark_input(name);
}

void add_weight(Graph& g, const std::string& name, Shape s, std::uint64_t seed, TensorKind kind = TensorKind::Weight,
                const char* init = "normal(0.5)") {
  g.add_initializer(name, make_init(parse_init(init), f32(std::move(s)), seed), kind);
}

std::map<std::string, Tensor> feeds_for(const Graph& g, std::uint64_t seed) {
  std::map<std::string, Tensor> f;
  for (const std::string& in : g.inputs())
    f.emplace(in, make_init(parse_init("normal(1)"), g.tensor(in).desc, derive_seed(seed, in)));
  return f;
}

// x[4,8] @ w[8,16] + b[16] -> gelu -> relu -> y
Graph mlp_block() {
  Graph g("block");
  add_input(g, "x", {4, 8});
  add_weight(g, "w", {8, 16}, 1);
  add_weight(g, "b", {16}, 2);
  g.add_op(make("fc/matmul", "MatMul", {"x", "w"}, {"fc/mm"}));
  g.add_op(make("fc/add", "Add", {"fc/mm", "b"}, {"fc/pre"}));
  g.add_op(make("fc/gelu", "Gelu", {"fc/pre"}, {"fc/act"}));
  g.add_op(make("out", "Relu", {"fc/act"}, {"y"}));
  g.mark_output("y");
  return g;
}

TEST(Optimize, ConstantFoldingReplacesOpsByConstants) {
  Graph g("fold");
  add_input(g, "x", {2, 3});
  add_weight(g, "c1", {2, 3}, 1, TensorKind::Constant);
  add_weight(g, "c2", {2, 3}, 2, TensorKind::Constant);
  add_weight(g, "w", {2, 3}, 3);  // trainable: never folded
  g.add_op(make("sum", "Add", {"c1", "c2"}, {"s"}));
  g.add_op(make("act", "Relu", {"s"}, {"r"}));
  g.add_op(make("wact", "Relu", {"w"}, {"rw"}));
  g.add_op(make("use", "Add", {"x", "r"}, {"t"}));
  g.add_op(make("final", "Add", {"t", "rw"}, {"y"}));
  g.mark_output("y");
  OptimizeLog log;
  const Graph o = optimize_graph(g, {}, &log);
  EXPECT_EQ(log.folded, (std::vector<std::string>{"sum", "act"}));
  EXPECT_TRUE(log.dead.empty());
  ASSERT_EQ(o.ops().size(), 3u);
  EXPECT_EQ(o.ops()[0].name, "wact");
  ASSERT_TRUE(o.initializers().count("r"));
  EXPECT_FALSE(o.initializers().count("c1"));  // no longer used
  EXPECT_FALSE(o.find_tensor("s"));
  EXPECT_EQ(o.tensor("r").kind, TensorKind::Constant);
  const auto c1 = g.initializers().at("c1").to_f32(), c2 = g.initializers().at("c2").to_f32();
  const auto r = o.initializers().at("r").to_f32();
  for (std::size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i], std::max(c1[i] + c2[i], 0.0f));
  EXPECT_NO_THROW(o.validate());
  // same results before and after
  const auto feeds = feeds_for(g, 5);
  EXPECT_EQ(run_graph_reference(g, feeds, RefPrecision::F32).at("y"),
            run_graph_reference(o, feeds, RefPrecision::F32).at("y"));
}

TEST(Optimize, DeadOpsAreEliminated) {
  Graph g = mlp_block();
  g.add_op(make("side", "Sigmoid", {"x"}, {"unused"}));
  g.add_op(make("side2", "Relu", {"unused"}, {"unused2"}));
  OptimizeLog log;
  const Graph o = optimize_graph(g, {}, &log);
  EXPECT_EQ(log.dead, (std::vector<std::string>{"side", "side2"}));
  EXPECT_EQ(o.ops().size(), 4u);
  EXPECT_FALSE(o.find_tensor("unused"));
  EXPECT_NO_THROW(o.validate());
  const Graph kept = optimize_graph(g, {.fold_constants = true, .eliminate_dead = false});
  EXPECT_EQ(kept.ops().size(), 6u);
}

TEST(Fuse, MatMulAddGeluBecomesOneSelfContainedOp) {
  const Graph g = mlp_block();
  const Graph f = fuse_graph(g);
  ASSERT_EQ(f.ops().size(), 2u);
  const Op& fused = f.ops()[0];
  EXPECT_EQ(fused.type, "FusedMatMulBiasGelu");
  EXPECT_EQ(fused.name, "fc/matmul+add+gelu");
  EXPECT_EQ(fused.scope, "net/fc");
  EXPECT_EQ(fused.inputs, (std::vector<std::string>{"x", "w", "b"}));
  EXPECT_EQ(fused.outputs, (std::vector<std::string>{"fc/act"}));
  EXPECT_EQ(fused.fused_from, (std::vector<std::string>{"fc/matmul", "fc/add", "fc/gelu"}));
  ASSERT_EQ(fused.fused_body.size(), 3u);
  EXPECT_EQ(fused.fused_body[0].outputs[0], "fc/matmul+add+gelu/fc/matmul:0");
  EXPECT_EQ(fused.fused_body[1].inputs, (std::vector<std::string>{"fc/matmul+add+gelu/fc/matmul:0", "b"}));
  EXPECT_EQ(fused.fused_body[2].outputs[0], "fc/act");
  EXPECT_FALSE(f.find_tensor("fc/mm"));  // intermediates leave the graph
  EXPECT_EQ(f.tensor("fc/act").desc, f32({4, 16}));
  EXPECT_NO_THROW(f.validate());
  // Bit-identical results: the body runs the same kernels in the same order.
  const auto feeds = feeds_for(g, 9);
  const auto a = run_graph_reference(g, feeds, RefPrecision::F32);
  const auto b = run_graph_reference(f, feeds, RefPrecision::F32);
  EXPECT_EQ(a.at("y"), b.at("y"));
  // The registered type runs its body too.
  std::vector<const Tensor*> in{&feeds.at("x"), &g.initializers().at("w"), &g.initializers().at("b")};
  EXPECT_EQ(run_reference(fused, in, RefPrecision::F32)[0], a.at("fc/act"));
  std::vector<TensorDesc> descs{f32({4, 8}), f32({8, 16}), f32({16})};
  EXPECT_EQ(OpRegistry::instance().get("FusedMatMulBiasGelu").infer(fused, descs)[0], f32({4, 16}));
}

TEST(Fuse, IntermediateWithAnotherConsumerBlocksFusion) {
  Graph g = mlp_block();
  g.add_op(make("peek", "Relu", {"fc/pre"}, {"peeked"}));
  g.mark_output("peeked");
  const Graph f = fuse_graph(g);
  EXPECT_EQ(f.ops().size(), g.ops().size());
  Graph h = mlp_block();
  h.mark_output("fc/mm");  // an intermediate that is a graph output
  EXPECT_EQ(fuse_graph(h).ops().size(), h.ops().size());
}

TEST(Fuse, BiasFirstAddAndSharedInputs) {
  Graph g("bias_first");
  add_input(g, "x", {4, 8});
  add_weight(g, "w", {8, 8}, 1);
  g.add_op(make("mm", "MatMul", {"x", "w"}, {"m"}));
  g.add_op(make("add", "Add", {"x", "m"}, {"p"}));  // x is both the matmul input and the "bias"
  g.add_op(make("gelu", "Gelu", {"p"}, {"y"}));
  g.mark_output("y");
  const Graph f = fuse_graph(g);
  ASSERT_EQ(f.ops().size(), 1u);
  EXPECT_EQ(f.ops()[0].name, "mm+add+gelu");
  EXPECT_EQ(f.ops()[0].inputs, (std::vector<std::string>{"x", "w"}));
  const auto feeds = feeds_for(g, 3);
  EXPECT_EQ(run_graph_reference(g, feeds, RefPrecision::F64).at("y"),
            run_graph_reference(f, feeds, RefPrecision::F64).at("y"));
}

Graph conv_net(std::int64_t training_mode) {
  Graph g("cnn");
  add_input(g, "img", {2, 3, 5, 5});
  add_weight(g, "k", {4, 3, 3, 3}, 1);
  add_weight(g, "scale", {4}, 2, TensorKind::Weight, "ones");
  add_weight(g, "shift", {4}, 3);
  add_weight(g, "mean", {4}, 4, TensorKind::Constant);
  add_weight(g, "var", {4}, 5, TensorKind::Constant, "uniform(0.5, 2)");
  add_weight(g, "ln_s", {4, 5, 5}, 6, TensorKind::Weight, "ones");
  g.add_op(make("conv", "Conv2d", {"img", "k"}, {"c"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}}));
  Op bn = make("bn", "BatchNorm", {"c", "scale", "shift", "mean", "var"}, {"n"},
               {{"training_mode", training_mode}});
  g.add_op(bn);
  g.add_op(make("relu", "Relu", {"n"}, {"r"}));
  g.add_op(make("ln", "LayerNorm", {"r", "ln_s"}, {"l"}, {{"axis", std::int64_t{1}}}));
  g.add_op(make("relu2", "Relu", {"l"}, {"y"}));
  g.mark_output("y");
  return g;
}

TEST(Fuse, ConvBnReluAndLayerNormRelu) {
  const Graph g = conv_net(0);
  const SnapshotSet s = build_snapshots(g);
  ASSERT_EQ(s.fused.ops().size(), 2u);
  EXPECT_EQ(s.fused.ops()[0].type, "FusedConvBnRelu");
  EXPECT_EQ(s.fused.ops()[0].inputs, (std::vector<std::string>{"img", "k", "scale", "shift", "mean", "var"}));
  EXPECT_EQ(s.fused.ops()[1].type, "FusedLayerNormRelu");
  EXPECT_EQ(s.fused.ops()[1].name, "ln+relu2");
  EXPECT_NO_THROW(s.fused.validate());
  const auto feeds = feeds_for(g, 11);
  const auto a = run_graph_reference(s.original, feeds, RefPrecision::F32);
  const auto b = run_graph_reference(s.fused, feeds, RefPrecision::F32);
  EXPECT_EQ(a.at("y"), b.at("y"));
  // a training-mode BatchNorm is not an inference BatchNorm: no FusedConvBnRelu
  Graph t("cnn_train");
  add_input(t, "img", {2, 3, 5, 5});
  add_weight(t, "k", {4, 3, 3, 3}, 1);
  add_weight(t, "scale", {4}, 2);
  add_weight(t, "shift", {4}, 3);
  add_weight(t, "mean", {4}, 4, TensorKind::Constant);
  add_weight(t, "var", {4}, 5, TensorKind::Constant, "ones");
  t.add_op(make("conv", "Conv", {"img", "k"}, {"c"}));
  t.add_op(make("bn", "BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"n"},
                {{"training_mode", std::int64_t{1}}}));
  t.add_op(make("relu", "Relu", {"n"}, {"y"}));
  t.mark_output("y");
  const Graph tf = fuse_graph(t);
  EXPECT_EQ(tf.ops().size(), 3u);
}

TEST(Snapshot, ProvenanceAndFates) {
  Graph g = mlp_block();
  add_weight(g, "c", {4, 16}, 8, TensorKind::Constant);
  g.add_op(make("const_relu", "Relu", {"c"}, {"cr"}));
  g.add_op(make("mix", "Add", {"y", "cr"}, {"z"}));
  g.add_op(make("dead", "Tanh", {"y"}, {"unused"}));
  g.mark_output("z");
  const SnapshotSet s = build_snapshots(g);
  EXPECT_EQ(s.original.ops().size(), 7u);
  EXPECT_EQ(s.optimized.ops().size(), 5u);
  EXPECT_EQ(s.fused.ops().size(), 3u);
  const OpProvenance p = trace_to_original(s, Stage::Fused, "fc/matmul+add+gelu");
  EXPECT_EQ(p.introduced_in, Stage::Fused);
  EXPECT_EQ(p.type, "FusedMatMulBiasGelu");
  EXPECT_EQ(p.original_ops, (std::vector<std::string>{"fc/matmul", "fc/add", "fc/gelu"}));
  const OpProvenance q = trace_to_original(s, Stage::Fused, "mix");
  EXPECT_EQ(q.introduced_in, Stage::Original);
  EXPECT_EQ(q.original_ops, (std::vector<std::string>{"mix"}));
  EXPECT_THROW(trace_to_original(s, Stage::Fused, "fc/add"), GraphError);
  EXPECT_EQ(fate_of(s, "fc/add").kind, OpFate::Kind::Fused);
  EXPECT_EQ(fate_of(s, "fc/add").fused_into, "fc/matmul+add+gelu");
  EXPECT_EQ(fate_of(s, "const_relu").kind, OpFate::Kind::Folded);
  EXPECT_EQ(fate_of(s, "dead").kind, OpFate::Kind::Eliminated);
  EXPECT_EQ(fate_of(s, "mix").kind, OpFate::Kind::Kept);
  EXPECT_THROW(fate_of(s, "nope"), GraphError);
  const std::string summary = format_snapshot_summary(s);
  EXPECT_NE(summary.find("fc/matmul+add+gelu : FusedMatMulBiasGelu <- original ops fc/matmul, fc/add, fc/gelu"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("1 folded into constants: const_relu"), std::string::npos) << summary;
  EXPECT_NE(summary.find("1 dead ops eliminated: dead"), std::string::npos) << summary;
  const std::string text = format_graph(s.fused);
  EXPECT_NE(text.find("fused from: fc/matmul, fc/add, fc/gelu"), std::string::npos) << text;
  EXPECT_NE(text.find("| fc/gelu : Gelu (fc/matmul+add+gelu/fc/add:0) -> (fc/act)"), std::string::npos) << text;
}

TEST(Snapshot, InvalidOriginalIsRejected) {
  Graph g = mlp_block();
  g.ops()[1].inputs[1] = "missing_bias";
  EXPECT_THROW(build_snapshots(g), GraphError);
}

TEST(FusedOps, EmptyBodyIsAnError) {
  ensure_fused_ops_registered();
  Op op = make("lonely", "FusedLayerNormRelu", {"x"}, {"y"});
  std::vector<TensorDesc> d{f32({2})};
  try {
    OpRegistry::instance().get("FusedLayerNormRelu").infer(op, d);
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("op 'lonely' (FusedLayerNormRelu): fused op has an empty fused_body"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace probelab::graph
