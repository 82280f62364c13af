// FloatBuffer: kernel results that move between tensors and buffers without copying.
#include <gtest/gtest.h>

#include "chip_model/kernels/float_buffer.h"
#include "graph/format.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace probelab::chip::kernels {
namespace {

TEST(FloatBuffer, AdoptsTheStorageOfAnF32TensorAndGivesItBack) {
  graph::Tensor t = graph::Tensor::from_f32({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  const std::byte* storage = t.bytes().data();
  FloatBuffer b = FloatBuffer::adopt(std::move(t));
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(reinterpret_cast<const std::byte*>(b.data()), storage);
  EXPECT_EQ(b[4], 5.0f);
  graph::Tensor back = std::move(b).into_tensor({3, 2});
  EXPECT_EQ(back.bytes().data(), storage);
  EXPECT_EQ(back.shape(), (graph::Shape{3, 2}));
  EXPECT_EQ(back.to_f32(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(b.empty());
}

TEST(FloatBuffer, ConvertsOtherTensorsInLogicalOrder) {
  const graph::Tensor h = graph::Tensor::from_f32({4}, std::vector<float>{0.5f, -1, 65504, 3}, graph::DType::F16);
  const FloatBuffer a = FloatBuffer::copy_of(h);
  EXPECT_EQ(std::vector<float>(a.begin(), a.end()), (std::vector<float>{0.5f, -1, 65504, 3}));
  const graph::Tensor i = graph::Tensor::from_f32({2}, std::vector<float>{7, -9}, graph::DType::I32);
  const FloatBuffer c = FloatBuffer::copy_of(i);
  EXPECT_EQ(std::vector<float>(c.begin(), c.end()), (std::vector<float>{7, -9}));
  // An F32 tensor in NHWC comes out in logical (NCHW) order.
  const graph::Tensor nchw = graph::Tensor::from_f32({1, 2, 1, 2}, std::vector<float>{1, 2, 3, 4});
  const FloatBuffer n = FloatBuffer::adopt(graph::convert_format(nchw, graph::Format::NHWC));
  EXPECT_EQ(std::vector<float>(n.begin(), n.end()), (std::vector<float>{1, 2, 3, 4}));
}

TEST(FloatBuffer, CopiesAreDeepAndFillsAreKept) {
  FloatBuffer a(3, 2.5f);
  FloatBuffer b = a;
  b[0] = -1;
  EXPECT_EQ(a[0], 2.5f);
  EXPECT_NE(a.data(), b.data());
  a = b;
  EXPECT_EQ(a[0], -1.0f);
  const std::vector<float> src{1, 2};
  const FloatBuffer c(src.begin(), src.end());
  EXPECT_EQ(std::span<const float>(c).size(), 2u);
  EXPECT_EQ(c[1], 2.0f);
}

TEST(FloatBuffer, IntoTensorChecksTheElementCount) {
  FloatBuffer a(4);
  EXPECT_THROW((void)std::move(a).into_tensor({5}), graph::GraphError);
}

}  // namespace
}  // namespace probelab::chip::kernels
