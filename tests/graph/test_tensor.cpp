// dtypes, tensors, FP16/BF16 conversions and typed attribute access.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "graph/format.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace probelab::graph {
namespace {

TEST(DType, NamesSizesParsing) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool, DType::F64})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_EQ(parse_dtype("fp16"), DType::F16);
  EXPECT_EQ(parse_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_dtype("f64"), DType::F64);
  EXPECT_FALSE(parse_dtype("float8"));
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  EXPECT_TRUE(is_float(DType::BF16));
  EXPECT_FALSE(is_float(DType::I32));
  EXPECT_EQ(parse_format("NC1HWC0"), Format::NC1HWC0);
  EXPECT_FALSE(parse_format("nchw"));
  EXPECT_EQ(numel({}), 1);
  EXPECT_EQ(numel({2, 0, 3}), 0);
  EXPECT_EQ(desc_str({DType::F16, {1, 3, 8, 8}, Format::NCHW}), "float16[1, 3, 8, 8] NCHW");
}

TEST(Tensor, ZeroFilledAndSizeChecked) {
  Tensor t({DType::F16, {2, 3}, Format::ND});
  EXPECT_EQ(t.nbytes(), 12u);
  EXPECT_EQ(t.numel(), 6);
  for (auto v : t.data<std::uint16_t>()) EXPECT_EQ(v, 0);
  EXPECT_THROW(Tensor({DType::F32, {2}, Format::ND}, std::vector<std::byte>(7)), GraphError);
  EXPECT_THROW(t.data<float>(), GraphError);
  // private formats store the padded physical shape
  Tensor p({DType::F16, {1, 3, 2, 2}, Format::NC1HWC0});
  EXPECT_EQ(p.nbytes(), 1u * 1 * 2 * 2 * 16 * 2);
  EXPECT_EQ(p.numel(), 12);
}

// Tensor(desc) zero-fills even memory a previous tensor left dirty; for_overwrite has the same
// size and layout; the bytes constructor copies.
TEST(Tensor, ZeroFillSurvivesReusedStorageAndForOverwriteSizes) {
  for (const TensorDesc& d : {TensorDesc{DType::F32, {64, 1024}, Format::ND}, TensorDesc{DType::F16, {3, 5}, Format::ND},
                             TensorDesc{DType::F16, {1, 3, 2, 2}, Format::NC1HWC0}}) {
    {
      Tensor dirty = Tensor::for_overwrite(d);
      EXPECT_EQ(dirty.desc(), d);
      EXPECT_EQ(dirty.nbytes(), physical_nbytes(d));
      std::fill(dirty.bytes().begin(), dirty.bytes().end(), std::byte{0xA5});
    }
    const Tensor clean(d);
    EXPECT_EQ(std::count(clean.bytes().begin(), clean.bytes().end(), std::byte{0}),
              static_cast<std::ptrdiff_t>(physical_nbytes(d)))
        << desc_str(d);
  }
  std::vector<std::byte> src(8);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::byte(i + 1);
  const Tensor t({DType::F32, {2}, Format::ND}, src);
  src[0] = std::byte{0};
  EXPECT_EQ(t.bytes()[0], std::byte{1});
  EXPECT_EQ(t.bytes()[7], std::byte{8});
}

TEST(Tensor, Fp16RoundTripAndRounding) {
  // every finite FP16 value survives FP16 -> FP32 -> FP16
  std::vector<float> all;
  for (std::uint32_t b = 0; b < 0x10000; ++b)
    if ((b & 0x7C00) != 0x7C00) {
      Tensor one({DType::F16, {1}, Format::ND});
      one.data<std::uint16_t>()[0] = static_cast<std::uint16_t>(b);
      all.push_back(one.to_f32()[0]);
    }
  Tensor t = Tensor::from_f32({static_cast<std::int64_t>(all.size())}, all, DType::F16);
  std::size_t k = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7C00) != 0x7C00) {
      EXPECT_EQ(t.data<std::uint16_t>()[k++], b);
    }
  }
  // ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> 1.0 (even)
  const std::vector<float> ties{1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11), 65520.0f, 1e-8f};
  Tensor r = Tensor::from_f32({4}, ties, DType::F16);
  EXPECT_EQ(r.data<std::uint16_t>()[0], 0x3C00);
  EXPECT_EQ(r.data<std::uint16_t>()[1], 0x3C02);
  EXPECT_EQ(r.data<std::uint16_t>()[2], 0x7C00);  // 65520 rounds to Inf
  EXPECT_EQ(r.data<std::uint16_t>()[3], 0x0000);  // below half the smallest subnormal
}

TEST(Tensor, Bf16AndFp64Conversions) {
  const std::vector<float> v{1.0f, 1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8), -2.5f};
  Tensor b = Tensor::from_f32({4}, v, DType::BF16);
  EXPECT_EQ(b.data<std::uint16_t>()[0], 0x3F80);
  EXPECT_EQ(b.data<std::uint16_t>()[1], 0x3F80);  // tie -> even
  EXPECT_EQ(b.data<std::uint16_t>()[2], 0x3F82);
  EXPECT_EQ(b.to_f32()[3], -2.5f);
  // FP64 -> FP16 rounds once: 1 + 2^-11 + 2^-40 is just above the tie and must round up, which a
  // double rounding through FP32 (losing the 2^-40) would get wrong.
  const std::vector<double> d{1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 0.1};
  Tensor h = Tensor::from_f64({2}, d, DType::F16);
  EXPECT_EQ(h.data<std::uint16_t>()[0], 0x3C01);
  EXPECT_EQ(h.data<std::uint16_t>()[1], 0x2E66);
  const auto back = h.to_f64();
  EXPECT_EQ(back[1], static_cast<double>(h.to_f32()[1]));
  Tensor i = Tensor::from_f32({3}, std::vector<float>{1, -2, 3}, DType::I64);
  EXPECT_EQ(i.data<std::int64_t>()[1], -2);
  EXPECT_EQ(i.to_f64()[2], 3.0);
  EXPECT_THROW(Tensor::from_f32({2}, std::vector<float>{1, 2, 3}), GraphError);
}

TEST(Tensor, ToF32ReadsPrivateFormatsLogically) {
  std::vector<float> v(2 * 20 * 3 * 3);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Tensor t = Tensor::from_f32({2, 20, 3, 3}, v, DType::F32);
  Tensor p = convert_format(t, Format::NC1HWC0);
  EXPECT_EQ(p.nbytes(), 2u * 2 * 3 * 3 * 16 * 4);
  EXPECT_EQ(p.to_f32(), v);
  EXPECT_EQ(convert_format(t, Format::NHWC).to_f64()[1], 1.0);
}

TEST(OpAttrs, TypedAccessNamesOpAndKey) {
  Op op;
  op.name = "conv7";
  op.type = "Conv";
  op.attrs = {{"group", std::int64_t{2}},
              {"eps", 1e-5},
              {"pads", std::vector<std::int64_t>{1, 1, 1, 1}},
              {"mode", std::string("same")},
              {"empty", std::vector<double>{}}};
  EXPECT_EQ(op.attr_int("group"), 2);
  EXPECT_EQ(op.attr_int("missing", 7), 7);
  EXPECT_DOUBLE_EQ(op.attr_float("eps"), 1e-5);
  EXPECT_DOUBLE_EQ(op.attr_float("group"), 2.0);  // ints read as floats
  EXPECT_EQ(op.attr_ints("pads").size(), 4u);
  EXPECT_TRUE(op.attr_ints("empty").empty());
  EXPECT_EQ(op.attr_str("mode"), "same");
  EXPECT_EQ(op.attr_str("nope", "x"), "x");
  EXPECT_EQ(op.attr_floats("pads")[0], 1.0);
  try {
    op.attr_int("strides");
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_STREQ(e.what(), "op 'conv7' (Conv): missing attribute 'strides'");
  }
  try {
    op.attr_int("eps");
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_STREQ(e.what(), "op 'conv7' (Conv): attribute 'eps' has type float, expected int");
  }
  EXPECT_THROW(op.attr_ints("mode"), GraphError);
  EXPECT_EQ(attr_value_str(op.attrs["pads"]), "[1, 1, 1, 1]");
  EXPECT_EQ(attr_value_str(op.attrs["mode"]), "\"same\"");
}

}  // namespace
}  // namespace probelab::graph
