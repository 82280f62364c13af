#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "chip_model/capture_unit.h"
#include "numerics/bf16.h"
#include "numerics/fp16.h"
#include "chip_model/spec/capture_math.h"

namespace spec = probelab::spec;
using probelab::graph::DType;

namespace {

std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }
template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) { return std::as_bytes(std::span(v)); }

}  // namespace

TEST(CaptureMath, Xxh64KnownVectors) {
  // Reference values of the xxHash project (XXH64, seed 0).
  EXPECT_EQ(spec::xxh64(bytes_of("")), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(spec::xxh64(bytes_of("a")), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(spec::xxh64(bytes_of("abc")), 0x44BC2CF5AD770999ull);
  EXPECT_EQ(spec::xxh64(bytes_of("Nobody inspects the spammish repetition")), 0xFBCEA83C8A378BF1ull);
  // 103 bytes: three 32-byte stripes, then 8-, 4- and 1-byte tails (values from libxxhash 0.8.1).
  std::vector<std::uint8_t> pat(103);
  for (std::size_t i = 0; i < pat.size(); ++i) pat[i] = static_cast<std::uint8_t>((i * 7 + 3) % 256);
  EXPECT_EQ(spec::xxh64(bytes_of(pat)), 0x9CE1E302796DFBC9ull);
  EXPECT_EQ(spec::xxh64(bytes_of(pat), 12345), 0x44D3BA994DE6A947ull);
  // Lengths around the 32-byte stripe and the 8/4/1-byte tails give distinct digests.
  std::vector<std::uint64_t> seen;
  const std::string s(80, 'x');
  for (std::size_t n = 0; n < 80; ++n) seen.push_back(spec::xxh64(bytes_of(std::string_view(s).substr(0, n))));
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
  EXPECT_NE(spec::xxh64(bytes_of("abc"), 1), spec::xxh64(bytes_of("abc"), 0));
}

TEST(CaptureMath, StatisticsFollowNumpyWithNonFiniteAndKeepFiniteVariants) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v{1.0f, -3.0f, nan, 0.0f, inf, -inf, 2.0f, -0.0f};
  const auto s = spec::compute_stats(bytes_of(v), static_cast<std::uint8_t>(DType::F32), v.size());
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.inf_count, 2u);
  EXPECT_EQ(s.zero_count, 2u);
  // numpy: a NaN makes every moment NaN (np.max, np.mean, np.linalg.norm, ...)
  for (double x : {s.min, s.max, s.mean, s.abs_mean, s.std, s.l2, s.max_abs}) EXPECT_TRUE(std::isnan(x));
  // finite: 1, -3, 0, 2, -0 -> n = 5
  EXPECT_EQ(s.finite_min, -3.0);
  EXPECT_EQ(s.finite_max, 2.0);
  EXPECT_EQ(s.finite_max_abs, 3.0);
  EXPECT_DOUBLE_EQ(s.finite_mean, 0.0);
  EXPECT_DOUBLE_EQ(s.finite_abs_mean, 6.0 / 5);

  // Without the NaN (numpy: min -inf, max inf, max|x| inf, mean nan (inf - inf), std nan, norm inf).
  std::vector<float> w{1.0f, -3.0f, 0.0f, inf, -inf, 2.0f, -0.0f};
  const auto t = spec::compute_stats(bytes_of(w), static_cast<std::uint8_t>(DType::F32), w.size());
  EXPECT_EQ(t.min, -INFINITY);
  EXPECT_EQ(t.max, INFINITY);
  EXPECT_EQ(t.max_abs, INFINITY);
  EXPECT_EQ(t.abs_mean, INFINITY);
  EXPECT_EQ(t.l2, INFINITY);
  EXPECT_TRUE(std::isnan(t.mean));
  EXPECT_TRUE(std::isnan(t.std));
  // One sign of infinity: the mean is that infinity; min is the finite minimum.
  w = {1.0f, inf, 2.0f};
  const auto u = spec::compute_stats(bytes_of(w), static_cast<std::uint8_t>(DType::F32), w.size());
  EXPECT_EQ(u.mean, INFINITY);
  EXPECT_EQ(u.min, 1.0);
  EXPECT_EQ(u.max, INFINITY);
  EXPECT_EQ(u.finite_max, 2.0);
  // All finite: numpy values (np.std is the population deviation).
  w = {1.0f, -3.0f, 0.0f, 2.0f, -0.0f};
  const auto f = spec::compute_stats(bytes_of(w), static_cast<std::uint8_t>(DType::F32), w.size());
  EXPECT_EQ(f.min, -3.0);
  EXPECT_EQ(f.max, 2.0);
  EXPECT_EQ(f.max_abs, 3.0);
  EXPECT_DOUBLE_EQ(f.mean, 0.0);
  EXPECT_DOUBLE_EQ(f.abs_mean, 6.0 / 5);
  EXPECT_DOUBLE_EQ(f.l2, std::sqrt(14.0));
  EXPECT_DOUBLE_EQ(f.std, std::sqrt(14.0 / 5));
  EXPECT_EQ(f.finite_mean, f.mean);
}

TEST(CaptureMath, AnInfiniteTensorHasInfiniteMaxAbs) {
  // The documented condition `max_abs > 65504` catches an overflow to Inf.
  const std::vector<std::uint16_t> h(64, 0x7C00);  // +Inf in FP16
  const auto s = spec::compute_stats(bytes_of(h), static_cast<std::uint8_t>(DType::F16), h.size());
  EXPECT_EQ(s.max_abs, INFINITY);
  EXPECT_EQ(s.l2, INFINITY);
  EXPECT_EQ(s.max, INFINITY);
  EXPECT_EQ(s.min, INFINITY);
  EXPECT_EQ(s.inf_count, 64u);
  EXPECT_EQ(s.finite_max_abs, 0.0);
  spec::BreakpointArgs a;
  a.num_clauses = 1;
  a.clauses[0] = {static_cast<std::uint8_t>(spec::StatField::MaxAbs), static_cast<std::uint8_t>(spec::CmpOp::Gt), {}, 65504};
  EXPECT_TRUE(spec::eval_predicate(a, s));
  a.clauses[0].field = static_cast<std::uint8_t>(spec::StatField::FiniteMaxAbs);
  EXPECT_FALSE(spec::eval_predicate(a, s));
}

TEST(CaptureMath, StatisticsOfFp16AndBf16AreExact) {
  // FP16: 1.0 = 0x3C00, -2.5 = 0xC100, smallest subnormal 0x0001 = 2^-24, 65504 = 0x7BFF, NaN 0x7E00.
  const std::vector<std::uint16_t> h{0x3C00, 0xC100, 0x0001, 0x7BFF, 0x7E00};
  const auto s = spec::compute_stats(bytes_of(h), static_cast<std::uint8_t>(DType::F16), h.size());
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.finite_max, 65504.0);
  EXPECT_EQ(s.finite_min, -2.5);
  EXPECT_DOUBLE_EQ(s.finite_mean, (1.0 - 2.5 + std::ldexp(1.0, -24) + 65504.0) / 4);
  // BF16: 1.0 = 0x3F80, -inf = 0xFF80
  const std::vector<std::uint16_t> b{0x3F80, 0xFF80, 0x4000};
  const auto sb = spec::compute_stats(bytes_of(b), static_cast<std::uint8_t>(DType::BF16), b.size());
  EXPECT_EQ(sb.inf_count, 1u);
  EXPECT_EQ(sb.max, 2.0);
  EXPECT_EQ(sb.min, -INFINITY);
  EXPECT_EQ(sb.finite_mean, 1.5);
  EXPECT_EQ(sb.mean, -INFINITY);
}

TEST(CaptureMath, AllNonFiniteHasZeroFiniteStatistics) {
  const std::vector<double> v{std::nan(""), INFINITY};
  const auto s = spec::compute_stats(bytes_of(v), static_cast<std::uint8_t>(DType::F64), v.size());
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.finite_min, 0.0);
  EXPECT_EQ(s.finite_max, 0.0);
  EXPECT_EQ(s.finite_abs_mean, 0.0);
  EXPECT_TRUE(std::isnan(s.max));
  const auto e = spec::compute_stats({}, static_cast<std::uint8_t>(DType::F32), 0);
  EXPECT_EQ(e.count, 0u);
  EXPECT_EQ(e.max_abs, 0.0);
}

TEST(CaptureMath, PredicateAllAnyAndEmpty) {
  spec::CaptureStats s;
  s.nan_count = 2;
  s.max_abs = 70000;
  s.abs_mean = 1e-7;
  spec::BreakpointArgs a;
  a.num_clauses = 2;
  a.clauses[0] = {static_cast<std::uint8_t>(spec::StatField::NanCount), static_cast<std::uint8_t>(spec::CmpOp::Gt), {}, 0};
  a.clauses[1] = {static_cast<std::uint8_t>(spec::StatField::AbsMean), static_cast<std::uint8_t>(spec::CmpOp::Lt), {}, 1e-8};
  EXPECT_FALSE(spec::eval_predicate(a, s));  // all: second clause fails
  a.any = 1;
  EXPECT_TRUE(spec::eval_predicate(a, s));
  a.any = 0;
  a.clauses[1].value = 1e-6;
  EXPECT_TRUE(spec::eval_predicate(a, s));
  a.num_clauses = 0;
  EXPECT_FALSE(spec::eval_predicate(a, s));
  a.num_clauses = 1;
  a.clauses[0].field = 200;  // unknown field never holds
  EXPECT_FALSE(spec::eval_predicate(a, s));
}

TEST(CaptureMath, Crc32IsIeee) {
  // CRC-32/ISO-HDLC check value.
  EXPECT_EQ(probelab::chip::crc32(bytes_of("123456789")), 0xCBF43926u);
}

TEST(CaptureMath, HalfDecodersMatchTheNumericsLayerForEveryPattern) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const double h = spec::f16_bits_to_double(bits), bf = spec::bf16_bits_to_double(bits);
    const float rh = probelab::num::to_float(probelab::num::f16{bits});
    const float rb = probelab::num::to_float(probelab::num::bf16{bits});
    if (std::isnan(rh)) EXPECT_TRUE(std::isnan(h)) << b; else EXPECT_EQ(h, static_cast<double>(rh)) << b;
    if (std::isnan(rb)) EXPECT_TRUE(std::isnan(bf)) << b; else EXPECT_EQ(bf, static_cast<double>(rb)) << b;
  }
}

// The statistics against a literal transcription of their definition: 16 interleaved partial sums
// (element i into partial i mod 16, non-finite elements skipped), partials added in order;
// lengths around the 16-element blocks, with NaN, Inf and signed zeros mixed in.
TEST(CaptureMath, StatisticsFollowTheInterleavedPartialSumDefinition) {
  for (std::size_t numel : {0u, 1u, 15u, 16u, 17u, 33u, 1000u}) {
    std::vector<float> v(numel);
    for (std::size_t i = 0; i < numel; ++i) v[i] = std::sin(static_cast<float>(i) * 0.37f) * 1e3f + 1e-3f * i;
    if (numel > 20) {
      v[3] = std::numeric_limits<float>::quiet_NaN();
      v[7] = std::numeric_limits<float>::infinity();
      v[9] = -0.0f;
      v[19] = 0.0f;
    }
    double part[3][16] = {}, dev[16] = {};
    double lo = 0, hi = 0;
    std::uint64_t n = 0, nan = 0, inf = 0, zero = 0;
    for (std::size_t i = 0; i < numel; ++i) {
      const double x = v[i];
      if (std::isnan(x)) { ++nan; continue; }
      if (std::isinf(x)) { ++inf; continue; }
      if (n == 0 || x < lo) lo = n == 0 ? x : std::min(lo, x);
      if (n == 0 || x > hi) hi = n == 0 ? x : std::max(hi, x);
      zero += x == 0.0;
      part[0][i % 16] += x;
      part[1][i % 16] += std::fabs(x);
      part[2][i % 16] += x * x;
      ++n;
    }
    double sum = 0, abs_sum = 0, sq = 0;
    for (int j = 0; j < 16; ++j) {
      sum += part[0][j];
      abs_sum += part[1][j];
      sq += part[2][j];
    }
    const double mean = n ? sum / static_cast<double>(n) : 0.0;
    for (std::size_t i = 0; i < numel; ++i)
      if (std::isfinite(v[i])) dev[i % 16] += (v[i] - mean) * (v[i] - mean);
    double dev_sum = 0;
    for (double d : dev) dev_sum += d;

    const spec::CaptureStats s = spec::compute_stats(bytes_of(v), static_cast<std::uint8_t>(DType::F32), numel);
    SCOPED_TRACE(numel);
    EXPECT_EQ(s.count, numel);
    EXPECT_EQ(s.nan_count, nan);
    EXPECT_EQ(s.inf_count, inf);
    EXPECT_EQ(s.zero_count, zero);
    if (n == 0) {
      EXPECT_EQ(s.finite_mean, 0.0);
      continue;
    }
    EXPECT_EQ(s.finite_min, lo);
    EXPECT_EQ(s.finite_max, hi);
    EXPECT_EQ(s.finite_max_abs, std::max(std::fabs(lo), std::fabs(hi)));
    EXPECT_EQ(s.finite_mean, mean);  // bit-exact: same additions in the same order
    EXPECT_EQ(s.finite_abs_mean, abs_sum / static_cast<double>(n));
    if (nan + inf > 0) {
      EXPECT_TRUE(std::isnan(s.mean));  // a NaN is present
      continue;
    }
    EXPECT_EQ(s.mean, mean);
    EXPECT_EQ(s.l2, std::sqrt(sq));
    EXPECT_EQ(s.std, std::sqrt(dev_sum / static_cast<double>(n)));
  }
}
