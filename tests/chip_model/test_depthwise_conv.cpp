// The depthwise convolution without im2col (depthwise_conv.h) against the path it replaces,
// cube_gemm over im2col columns, bit for bit and flag for flag: random window geometries (strides,
// dilations, paddings larger than the window), depth multipliers, images, data with zeros of both
// signs, exact cancellations, large magnitudes and subnormals (read as such or flushed, flagged
// DenormalIn at the GEMM's first index); and the operands and modes it must leave to the GEMM.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "chip_model/kernels/cube_gemm.h"
#include "chip_model/kernels/depthwise_conv.h"
#include "numerics/fp16.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace num = probelab::num;
using pc::kernels::ConvShape;

namespace {

// FP16 values that are zero (either sign), +-1 (cancelling pairs), normal of any magnitude up to
// 2^8 or, one in `sub_rate` (0: never), subnormal.
pg::Tensor f16_tensor(const pg::Shape& shape, std::mt19937_64& rng, unsigned sub_rate = 0) {
  std::vector<float> v(static_cast<std::size_t>(pg::numel(shape)));
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (float& x : v) {
    const auto r = rng() % 10;
    const float sign = rng() % 2 ? -1.0f : 1.0f;
    x = r == 0 ? sign * 0.0f : r == 1 ? sign : sign * std::ldexp(mant(rng), static_cast<int>(rng() % 23) - 14);
    if (sub_rate != 0 && rng() % sub_rate == 0) x = sign * std::ldexp(static_cast<float>(1 + rng() % 1023), -24);
  }
  return pg::Tensor::from_f32(shape, v, pg::DType::F16);
}

// Y by the im2col GEMM, per image and group, as ConvKernel runs it; `flags` merged as it merges them.
std::vector<float> by_gemm(const ConvShape& s, std::int64_t images, std::int64_t groups, std::int64_t mg,
                           const pg::Tensor& x, const pg::Tensor& w, const pc::AccumulationMode& acc, const num::Mode& mode,
                           num::BulkReport& flags) {
  const std::int64_t R = s.rows(), P = s.cols();
  std::vector<std::uint16_t> cols(static_cast<std::size_t>(R * P));
  std::vector<float> y(static_cast<std::size_t>(images * groups * mg * P));
  for (std::int64_t n = 0; n < images; ++n)
    for (std::int64_t g = 0; g < groups; ++g) {
      const auto* img = reinterpret_cast<const std::byte*>(x.data<std::uint16_t>().data() + (n * groups + g) * s.h * s.w);
      pc::kernels::im2col(s, img, 2, reinterpret_cast<std::byte*>(cols.data()), P);
      const pc::kernels::CubeOperand a{pg::DType::F16, w.data<std::uint16_t>().data() + g * mg * R, R, false};
      const pc::kernels::CubeOperand b{pg::DType::F16, cols.data(), P, false};
      const std::int64_t y0 = (n * groups + g) * mg * P;
      flags.merge(pc::kernels::cube_gemm(mg, P, R, a, b, y.data() + y0, P, acc, mode), y0);
    }
  return y;
}

ConvShape random_shape(std::mt19937_64& rng) {
  for (;;) {
    ConvShape s;
    s.c = 1;
    s.h = 1 + static_cast<std::int64_t>(rng() % 9), s.w = 1 + static_cast<std::int64_t>(rng() % 11);
    s.kh = 1 + static_cast<std::int64_t>(rng() % 4), s.kw = 1 + static_cast<std::int64_t>(rng() % 4);
    s.sh = 1 + static_cast<std::int64_t>(rng() % 3), s.sw = 1 + static_cast<std::int64_t>(rng() % 3);
    s.dh = 1 + static_cast<std::int64_t>(rng() % 2), s.dw = 1 + static_cast<std::int64_t>(rng() % 3);
    s.ph = static_cast<std::int64_t>(rng() % 4), s.pw = static_cast<std::int64_t>(rng() % 5);
    s.oh = (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1) / s.sh + 1;
    s.ow = (s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1) / s.sw + 1;
    if (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1 >= 0 && s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1 >= 0) return s;
  }
}

}  // namespace

TEST(DepthwiseConv, SameBitsAsTheIm2colGemm) {
  std::mt19937_64 rng(2026);
  num::Mode ftz_sat;
  ftz_sat.denormal = num::DenormalMode::FlushToZero;
  ftz_sat.overflow = num::OverflowMode::Saturation;
  int compared = 0, flagged = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const ConvShape s = random_shape(rng);
    const std::int64_t images = 1 + static_cast<std::int64_t>(rng() % 2), groups = 1 + static_cast<std::int64_t>(rng() % 4),
                       mg = 1 + static_cast<std::int64_t>(rng() % 3);
    // A third of the trials without subnormals, the others with a few in X, W or both.
    const unsigned rate = trial % 3 == 0 ? 0u : 40u;
    const pg::Tensor x = f16_tensor({images, groups, s.h, s.w}, rng, trial % 3 == 1 ? 0u : rate);
    const pg::Tensor w = f16_tensor({groups * mg, 1, s.kh, s.kw}, rng, trial % 3 == 2 ? rate / 8 : 0u);
    const pc::AccumulationMode acc;
    const num::Mode mode = trial % 2 ? ftz_sat : num::Mode{};
    num::BulkReport want_flags;
    const std::vector<float> want = by_gemm(s, images, groups, mg, x, w, acc, mode, want_flags);
    std::vector<float> got(want.size(), std::bit_cast<float>(0x7FC01234u));  // every element must be written
    const std::optional<num::BulkReport> flags = pc::kernels::depthwise_conv(s, images, groups, mg, x, w, acc, mode, got.data());
    ASSERT_TRUE(flags.has_value()) << "trial " << trial;
    ASSERT_EQ(flags->flags.bits, want_flags.flags.bits) << "trial " << trial;
    ASSERT_EQ(flags->first, want_flags.first) << "trial " << trial;
    flagged += want_flags.flags.any() ? 1 : 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
          << "trial " << trial << " element " << i << " (" << got[i] << " vs " << want[i] << ")";
    compared += static_cast<int>(want.size());
  }
  EXPECT_GT(compared, 10000);
  EXPECT_GT(flagged, 100);  // the DenormalIn cases were exercised
}

TEST(DepthwiseConv, LeavesSpecialOperandsAndOtherModesToTheGemm) {
  std::mt19937_64 rng(5);
  ConvShape s;
  s.c = 1, s.h = s.w = 5, s.kh = s.kw = 3, s.ph = s.pw = 1, s.oh = s.ow = 5;
  const pg::Tensor x = f16_tensor({1, 2, 5, 5}, rng), w = f16_tensor({2, 1, 3, 3}, rng);
  std::vector<float> y(2 * 25, 7.0f);
  const pc::AccumulationMode fp32;
  ASSERT_TRUE(pc::kernels::depthwise_conv(s, 1, 2, 1, x, w, fp32, {}, y.data()).has_value());
  auto refused = [&](const pg::Tensor& xx, const pg::Tensor& ww, const pc::AccumulationMode& acc, ConvShape sh) {
    std::vector<float> out(2 * 25, 7.0f);
    const bool ran = pc::kernels::depthwise_conv(sh, 1, 2, 1, xx, ww, acc, {}, out.data()).has_value();
    for (float v : out) EXPECT_EQ(v, 7.0f);  // nothing written
    return !ran;
  };
  for (const std::uint16_t special : {0x7E00, 0x7C01, 0x7C00, 0xFC00}) {  // NaNs, +-Inf
    pg::Tensor xs = x, ws = w;
    xs.data<std::uint16_t>()[17] = special;
    ws.data<std::uint16_t>()[4] = special;
    EXPECT_TRUE(refused(xs, w, fp32, s)) << std::hex << special;
    EXPECT_TRUE(refused(x, ws, fp32, s)) << std::hex << special;
  }
  pc::AccumulationMode f16acc;
  f16acc.acc_dtype = pg::DType::F16;
  EXPECT_TRUE(refused(x, w, f16acc, s));
  pc::AccumulationMode split;
  split.split_k_chunk = 4;
  EXPECT_TRUE(refused(x, w, split, s));
  const pg::Tensor xb = pg::Tensor::from_f32({1, 2, 5, 5}, x.to_f32(), pg::DType::BF16);
  const pg::Tensor wb = pg::Tensor::from_f32({2, 1, 3, 3}, w.to_f32(), pg::DType::BF16);
  EXPECT_TRUE(refused(xb, wb, fp32, s));
  ConvShape two = s;
  two.c = 2;  // two input channels per group: not depthwise
  EXPECT_TRUE(refused(x, w, fp32, two));
}
