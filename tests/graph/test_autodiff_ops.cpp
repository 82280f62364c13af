// Every differentiable op's gradient against central finite differences in FP64: the op under
// test feeds loss = sum(Y * R) with a fixed random R, all float inputs are weights.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <set>

#include "tests/graph/grad_check.h"

namespace probelab::graph {
namespace {

using testing::int64_tensor;
using testing::random_f64;

struct In {
  Shape shape;
  enum Kind { Diff, Const, Labels, Omitted, Mask } kind = Diff;  // Mask: bool from labels != 0
  double lo = -1, hi = 1, min_abs = 0;
  std::vector<std::int64_t> labels{};
};

struct GradCase {
  std::string name;
  std::string type;
  Attrs attrs;
  std::vector<In> inputs;
  int outputs = 1;
};

std::ostream& operator<<(std::ostream& os, const GradCase& c) { return os << c.name; }

// loss = sum(y * R) with a fixed random R of y's shape; validates the graph.
void add_weighted_loss(Graph& g, const std::string& y, std::mt19937_64& rng) {
  g.add_initializer("r", random_f64(g.tensor(y).desc.shape, rng), TensorKind::Constant);
  Op mul;
  mul.name = "weigh";
  mul.type = "Mul";
  mul.inputs = {y, "r"};
  mul.outputs = {"weighted"};
  g.add_op(mul);
  Op sum;
  sum.name = "sum";
  sum.type = "ReduceSum";
  sum.inputs = {"weighted"};
  sum.outputs = {"loss"};
  sum.attrs = {{"keepdims", std::int64_t{0}}};
  g.add_op(sum);
  g.validate();
}

Graph build_case(const GradCase& c) {
  std::mt19937_64 rng(0x5eed0001);
  Graph g(c.name);
  Op op;
  op.name = "op";
  op.type = c.type;
  op.attrs = c.attrs;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const In& in = c.inputs[i];
    const std::string name = fmt::format("x{}", i);
    if (in.kind == In::Omitted) {
      op.inputs.push_back("");
      continue;
    }
    if (in.kind == In::Labels) g.add_initializer(name, int64_tensor(in.shape, in.labels), TensorKind::Constant);
    else if (in.kind == In::Mask) {
      std::vector<std::byte> b;
      for (std::int64_t v : in.labels) b.push_back(std::byte{v != 0});
      g.add_initializer(name, Tensor(TensorDesc{DType::Bool, in.shape, Format::ND}, std::move(b)), TensorKind::Constant);
    } else
      g.add_initializer(name, random_f64(in.shape, rng, in.lo, in.hi, in.min_abs),
                        in.kind == In::Const ? TensorKind::Constant : TensorKind::Weight);
    op.inputs.push_back(name);
  }
  for (int k = 0; k < c.outputs; ++k) op.outputs.push_back(fmt::format("y{}", k));
  g.add_op(op);
  add_weighted_loss(g, "y0", rng);
  return g;
}

class OpGradient : public ::testing::TestWithParam<GradCase> {};

TEST_P(OpGradient, MatchesCentralDifferences) {
  const GradCase& c = GetParam();
  const Graph g = build_case(c);
  std::size_t weights = 0;
  for (const In& in : c.inputs) weights += in.kind == In::Diff;
  EXPECT_EQ(testing::expect_gradients_match(g, "loss"), weights);
}

using I = std::vector<std::int64_t>;
const In kLabels3{{3}, In::Labels, 0, 0, 0, {2, 0, 1}};

const GradCase kCases[] = {
    {"Add_broadcast", "Add", {}, {{{2, 3}}, {{3}}}},
    {"Sub_broadcast", "Sub", {}, {{{2, 1, 3}}, {{4, 1}}}},
    {"Mul_broadcast", "Mul", {}, {{{2, 3}}, {{2, 1}}}},
    {"Div_broadcast", "Div", {}, {{{3, 2}}, {{2}, In::Diff, 0.5, 2.0}}},
    {"Identity", "Identity", {}, {{{2, 3}}}},
    {"Scale", "Scale", {{"alpha", -2.5}}, {{{4}}}},
    {"Expand", "Expand", {{"shape", I{2, 3, 4}}}, {{{3, 1}}}},
    {"SumToShape", "SumToShape", {{"shape", I{3, 1}}}, {{{2, 3, 4}}}},
    {"MatMul_2d", "MatMul", {}, {{{3, 4}}, {{4, 2}}}},
    {"MatMul_batch_broadcast", "MatMul", {}, {{{2, 1, 3, 4}}, {{3, 4, 2}}}},
    {"MatMul_vector_matrix", "MatMul", {}, {{{4}}, {{2, 4, 3}}}},
    {"MatMul_matrix_vector", "MatMul", {}, {{{2, 3, 4}}, {{4}}}},
    {"Gemm_plain_bias_row", "Gemm", {}, {{{3, 4}}, {{4, 2}}, {{2}}}},
    {"Gemm_transA", "Gemm", {{"transA", std::int64_t{1}}, {"alpha", 0.5}}, {{{4, 3}}, {{4, 2}}, {{3, 2}}}},
    {"Gemm_transB_beta", "Gemm", {{"transB", std::int64_t{1}}, {"beta", 2.0}}, {{{3, 4}}, {{2, 4}}, {{3, 1}}}},
    {"Gemm_transAB_scalar_bias", "Gemm", {{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}},
     {{{4, 3}}, {{2, 4}}, {{}}}},
    {"Conv_stride_pad_bias", "Conv", {{"strides", I{2, 2}}, {"pads", I{1, 0, 1, 1}}},
     {{{2, 3, 5, 5}}, {{4, 3, 3, 2}}, {{4}}}},
    {"Conv_group_dilation", "Conv", {{"group", std::int64_t{2}}, {"dilations", I{2, 1}}, {"pads", I{1, 1, 1, 1}}},
     {{{1, 4, 6, 5}}, {{2, 2, 2, 3}}}},
    {"Conv_same_upper", "Conv", {{"auto_pad", std::string("SAME_UPPER")}, {"strides", I{2, 1}}},
     {{{1, 2, 5, 4}}, {{3, 2, 2, 2}}}},
    {"Conv_1d_stride_dilation", "Conv", {{"strides", I{2}}, {"dilations", I{2}}, {"pads", I{2, 1}}},
     {{{2, 2, 9}}, {{3, 2, 3}}, {{3}}}},
    {"Conv_3d_group", "Conv", {{"group", std::int64_t{2}}, {"pads", I{1, 0, 0, 0, 1, 0}}},
     {{{1, 2, 3, 3, 4}}, {{2, 1, 2, 2, 2}}}},
    {"Relu", "Relu", {}, {{{3, 4}, In::Diff, -1, 1, 0.05}}},
    {"Gelu_erf", "Gelu", {}, {{{3, 4}, In::Diff, -3, 3}}},
    {"Gelu_tanh", "Gelu", {{"approximate", std::string("tanh")}}, {{{3, 4}, In::Diff, -3, 3}}},
    {"Sigmoid", "Sigmoid", {}, {{{3, 4}, In::Diff, -4, 4}}},
    {"Tanh", "Tanh", {}, {{{3, 4}, In::Diff, -2, 2}}},
    {"Softmax_axis1", "Softmax", {{"axis", std::int64_t{1}}}, {{{2, 3, 4}, In::Diff, -2, 2}}},
    {"LogSoftmax_last", "LogSoftmax", {}, {{{2, 5}, In::Diff, -2, 2}}},
    {"LayerNorm_last_axis", "LayerNormalization", {}, {{{3, 5}}, {{5}}, {{5}}}},
    {"LayerNorm_axis1_broadcast_scale", "LayerNormalization", {{"axis", std::int64_t{1}}, {"epsilon", 1e-3}},
     {{{2, 3, 4}}, {{3, 1}}, {{4}}}},
    {"LayerNorm_no_bias", "LayerNormalization", {}, {{{4, 3}}, {{3}}}},
    {"GridSample_bilinear_zeros", "GridSample", {}, {{{2, 3, 4, 5}}, {{2, 3, 2, 2}, In::Diff, -1.2, 1.2}}},
    {"GridSample_bilinear_border_align", "GridSample",
     {{"padding_mode", std::string("border")}, {"align_corners", std::int64_t{1}}},
     {{{1, 2, 3, 4}}, {{1, 4, 3, 2}, In::Diff, -1.3, 1.3}}},
    {"GridSample_bilinear_reflection", "GridSample", {{"padding_mode", std::string("reflection")}},
     {{{1, 2, 4, 3}}, {{1, 3, 3, 2}, In::Diff, -2.5, 2.5}}},
    {"GridSample_bicubic_reflection", "GridSample",
     {{"mode", std::string("bicubic")}, {"padding_mode", std::string("reflection")}, {"align_corners", std::int64_t{1}}},
     {{{1, 2, 5, 4}}, {{1, 2, 3, 2}, In::Diff, -1.4, 1.4}}},
    {"GridSample_bicubic_zeros", "GridSample", {{"mode", std::string("bicubic")}},
     {{{2, 1, 4, 4}}, {{2, 2, 2, 2}, In::Diff, -1.1, 1.1}}},
    {"GridSample_nearest_border", "GridSample", {{"mode", std::string("nearest")}, {"padding_mode", std::string("border")}},
     {{{1, 2, 3, 3}}, {{1, 2, 2, 2}, In::Diff, -1.5, 1.5}}},
    // Repeated indices: with reduction none only the last write reaches the output (and its gradient).
    {"ScatterElements_none_repeated", "ScatterElements", {},
     {{{3, 4}}, {{2, 4}, In::Labels, 0, 0, 0, {0, 2, 1, 0, 0, 1, 1, 2}}, {{2, 4}}}},
    {"Scatter_alias_none", "Scatter", {}, {{{3, 2}}, {{1, 2}, In::Labels, 0, 0, 0, {2, 0}}, {{1, 2}}}},
    {"ScatterElements_add_axis1", "ScatterElements",
     {{"axis", std::int64_t{1}}, {"reduction", std::string("add")}},
     {{{2, 5}}, {{2, 3}, In::Labels, 0, 0, 0, {-1, 0, 4, 2, 2, 0}}, {{2, 3}}}},
    {"ScatterND_none_rows", "ScatterND", {}, {{{4, 3}}, {{2, 1}, In::Labels, 0, 0, 0, {3, -3}}, {{2, 3}}}},
    {"ScatterND_add_repeated", "ScatterND", {{"reduction", std::string("add")}},
     {{{2, 3, 2}}, {{3, 2}, In::Labels, 0, 0, 0, {0, 1, 1, 2, 0, 1}}, {{3, 2}}}},
    {"ScatterND_none_repeated", "ScatterND", {}, {{{2, 3, 2}}, {{3, 2}, In::Labels, 0, 0, 0, {0, 1, 1, 2, 0, 1}}, {{3, 2}}}},
    {"InstanceNorm_2d", "InstanceNormalization", {}, {{{2, 3, 2, 3}}, {{3}}, {{3}}}},
    {"InstanceNorm_1d_epsilon", "InstanceNormalization", {{"epsilon", 1e-2}}, {{{3, 2, 5}}, {{2}}, {{2}}}},
    {"BatchNorm_inference", "BatchNormalization", {},
     {{{2, 3, 2, 2}}, {{3}}, {{3}}, {{3}, In::Const}, {{3}, In::Const, 0.5, 1.5}}},
    {"BatchNorm_training", "BatchNormalization", {{"training_mode", std::int64_t{1}}},
     {{{3, 2, 2, 2}}, {{2}}, {{2}}, {{2}, In::Const}, {{2}, In::Const, 0.5, 1.5}}},
    {"MaxPool_pads", "MaxPool", {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 0, 0}}},
     {{{1, 2, 5, 5}}}},
    {"MaxPool_overlap_1d", "MaxPool", {{"kernel_shape", I{3}}, {"strides", I{1}}}, {{{2, 2, 7}}}},
    {"AveragePool_excl_pad", "AveragePool", {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}},
     {{{1, 2, 5, 5}}}},
    {"AveragePool_incl_pad_ceil", "AveragePool",
     {{"kernel_shape", I{2, 2}}, {"pads", I{1, 1, 1, 1}}, {"count_include_pad", std::int64_t{1}},
      {"ceil_mode", std::int64_t{1}}, {"strides", I{2, 2}}},
     {{{1, 1, 4, 5}}}},
    {"GlobalAveragePool", "GlobalAveragePool", {}, {{{2, 3, 3, 2}}}},
    {"GlobalMaxPool", "GlobalMaxPool", {}, {{{2, 3, 3, 2}}}},
    {"LRN_size3", "LRN", {{"size", std::int64_t{3}}, {"alpha", 0.5}, {"beta", 0.75}, {"bias", 1.5}}, {{{2, 5, 2, 2}}}},
    {"LRN_size4_1d", "LRN", {{"size", std::int64_t{4}}, {"alpha", 1.0}}, {{{1, 6, 3}}}},
    {"LpNormalization_p2_axis1", "LpNormalization", {{"axis", std::int64_t{1}}}, {{{2, 3, 2}}}},
    {"LpNormalization_p1_last", "LpNormalization", {{"p", std::int64_t{1}}}, {{{2, 4}, In::Diff, -1, 1, 0.1}}},
    {"GlobalLpPool_p2", "GlobalLpPool", {}, {{{2, 3, 2, 2}}}},
    {"GlobalLpPool_p3_1d", "GlobalLpPool", {{"p", std::int64_t{3}}}, {{{1, 2, 5}, In::Diff, -1, 1, 0.1}}},
    {"MeanVarianceNormalization_default_axes", "MeanVarianceNormalization", {}, {{{2, 3, 2, 2}}}},
    {"MeanVarianceNormalization_last_axis", "MeanVarianceNormalization", {{"axes", I{-1}}}, {{{3, 4}}}},
    {"TopK_largest_axis0", "TopK", {{"k", std::int64_t{2}}, {"axis", std::int64_t{0}}}, {{{4, 3}}}, 2},
    {"TopK_smallest", "TopK", {{"k", std::int64_t{3}}, {"largest", std::int64_t{0}}}, {{{2, 5}}}, 2},
    {"Einsum_batch_matmul", "Einsum", {{"equation", std::string("bij,bjk->bik")}}, {{{2, 3, 4}}, {{2, 4, 2}}}},
    {"Einsum_three_operands", "Einsum", {{"equation", std::string("ij,jk,k->ki")}}, {{{2, 3}}, {{3, 4}}, {{4}}}},
    {"GatherND_repeated_rows", "GatherND", {}, {{{3, 2}}, {{3, 1}, In::Labels, 0, 0, 0, {2, 0, 2}}}},
    {"GatherND_batch_dims", "GatherND", {{"batch_dims", std::int64_t{1}}},
     {{{2, 3, 4}}, {{2, 2, 1}, In::Labels, 0, 0, 0, {2, -3, 1, 1}}}},
    {"Reshape", "Reshape", {{"shape", I{0, -1}}}, {{{2, 3, 2}}}},
    {"Flatten", "Flatten", {{"axis", std::int64_t{2}}}, {{{2, 3, 2, 2}}}},
    {"Transpose", "Transpose", {{"perm", I{2, 0, 1}}}, {{{2, 3, 4}}}},
    {"Concat", "Concat", {{"axis", std::int64_t{1}}}, {{{2, 1, 3}}, {{2, 2, 3}}, {{2, 3, 3}}}},
    {"Slice_negative_step", "Slice",
     {{"starts", I{-1, 1}}, {"ends", I{-100, 5}}, {"axes", I{0, 2}}, {"steps", I{-2, 2}}}, {{{5, 2, 6}}}},
    {"ReduceSum_drop_axis", "ReduceSum", {{"axes", I{1}}, {"keepdims", std::int64_t{0}}}, {{{2, 3, 4}}}},
    {"ReduceMean_keep", "ReduceMean", {{"axes", I{0, -1}}}, {{{2, 3, 4}}}},
    {"ReduceMean_all", "ReduceMean", {{"keepdims", std::int64_t{0}}}, {{{2, 3}}}},
    {"CrossEntropy_mean", "SoftmaxCrossEntropyLoss", {}, {{{3, 4}, In::Diff, -2, 2}, kLabels3}},
    {"CrossEntropy_weights_ignore", "SoftmaxCrossEntropyLoss", {{"ignore_index", std::int64_t{1}}},
     {{{3, 4}, In::Diff, -2, 2}, kLabels3, {{4}, In::Const, 0.5, 2.0}}},
    {"CrossEntropy_sum_3d", "SoftmaxCrossEntropyLoss", {{"reduction", std::string("sum")}},
     {{{2, 3, 2}, In::Diff, -2, 2}, {{2, 2}, In::Labels, 0, 0, 0, {0, 2, 1, 1}}}},
    {"CrossEntropy_none", "SoftmaxCrossEntropyLoss", {{"reduction", std::string("none")}},
     {{{3, 4}, In::Diff, -2, 2}, kLabels3}},
    {"MSELoss_mean", "MSELoss", {}, {{{3, 2}}, {{3, 2}}}},
    {"MSELoss_none", "MSELoss", {{"reduction", std::string("none")}}, {{{4}}, {{4}}}},
    {"Embedding_repeated_rows", "Embedding", {}, {{{5, 3}}, {{4}, In::Labels, 0, 0, 0, {1, 4, 1, -5}}}},
    {"Gather_axis1", "Gather", {{"axis", std::int64_t{1}}}, {{{2, 4, 3}}, {{2, 2}, In::Labels, 0, 0, 0, {3, 0, 0, 2}}}},
    // Pointwise ops (graph/ops/pointwise.h): inputs kept away from kinks and domain edges.
    {"Abs", "Abs", {}, {{{2, 3}, In::Diff, -1, 1, 0.1}}},
    {"Acos", "Acos", {}, {{{5}, In::Diff, -0.8, 0.8}}},
    {"Acosh", "Acosh", {}, {{{5}, In::Diff, 1.2, 3}}},
    {"Asin", "Asin", {}, {{{5}, In::Diff, -0.8, 0.8}}},
    {"Asinh", "Asinh", {}, {{{5}, In::Diff, -2, 2}}},
    {"Atan", "Atan", {}, {{{5}, In::Diff, -2, 2}}},
    {"Atanh", "Atanh", {}, {{{5}, In::Diff, -0.8, 0.8}}},
    {"Cos", "Cos", {}, {{{5}, In::Diff, -3, 3}}},
    {"Cosh", "Cosh", {}, {{{5}}}},
    {"Sin", "Sin", {}, {{{5}, In::Diff, -3, 3}}},
    {"Sinh", "Sinh", {}, {{{5}}}},
    {"Tan", "Tan", {}, {{{5}}}},
    {"Erf", "Erf", {}, {{{2, 3}, In::Diff, -2, 2}}},
    {"Exp", "Exp", {}, {{{2, 3}}}},
    {"Log", "Log", {}, {{{2, 3}, In::Diff, 0.5, 2}}},
    {"Sqrt", "Sqrt", {}, {{{2, 3}, In::Diff, 0.5, 2}}},
    {"Reciprocal", "Reciprocal", {}, {{{2, 3}, In::Diff, 0.5, 2, 0}}},
    {"Neg", "Neg", {}, {{{4}}}},
    {"Pow_broadcast", "Pow", {}, {{{2, 3}, In::Diff, 0.5, 2}, {{3}, In::Diff, -1.5, 2.5}}},
    {"Celu", "Celu", {{"alpha", 0.7}}, {{{6}, In::Diff, -2, 2, 0.05}}},
    {"Elu", "Elu", {{"alpha", 0.5}}, {{{6}, In::Diff, -2, 2, 0.05}}},
    {"Selu", "Selu", {}, {{{6}, In::Diff, -2, 2, 0.05}}},
    {"LeakyRelu", "LeakyRelu", {{"alpha", 0.1}}, {{{6}, In::Diff, -1, 1, 0.05}}},
    {"ThresholdedRelu", "ThresholdedRelu", {{"alpha", 0.3}}, {{{2, 4}, In::Diff, -1, 1}}},
    {"HardSigmoid", "HardSigmoid", {}, {{{2, 5}, In::Diff, -4, 4}}},
    {"HardSwish", "HardSwish", {}, {{{2, 5}, In::Diff, -4, 4}}},
    {"Softplus", "Softplus", {}, {{{5}, In::Diff, -3, 3}}},
    {"Mish", "Mish", {}, {{{7}, In::Diff, -4, 4}}},
    {"Softsign", "Softsign", {}, {{{5}, In::Diff, -3, 3}}},
    {"Shrink", "Shrink", {{"lambd", 0.5}, {"bias", 0.2}}, {{{2, 4}}}},
    {"Clip_attrs", "Clip", {{"min", -0.5}, {"max", 0.5}}, {{{2, 4}}}},
    {"Clip_inputs", "Clip", {}, {{{2, 4}, In::Diff, -8, 8}, {{}, In::Const, 0, 0.001}, {{}, In::Const, 6, 6.001}}},
    {"PRelu_channel_slope", "PRelu", {}, {{{2, 3, 2}, In::Diff, -1, 1, 0.05}, {{3, 1}}}},
    {"Max_three", "Max", {}, {{{2, 3}}, {{3}}, {{2, 1}}}},
    {"Min_two", "Min", {}, {{{2, 3}}, {{2, 3}}}},
    {"Sum_three", "Sum", {}, {{{2, 3}}, {{3}}, {{2, 1}}}},
    {"Mean_two", "Mean", {}, {{{2, 3}}, {{1, 3}}}},
    {"Where_broadcast", "Where", {}, {{{2, 3}, In::Mask, 0, 0, 0, {1, 0, 0, 1, 1, 0}}, {{2, 3}}, {{3}}}},
    {"Cast_to_f64", "Cast", {{"to", std::int64_t{11}}}, {{{2, 3}}}},
    {"Dropout_inference", "Dropout", {}, {{{2, 3}}}},
    {"Dropout_training", "Dropout", {{"training_mode", std::int64_t{1}}, {"ratio", 0.4}, {"seed", std::int64_t{3}}}, {{{2, 5}}}},
    // Reductions.
    {"ReduceL1", "ReduceL1", {{"axes", I{1}}}, {{{2, 3, 2}, In::Diff, -1, 1, 0.1}}},
    {"ReduceL2", "ReduceL2", {{"axes", I{0, 2}}}, {{{2, 3, 2}}}},
    {"ReduceLogSum", "ReduceLogSum", {{"axes", I{-1}}}, {{{2, 3}, In::Diff, 0.5, 2}}},
    {"ReduceLogSumExp", "ReduceLogSumExp", {{"keepdims", std::int64_t{0}}}, {{{2, 3}}}},
    {"ReduceMax", "ReduceMax", {{"axes", I{1}}}, {{{2, 4}}}},
    {"ReduceMin", "ReduceMin", {{"axes", I{0}}, {"keepdims", std::int64_t{0}}}, {{{3, 2}}}},
    {"ReduceProd", "ReduceProd", {{"axes", I{1}}}, {{{2, 3}, In::Diff, 0.5, 1.5}}},
    {"ReduceSumSquare", "ReduceSumSquare", {{"axes", I{1}}}, {{{2, 3}}}},
    {"CumSum", "CumSum", {{"axis", std::int64_t{1}}}, {{{2, 4}}}},
    {"CumSum_exclusive_reverse", "CumSum", {{"axis", std::int64_t{0}}, {"exclusive", std::int64_t{1}}, {"reverse", std::int64_t{1}}},
     {{{3, 2}}}},
    // Shape edits.
    {"Squeeze", "Squeeze", {{"axes", I{1}}}, {{{2, 1, 3}}}},
    {"Unsqueeze", "Unsqueeze", {{"axes", I{0, 2}}}, {{{2, 3}}}},
    {"Split_uneven", "Split", {{"axis", std::int64_t{1}}, {"split", I{1, 3}}}, {{{2, 4}}}, 2},
    {"Tile", "Tile", {{"repeats", I{2, 1, 3}}}, {{{1, 2, 2}}}},
    {"Trilu_lower_k1", "Trilu", {{"upper", std::int64_t{0}}, {"k", std::int64_t{1}}}, {{{2, 3, 4}}}},
    {"Trilu_upper", "Trilu", {}, {{{4, 3}}}},
    {"Pad_constant", "Pad", {{"pads", I{1, 0, 0, 2}}, {"value", 0.5}}, {{{2, 3}}}},
    {"Pad_axes", "Pad", {{"pads", I{0, 2}}, {"axes", I{1}}}, {{{2, 4}}}},
    // PadGrad: elements copied more than once (reflect over 2 pads, edge), crops, several axes
    {"Pad_reflect", "Pad", {{"pads", I{2, 1, 1, 2}}, {"mode", std::string("reflect")}}, {{{3, 4}}}},
    {"Pad_edge", "Pad", {{"pads", I{0, 3, 2, 0, 1, 1}}, {"mode", std::string("edge")}}, {{{2, 2, 3}}}},
    {"Pad_crop", "Pad", {{"pads", I{-1, 2, 0, -2}}}, {{{3, 4}}}},
    {"Pad_reflect_crop", "Pad", {{"pads", I{1, -1}}, {"axes", I{-1}}, {"mode", std::string("reflect")}}, {{{2, 4}}}},
    {"Resize_linear", "Resize", {{"mode", std::string("linear")}, {"scales", std::vector<double>{1, 1, 2, 1.5}}},
     {{{1, 2, 2, 3}}}},
    {"Resize_nearest", "Resize", {{"scales", std::vector<double>{1, 1, 2, 2}}}, {{{1, 1, 2, 3}}}},
    {"GatherElements", "GatherElements", {{"axis", std::int64_t{1}}},
     {{{2, 3}}, {{2, 2}, In::Labels, 0, 0, 0, {2, 0, 1, 1}}}},
    {"ConvTranspose_stride_group_bias", "ConvTranspose", {{"strides", I{2, 2}}, {"group", std::int64_t{2}}, {"pads", I{1, 0, 0, 1}}},
     {{{1, 4, 3, 2}}, {{4, 1, 3, 2}}, {{2}}}},
    {"ConvTranspose_1d_output_padding", "ConvTranspose", {{"strides", I{2}}, {"output_padding", I{1}}},
     {{{2, 2, 3}}, {{2, 3, 2}}}},
    {"NLLLoss_mean", "NegativeLogLikelihoodLoss", {}, {{{3, 4}}, kLabels3}},
    {"NLLLoss_weighted_ignore", "NegativeLogLikelihoodLoss", {{"ignore_index", std::int64_t{0}}},
     {{{3, 4}}, kLabels3, {{4}, In::Const, 0.5, 2.0}}},
};

INSTANTIATE_TEST_SUITE_P(Ops, OpGradient, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<GradCase>& i) { return i.param.name; });

// The cases above cover every op type of the registry that has a gradient definition.
TEST(OpGradientCoverage, EveryDifferentiableOpHasACase) {
  std::set<std::string> covered;
  for (const GradCase& c : kCases) covered.insert(OpRegistry::instance().get(c.type).type);
  for (const auto& [type, def] : OpRegistry::instance().all())
    if (def.gradient && def.reference) {  // collectives (no single-rank reference): test_autodiff_collectives
      EXPECT_TRUE(covered.count(type)) << type << " has a gradient but no finite-difference case";
    }
}

// Extremes over copies of one value (a broadcast weight, the same tensor twice): the function is
// the value itself, differentiable, and its gradient must not count the copies (equal extremes
// share the gradient). Each case: w -> [copies] -> extreme -> sum(Y * R).
TEST(OpGradientTies, ExtremesOverCopiesHaveTheDerivativeOfTheValue) {
  struct Tie {
    std::string name, type;
    Attrs attrs;
    bool same_twice;  // Max/Min(w, w) instead of extreme(Expand(w))
    Shape expand;
  };
  const Tie ties[] = {
      {"ReduceMax", "ReduceMax", {{"axes", I{0}}}, false, {4, 3}},
      {"ReduceMin", "ReduceMin", {{"axes", I{0}}, {"keepdims", std::int64_t{0}}}, false, {4, 3}},
      {"GlobalMaxPool", "GlobalMaxPool", {}, false, {1, 3, 2, 2}},
      {"Max", "Max", {}, true, {}},
      {"Min", "Min", {}, true, {}},
  };
  for (const Tie& t : ties) {
    SCOPED_TRACE(t.name);
    Graph g("tie_" + t.name);
    std::mt19937_64 rng(6);
    g.add_initializer("w", random_f64(t.same_twice ? Shape{2, 3} : t.type == "GlobalMaxPool" ? Shape{1, 3, 1, 1} : Shape{1, 3}, rng),
                      TensorKind::Weight);
    std::string src = "w";
    if (!t.same_twice) {
      Op ex;
      ex.name = "copies";
      ex.type = "Expand";
      ex.inputs = {"w"};
      ex.outputs = {"c"};
      ex.attrs = {{"shape", I(t.expand.begin(), t.expand.end())}};
      g.add_op(ex);
      src = "c";
    }
    Op op;
    op.name = "extreme";
    op.type = t.type;
    op.attrs = t.attrs;
    op.inputs = t.same_twice ? std::vector<std::string>{"w", "w"} : std::vector<std::string>{src};
    op.outputs = {"y"};
    g.add_op(op);
    add_weighted_loss(g, "y", rng);
    EXPECT_EQ(testing::expect_gradients_match(g, "loss"), 1u);
  }
}

TEST(OpGradientErrors, NoGradientDefinitionOnPathIsAnError) {
  Graph g("sgd_in_path");
  std::mt19937_64 rng(3);
  g.add_initializer("p", random_f64({3}, rng), TensorKind::Weight);
  g.add_initializer("gr", random_f64({3}, rng), TensorKind::Constant);
  Op upd;
  upd.name = "upd";
  upd.type = "SgdUpdate";
  upd.inputs = {"p", "gr"};
  upd.outputs = {"q"};
  g.add_op(upd);
  Op sum;
  sum.name = "sum";
  sum.type = "ReduceSum";
  sum.inputs = {"q"};
  sum.outputs = {"loss"};
  sum.attrs = {{"keepdims", std::int64_t{0}}};
  g.add_op(sum);
  // SgdUpdate has no gradient, so the loss does not depend on anything that needs one.
  EXPECT_THROW(append_backward(g, "loss"), GraphError);
}

TEST(OpGradientErrors, LossMustBeAScalar) {
  Graph g("vector_loss");
  std::mt19937_64 rng(4);
  g.add_initializer("w", random_f64({3}, rng), TensorKind::Weight);
  Op relu;
  relu.name = "relu";
  relu.type = "Relu";
  relu.inputs = {"w"};
  relu.outputs = {"y"};
  g.add_op(relu);
  try {
    append_backward(g, "y");
    FAIL() << "expected an error";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("scalar"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace probelab::graph
