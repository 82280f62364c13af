// A Conv / ConvTranspose bias of another dtype than its input is bad input (ONNX gives X, W and B
// one type T), named with the op and both dtypes, not a silent conversion.
#include <gtest/gtest.h>

#include "graph/tensor.h"
#include "tests/graph/op_test_util.h"

namespace pg = probelab::graph;
using pg::testing::error_of;
using pg::testing::make_op;

namespace {

TEST(ConvBiasDtype, ABiasOfAnotherDtypeIsNamed) {
  const pg::Tensor x = pg::Tensor::from_f32({1, 2, 4, 4}, std::vector<float>(32, 1.0f), pg::DType::F32);
  const pg::Tensor w = pg::Tensor::from_f32({3, 2, 3, 3}, std::vector<float>(54, 0.5f), pg::DType::F32);
  const pg::Tensor wt = pg::Tensor::from_f32({2, 3, 3, 3}, std::vector<float>(54, 0.5f), pg::DType::F32);
  const pg::Tensor b_int = pg::Tensor::from_f32({3}, std::vector<float>(3, 1.0f), pg::DType::I32);
  const pg::Tensor b_ok = pg::Tensor::from_f32({3}, std::vector<float>(3, 1.0f), pg::DType::F32);
  EXPECT_EQ(error_of(make_op("Conv", 3), {&x, &w, &b_int}),
            "Conv 't': inputs X and B must have the same dtype, got float32 and int32");
  EXPECT_NE(error_of(make_op("ConvTranspose", 3), {&x, &wt, &b_int}).find("inputs X and B must have the same dtype"),
            std::string::npos);
  // The same bias in the input's dtype runs.
  EXPECT_EQ(error_of(make_op("Conv", 3), {&x, &w, &b_ok}), "no error");
  EXPECT_EQ(error_of(make_op("ConvTranspose", 3), {&x, &wt, &b_ok}), "no error");
}

}  // namespace
