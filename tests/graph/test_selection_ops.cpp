// TopK, Einsum, GatherND, OneHot and GlobalMaxPool on hand-computed values, the corners ONNX's
// node cases leave out (ties, NaN, implicit outputs, broadcast "...", out-of-range indices) and
// their errors. (Gradients: test_autodiff_ops.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "graph/autodiff.h"
#include "graph/op_registry.h"
#include "tests/graph/grad_check.h"
#include "tests/graph/op_test_util.h"

namespace probelab::graph {
namespace {

using testing::error_of;
using testing::int64_tensor;
using testing::make_op;
using testing::run;

Tensor f32(const Shape& s, std::vector<float> v) { return Tensor::from_f32(s, v); }
const float kNan = std::numeric_limits<float>::quiet_NaN();

TEST(SelectionOps, TopKKeepsIndexOrderOnTiesAndRanksNanHighest) {
  const Tensor x = f32({2, 4}, {1, 3, 3, 2, 5, kNan, -1, 5});
  const auto top = run(make_op("TopK", 1, {{"k", std::int64_t{3}}}, 2), {&x});
  EXPECT_EQ(top[1].data<std::int64_t>()[0], 1);  // the two 3s in index order
  EXPECT_EQ(top[1].data<std::int64_t>()[1], 2);
  EXPECT_EQ(top[1].data<std::int64_t>()[2], 3);
  const std::vector<float> v = top[0].to_f32();
  EXPECT_TRUE(std::isnan(v[3]));  // row 1: NaN first, then the two 5s
  EXPECT_EQ((std::vector<std::int64_t>(top[1].data<std::int64_t>().begin() + 3, top[1].data<std::int64_t>().end())),
            (std::vector<std::int64_t>{1, 0, 3}));
  const auto low = run(make_op("TopK", 1, {{"k", std::int64_t{2}}, {"largest", std::int64_t{0}}}, 2), {&x});
  EXPECT_EQ(low[0].to_f32(), (std::vector<float>{1, 2, -1, 5}));  // NaN ranks last when smallest
  EXPECT_NE(error_of(make_op("TopK", 1, {{"k", std::int64_t{5}}}, 2), {&x}).find("k = 5 must be in [0, 4]"),
            std::string::npos);
}

TEST(SelectionOps, EinsumImplicitOutputsEllipsisAndDiagonals) {
  const Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = f32({3}, {1, 10, 100});
  // Implicit output: the labels used once, alphabetically ("ij,j" -> "i").
  EXPECT_EQ(run(make_op("Einsum", 2, {{"equation", std::string("ij,j")}}), {&a, &b})[0].to_f32(),
            (std::vector<float>{321, 654}));
  // "..." broadcasts: [2, 1, 2] with [3, 2] over the ellipsis.
  const Tensor p = f32({2, 1, 2}, {1, 2, 3, 4});
  const Tensor q = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_EQ(run(make_op("Einsum", 2, {{"equation", std::string("...j,...j->...")}}), {&p, &q})[0].to_f32(),
            (std::vector<float>{1, 2, 3, 3, 4, 7}));
  // A repeated label is a diagonal; the trace sums it.
  const Tensor m = f32({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run(make_op("Einsum", 1, {{"equation", std::string("ii->i")}}), {&m})[0].to_f32(), (std::vector<float>{1, 4}));
  EXPECT_EQ(run(make_op("Einsum", 1, {{"equation", std::string("ii")}}), {&m})[0].to_f32(), (std::vector<float>{5}));
  std::string e = error_of(make_op("Einsum", 2, {{"equation", std::string("ij,k->i")}}), {&a, &a});
  EXPECT_NE(e.find("term \"k\" of equation \"ij,k->i\" does not fit input 1 of shape [2, 3]"), std::string::npos) << e;
  e = error_of(make_op("Einsum", 2, {{"equation", std::string("ij,jk->iz")}}), {&a, &a});
  EXPECT_NE(e.find("label 'j' of equation \"ij,jk->iz\" has sizes 3 and 2"), std::string::npos) << e;
  e = error_of(make_op("Einsum", 1, {{"equation", std::string("i1->i")}}), {&b});
  EXPECT_NE(e.find("'1' is not a letter"), std::string::npos) << e;
}

TEST(SelectionOps, EinsumGradientNamesWhatItCannotDifferentiate) {
  Graph g("einsum_sum");
  g.add_initializer("w", f32({2, 3}, {1, 2, 3, 4, 5, 6}), TensorKind::Weight);
  Op op = make_op("Einsum", 0, {{"equation", std::string("ij->i")}});
  op.inputs = {"w"};
  op.outputs = {"y"};
  g.add_op(op);
  Op sum = make_op("ReduceSum", 0, {{"keepdims", std::int64_t{0}}});
  sum.name = "sum";
  sum.inputs = {"y"};
  sum.outputs = {"loss"};
  g.add_op(sum);
  try {
    append_backward(g, "loss");
    FAIL() << "expected an error";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("equation \"ij->i\" has no gradient for input 0 (a label summed in this input alone)"),
              std::string::npos)
        << e.what();
  }
}

TEST(SelectionOps, GatherNdOneHotAndGlobalMaxPool) {
  const Tensor data = f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  const Tensor idx = int64_tensor({2, 1, 1}, {1, 0});  // batch_dims 1: row 1 of batch 0, row 0 of batch 1
  EXPECT_EQ(run(make_op("GatherND", 2, {{"batch_dims", std::int64_t{1}}}), {&data, &idx})[0].to_f32(),
            (std::vector<float>{2, 3, 4, 5}));
  const Tensor far = int64_tensor({1, 2}, {0, 2});
  EXPECT_NE(error_of(make_op("GatherND", 2), {&data, &far}).find("index 2 is out of range for dimension 1 of size 2"),
            std::string::npos);
  const Tensor labels = int64_tensor({3}, {2, -1, 7});  // -1 is depth - 1; 7 is outside: all off
  const Tensor values = f32({2}, {-1, 9});
  EXPECT_EQ(run(make_op("OneHot", 2, {{"depth", std::int64_t{3}}}), {&labels, &values})[0].to_f32(),
            (std::vector<float>{-1, -1, 9, -1, -1, 9, -1, -1, -1}));
  EXPECT_EQ(run(make_op("OneHot", 2, {{"depth", std::int64_t{3}}, {"axis", std::int64_t{0}}}), {&labels, &values})[0].shape(),
            (Shape{3, 3}));
  const Tensor img = f32({1, 2, 2, 2}, {1, 7, 3, 2, 4, kNan, 0, 9});
  const std::vector<float> gmp = run(make_op("GlobalMaxPool", 1), {&img})[0].to_f32();
  EXPECT_EQ(gmp[0], 7);
  EXPECT_TRUE(std::isnan(gmp[1]));  // NaN propagates
}

}  // namespace
}  // namespace probelab::graph
