#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include <gtest/gtest.h>

#include "tests/probes/probe_test_util.h"
#include "probes/tensor_stats.h"

using namespace probe_test;

namespace {
std::uint64_t xxh(std::string_view s) { return probes::xxh64(std::as_bytes(std::span(s.data(), s.size()))); }
}  // namespace

TEST(Stats, DefinitionsMatchTheCaptureUnit) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v{1, -2, nan, inf, 0, 3};
  auto s = probes::compute_stats(v);
  EXPECT_EQ(s.count, 6u);
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.inf_count, 1u);
  EXPECT_EQ(s.zero_count, 1u);
  EXPECT_DOUBLE_EQ(s.finite_min, -2);
  EXPECT_DOUBLE_EQ(s.finite_max, 3);
  EXPECT_DOUBLE_EQ(s.finite_mean, 0.5);
  EXPECT_DOUBLE_EQ(s.finite_abs_mean, 1.5);
  EXPECT_DOUBLE_EQ(s.finite_max_abs, 3);
  EXPECT_TRUE(std::isnan(s.max_abs));  // numpy: np.max(np.abs(v)) is nan with a NaN present
  auto inf_only = probes::compute_stats(std::vector<double>{1, -2, inf, 0, 3});
  EXPECT_EQ(inf_only.max_abs, inf);
  EXPECT_EQ(inf_only.max, inf);
  EXPECT_DOUBLE_EQ(inf_only.min, -2);
  auto finite = probes::compute_stats(std::vector<double>{1, -2, 0, 3});
  EXPECT_DOUBLE_EQ(finite.l2, std::sqrt(14.0));
  EXPECT_DOUBLE_EQ(finite.std, std::sqrt(13.0 / 4));
  auto none = probes::compute_stats(std::vector<double>{nan, nan});
  EXPECT_EQ(none.nan_count, 2u);
  EXPECT_EQ(none.finite_mean, 0.0);
  auto t = probes::compute_stats(f16({2, 2}, {0.5f, -0.5f, 1.0f, 65504.0f}));
  EXPECT_DOUBLE_EQ(t.max_abs, 65504.0);
  EXPECT_EQ(t.count, 4u);
}

TEST(Stats, Xxh64ReferenceVectors) {
  EXPECT_EQ(xxh(""), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(xxh("a"), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(xxh("abc"), 0x44BC2CF5AD770999ull);
  EXPECT_EQ(xxh("Nobody inspects the spammish repetition"), 0xFBCEA83C8A378BF1ull);
  EXPECT_NE(xxh("abd"), xxh("abc"));
}

// A plain FP32/FP16/BF16 tensor's statistics come straight from its bytes: the same bits as from
// its values in double (to_f64), with NaN, Inf, signed zeros and lengths off the 16-lane blocks.
TEST(Stats, TensorBytesGiveTheStatisticsOfItsValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto dtype : {graph::DType::F32, graph::DType::F16, graph::DType::BF16}) {
    for (const std::int64_t n : {1, 15, 16, 17, 100, 1000}) {
      for (const int special : {0, 1, 2}) {
        std::vector<float> v(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = std::sin(0.3f * static_cast<float>(i)) * 7.0f;
        if (n > 3) v[2] = -0.0f;
        if (special == 1 && n > 5) v[5] = inf;
        if (special == 2 && n > 5) v[5] = nan;
        const graph::Tensor t = graph::Tensor::from_f32({n}, v, dtype);
        const spec::CaptureStats got = probes::compute_stats(t), want = probes::compute_stats(t.to_f64());
        SCOPED_TRACE(testing::Message() << graph::dtype_name(dtype) << " n " << n << " special " << special);
        EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0);
      }
    }
  }
}
