// Gradients of the collective ops (graph/ops/collective.cpp). They have no single-rank reference,
// so no finite differences here: the backward ops each collective emits, with their attributes;
// the numbers are checked end to end against single-device training (tests/sim/run/test_tensor_parallel.cpp).
#include <gtest/gtest.h>

#include "tests/graph/model_builder.h"

namespace probelab::graph {
namespace {

using testing::ModelBuilder;

/// w [8, 4] -> <type>(attrs) -> ReduceSum -> loss; returns the backward ops of the collective.
std::vector<Op> collective_backward(const std::string& type, Attrs attrs) {
  ModelBuilder m("coll");
  const std::string w = m.weight("w", {8, 4});
  attrs["comm"] = std::string("server");
  attrs["ranks"] = std::int64_t{4};
  attrs["accumulation"] = std::string("fp16");
  const std::string y = m.op(type, "coll", {w}, attrs);
  m.op("ReduceSum", "sum", {y}, {{"keepdims", std::int64_t{0}}}, {"loss"});
  append_backward(m.g, "loss");
  std::vector<Op> out;
  for (const auto& op : m.g.ops())
    if (op.grad_of == "coll") out.push_back(op);
  return out;
}

TEST(CollectiveGradients, AllGatherSendsEachRankTheSumOfItsBlock) {
  const auto ops = collective_backward("AllGather", {});
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].type, "ReduceScatter");
  EXPECT_EQ(ops[0].attr_str("reduction"), "sum");
  EXPECT_EQ(ops[0].attr_str("comm"), "server");
  EXPECT_EQ(ops[0].attr_int("ranks"), 4);
  EXPECT_EQ(ops[0].attr_str("accumulation"), "fp16");
  EXPECT_EQ(ops[0].outputs[0], "w/gradient");
}

// grad_reduction mean: consumers every rank runs on the same values (tensor parallelism) give
// every rank the same dY, whose mean over the ranks is each rank's own block.
TEST(CollectiveGradients, AllGatherOfReplicatedConsumersTakesTheMean) {
  const auto ops = collective_backward("AllGather", {{"grad_reduction", std::string("mean")}});
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].type, "ReduceScatter");
  EXPECT_EQ(ops[0].attr_str("reduction"), "mean");
  EXPECT_EQ(ops[0].outputs[0], "w/gradient");
  EXPECT_THROW(collective_backward("AllGather", {{"grad_reduction", std::string("max")}}), GraphError);
  EXPECT_THROW(collective_backward("AllReduce", {{"grad_reduction", std::string("mean")}}), GraphError);  // AllGather's only
}

TEST(CollectiveGradients, ReduceScatterGathersAndAMeanScales) {
  auto ops = collective_backward("ReduceScatter", {{"reduction", std::string("sum")}});
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].type, "AllGather");
  ops = collective_backward("ReduceScatter", {{"reduction", std::string("mean")}});
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].type, "AllGather");
  EXPECT_EQ(ops[1].type, "Scale");
  EXPECT_DOUBLE_EQ(ops[1].attr_float("alpha"), 0.25);
}

TEST(CollectiveGradients, AllReduceIsItsOwnTranspose) {
  for (const char* red : {"sum", "mean"}) {
    const auto ops = collective_backward("AllReduce", {{"reduction", std::string(red)}, {"algorithm", std::string("hierarchical")}});
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].type, "AllReduce");
    EXPECT_EQ(ops[0].attr_str("reduction"), red);
    EXPECT_EQ(ops[0].attr_str("algorithm"), "ring");  // the gradient runs flat on the same communicator
  }
}

// A Reduce(sum) to the root: dY padded into block `root` of `ranks` blocks, then ReduceScatter(sum)
// gives the root the sum and every other rank zeros.
TEST(CollectiveGradients, BroadcastReducesToTheRoot) {
  const auto ops = collective_backward("Broadcast", {{"root", std::int64_t{2}}, {"algorithm", std::string("tree")}});
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].type, "Pad");
  EXPECT_EQ(ops[0].attr_ints("pads"), (std::vector<std::int64_t>{16, 8}));  // 2 blocks of 8 rows before, 1 after
  EXPECT_EQ(ops[0].attr_ints("axes"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(ops[1].type, "ReduceScatter");
  EXPECT_EQ(ops[1].attr_str("reduction"), "sum");
  EXPECT_EQ(ops[1].attr_str("algorithm"), "tree");
  EXPECT_EQ(ops[1].attr_str("comm"), "server");
  EXPECT_EQ(ops[1].attr_int("ranks"), 4);
  EXPECT_EQ(ops[1].attr_str("accumulation"), "fp16");
  EXPECT_EQ(ops[1].inputs[0], ops[0].outputs[0]);
  EXPECT_EQ(ops[1].outputs[0], "w/gradient");
  EXPECT_THROW(collective_backward("Broadcast", {{"root", std::int64_t{4}}}), GraphError);  // outside 4 ranks
}

TEST(CollectiveOps, ShapesAndAttributesAreChecked) {
  ModelBuilder m("shapes");
  const std::string w = m.weight("w", {6, 2});
  EXPECT_EQ(m.g.tensor(m.op("AllGather", "ag", {w}, {{"ranks", std::int64_t{3}}})).desc.shape, (Shape{18, 2}));
  EXPECT_EQ(m.g.tensor(m.op("ReduceScatter", "rs", {w}, {{"ranks", std::int64_t{3}}})).desc.shape, (Shape{2, 2}));
  EXPECT_THROW(m.op("ReduceScatter", "rs4", {w}, {{"ranks", std::int64_t{4}}}), GraphError);  // 6 % 4
  EXPECT_THROW(m.op("AllGather", "ag0", {w}), GraphError);                                   // no ranks
  EXPECT_THROW(m.op("AllReduce", "ar", {w}, {{"comm", std::string("rack")}}), GraphError);
  EXPECT_THROW(m.op("AllGather", "agh", {w}, {{"ranks", std::int64_t{3}}, {"algorithm", std::string("hierarchical")}}),
               GraphError);
  // A mean's divisor reaches the chips as an unsigned count: a negative one divided by about 2^32.
  try {
    m.op("AllReduce", "arneg", {w}, {{"divisor", std::int64_t{-2}}});
    ADD_FAILURE() << "a negative divisor was accepted";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("attribute 'divisor' must be in [0, 4294967295] (0: the group size), got -2"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(m.op("ReduceScatter", "rsbig", {w}, {{"ranks", std::int64_t{3}}, {"divisor", std::int64_t{1} << 32}}),
               GraphError);
  EXPECT_EQ(m.g.tensor(m.op("AllReduce", "ar3", {w}, {{"divisor", std::int64_t{3}}})).desc.shape, (Shape{6, 2}));
}

}  // namespace
}  // namespace probelab::graph
