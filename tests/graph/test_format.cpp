// Physical shapes and byte-exact layout conversions.
#include <gtest/gtest.h>

#include <random>

#include "graph/format.h"
#include "graph/graph.h"

namespace probelab::graph {
namespace {

// A tensor whose bytes are all distinct-ish non-zero random patterns (every bit pattern, NaNs too).
Tensor random_tensor(DType t, const Shape& s, std::uint64_t seed) {
  Tensor x({t, s, Format::ND});
  std::mt19937_64 rng(seed);
  for (std::byte& b : x.bytes()) b = static_cast<std::byte>(rng() % 255 + 1);
  return x;
}

TEST(Format, PhysicalShapes) {
  EXPECT_EQ(physical_shape({DType::F16, {2, 3, 4, 5}, Format::NCHW}), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(physical_shape({DType::F16, {2, 3, 4, 5}, Format::NHWC}), (Shape{2, 4, 5, 3}));
  EXPECT_EQ(physical_shape({DType::F16, {2, 3, 4, 5}, Format::NC1HWC0}), (Shape{2, 1, 4, 5, 16}));
  EXPECT_EQ(physical_shape({DType::F16, {2, 33, 4, 5}, Format::NC1HWC0}), (Shape{2, 3, 4, 5, 16}));
  EXPECT_EQ(physical_shape({DType::F16, {20, 40}, Format::FRACTAL_NZ}), (Shape{3, 2, 16, 16}));
  EXPECT_EQ(physical_shape({DType::F16, {7, 20, 40}, Format::FRACTAL_NZ}), (Shape{7, 3, 2, 16, 16}));
  EXPECT_EQ(physical_nbytes({DType::F32, {16, 16}, Format::FRACTAL_NZ}), 1024u);
  EXPECT_THROW(physical_shape({DType::F16, {3, 4, 5}, Format::NC1HWC0}), GraphError);
  EXPECT_THROW(physical_shape({DType::F16, {5}, Format::FRACTAL_NZ}), GraphError);
}

TEST(Format, Nc1hwc0ElementPlacementAndPadding) {
  // logical [1, 18, 1, 2]: channel 17 lands in block 1, lane 1; lanes 2..15 of block 1 are zero.
  std::vector<float> v(36);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  Tensor t = Tensor::from_f32({1, 18, 1, 2}, v);
  Tensor p = convert_format(t, Format::NC1HWC0);
  auto d = p.data<float>();
  ASSERT_EQ(d.size(), 1u * 2 * 1 * 2 * 16);
  // physical index ((c1 * H + h) * W + w) * 16 + c0 ; logical value of (c, w) is c * 2 + w + 1
  EXPECT_EQ(d[(0 * 2 + 1) * 16 + 5], 5 * 2 + 1 + 1);
  EXPECT_EQ(d[(1 * 2 + 0) * 16 + 1], 17 * 2 + 0 + 1);
  for (int w = 0; w < 2; ++w)
    for (int c0 = 2; c0 < 16; ++c0) EXPECT_EQ(d[(1 * 2 + w) * 16 + c0], 0.0f);
}

TEST(Format, FractalNzElementPlacementAndPadding) {
  // logical [17, 18]: element (m, n) -> [n / 16, m / 16, m % 16, n % 16] in [2, 2, 16, 16]
  const std::int64_t M = 17, N = 18;
  std::vector<float> v(static_cast<std::size_t>(M * N));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  Tensor p = convert_format(Tensor::from_f32({M, N}, v), Format::FRACTAL_NZ);
  auto d = p.data<float>();
  ASSERT_EQ(d.size(), 4u * 256);
  auto at = [&](std::int64_t n1, std::int64_t m1, std::int64_t m0, std::int64_t n0) {
    return d[static_cast<std::size_t>(((n1 * 2 + m1) * 16 + m0) * 16 + n0)];
  };
  EXPECT_EQ(at(0, 0, 0, 1), 2.0f);                        // (0, 1)
  EXPECT_EQ(at(0, 0, 1, 0), static_cast<float>(N + 1));  // (1, 0)
  EXPECT_EQ(at(1, 1, 0, 1), static_cast<float>(16 * N + 17 + 1));  // (16, 17)
  EXPECT_EQ(at(1, 0, 3, 1), static_cast<float>(3 * N + 17 + 1));  // (3, 17)
  EXPECT_EQ(at(1, 1, 1, 0), 0.0f);  // row 17 is padding
  EXPECT_EQ(at(1, 0, 0, 2), 0.0f);  // column 18 is padding
}

struct Case {
  Shape shape;
  Format format;
};

TEST(Format, ByteExactRoundTripsEveryDtype) {
  const std::vector<Case> cases{{{2, 3, 4, 5}, Format::NHWC},        {{2, 3, 4, 5}, Format::NC1HWC0},
                                {{1, 16, 2, 2}, Format::NC1HWC0},     {{3, 33, 1, 3}, Format::NC1HWC0},
                                {{20, 40}, Format::FRACTAL_NZ},       {{16, 16}, Format::FRACTAL_NZ},
                                {{2, 3, 5, 17}, Format::FRACTAL_NZ},  {{1, 1}, Format::FRACTAL_NZ},
                                {{0, 4}, Format::FRACTAL_NZ},         {{2, 0, 3, 3}, Format::NC1HWC0}};
  std::uint64_t seed = 1;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool, DType::F64})
    for (const Case& c : cases) {
      const Tensor x = random_tensor(t, c.shape, seed++);
      const Tensor p = convert_format(x, c.format);
      EXPECT_EQ(p.nbytes(), physical_nbytes(p.desc()));
      const Tensor back = to_logical(p);
      EXPECT_EQ(back.desc().shape, x.desc().shape);
      EXPECT_TRUE(std::equal(back.bytes().begin(), back.bytes().end(), x.bytes().begin(), x.bytes().end()))
          << dtype_name(t) << " " << shape_str(c.shape) << " " << format_name(c.format);
      // padding is zero: the number of non-zero bytes is unchanged by the conversion
      auto nonzero = [](std::span<const std::byte> b) {
        return std::count_if(b.begin(), b.end(), [](std::byte v) { return v != std::byte{0}; });
      };
      EXPECT_EQ(nonzero(p.bytes()), nonzero(x.bytes()));
    }
}

TEST(Format, PrivateToPrivateGoesThroughLogicalIndices) {
  const Tensor x = random_tensor(DType::F16, {2, 20, 3, 16}, 99);
  const Tensor nz = convert_format(convert_format(x, Format::NC1HWC0), Format::NHWC);
  EXPECT_EQ(to_logical(nz), convert_format(x, Format::NCHW));
  std::vector<std::byte> small(3);
  EXPECT_THROW(convert_layout(x.bytes(), Format::ND, small, Format::NHWC, x.shape(), 2), GraphError);
}

// to_logical of an rvalue: the same tensor as of an lvalue, every format; a plain one keeps its
// storage (moved), a private one is converted (and padding never shows).
TEST(Format, ToLogicalOfRvalueMatchesLvalue) {
  const Tensor x = random_tensor(DType::F16, {2, 20, 3, 5}, 7);
  for (Format f : {Format::NCHW, Format::NHWC, Format::NC1HWC0}) {
    const Tensor stored = convert_format(x, f);
    Tensor moved = stored;
    const std::byte* storage = moved.bytes().data();
    const Tensor logical = to_logical(std::move(moved));
    EXPECT_EQ(logical, to_logical(stored)) << format_name(f);
    EXPECT_EQ(logical.bytes().data() == storage, f == Format::NCHW) << format_name(f);
  }
  const Tensor m = random_tensor(DType::F32, {3, 40}, 8);
  EXPECT_EQ(to_logical(convert_format(m, Format::FRACTAL_NZ)), m);
}

}  // namespace
}  // namespace probelab::graph
