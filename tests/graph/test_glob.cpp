// Glob and regex selection.
#include <gtest/gtest.h>

#include "graph/graph.h"

namespace probelab::graph {
namespace {

TEST(Glob, Basics) {
  EXPECT_TRUE(glob_match("conv*/gradient", "conv1/gradient"));
  EXPECT_TRUE(glob_match("conv*/gradient", "conv15/weight/gradient"));  // '*' crosses '/'
  EXPECT_FALSE(glob_match("conv*/gradient", "conv15/gradient/norm"));
  EXPECT_FALSE(glob_match("conv*/gradient", "fc1/gradient"));
  EXPECT_TRUE(glob_match("layer[4-6]/*", "layer5/conv2"));
  EXPECT_FALSE(glob_match("layer[4-6]/*", "layer7/conv2"));
  EXPECT_FALSE(glob_match("layer[4-6]/*", "layer4"));
  EXPECT_TRUE(glob_match("layer[!4-6]/*", "layer7/x"));
  EXPECT_FALSE(glob_match("layer[^4-6]/*", "layer5/x"));
  EXPECT_TRUE(glob_match("a?c", "abc"));
  EXPECT_FALSE(glob_match("a?c", "ac"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_FALSE(glob_match("", "a"));
  EXPECT_TRUE(glob_match("**a**", "bab"));
  EXPECT_TRUE(glob_match("[]x]", "]"));
  EXPECT_TRUE(glob_match("[a-]", "-"));
  EXPECT_TRUE(glob_match("x\\*", "x*"));
  EXPECT_FALSE(glob_match("x\\*", "xy"));
  EXPECT_TRUE(glob_match("*b*b*b", "abababab"));
  EXPECT_FALSE(glob_match("*b*b*b*c", "abababab"));
}

TEST(Glob, MalformedPatternsThrow) {
  EXPECT_THROW(glob_match("layer[4-6", "layer4"), GraphError);
  EXPECT_THROW(glob_match("abc\\", "abc"), GraphError);
  try {
    glob_match("conv[1", "x");
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("'[' at position 4 is not closed"), std::string::npos) << e.what();
  }
}

Graph layered() {
  Graph g("layers");
  g.add_tensor({"x", {DType::F32, {4}, Format::ND}, TensorKind::Input});
  g.mark_input("x");
  std::string prev = "x";
  for (int l = 1; l <= 8; ++l) {
    Op op;
    op.name = "layer" + std::to_string(l) + "/relu";
    op.type = "Relu";
    op.scope = "model/block" + std::to_string((l - 1) / 4) + "/" + op.name;
    op.inputs = {prev};
    op.outputs = {"layer" + std::to_string(l) + "/out"};
    prev = op.outputs[0];
    g.add_op(op);
  }
  return g;
}

TEST(Select, OpsTensorsAndScopes) {
  Graph g = layered();
  auto ops = g.select_ops("layer[4-6]/*");
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0]->name, "layer4/relu");
  EXPECT_EQ(ops[2]->name, "layer6/relu");
  auto ts = g.select_tensors("layer*/out");
  ASSERT_EQ(ts.size(), 8u);
  EXPECT_EQ(ts[0]->name, "layer1/out");  // name order
  EXPECT_EQ(g.select_tensors("x").size(), 1u);
  auto sc = g.select_scope("model/block1/.*");
  ASSERT_EQ(sc.size(), 4u);
  EXPECT_EQ(sc[0]->name, "layer5/relu");
  EXPECT_TRUE(g.select_scope("block1").empty());  // whole match only
  EXPECT_THROW(g.select_scope("model/(unclosed"), GraphError);
  EXPECT_THROW(g.select_ops("[oops"), GraphError);
}

}  // namespace
}  // namespace probelab::graph
