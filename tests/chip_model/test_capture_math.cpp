#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <boost/crc.hpp>

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
  // Every length from 0 to 600 and some long ones, at every alignment: the CRC a record carries
  // is the bytewise table's (boost::crc_32_type), whatever computes it.
  std::mt19937_64 rng(11);
  std::vector<std::byte> data(70000);
  for (auto& b : data) b = static_cast<std::byte>(rng());
  auto boost_crc = [](std::span<const std::byte> v) {
    boost::crc_32_type c;
    c.process_bytes(v.data(), v.size());
    return c.checksum();
  };
  for (std::size_t len = 0; len <= 600; ++len)
    for (std::size_t at = 0; at < 8; ++at) {
      const std::span<const std::byte> v(data.data() + at, len);
      ASSERT_EQ(probelab::chip::crc32(v), boost_crc(v)) << len << " at " << at;
    }
  for (const std::size_t len : {4095u, 4096u, 65536u, 69999u}) {
    const std::span<const std::byte> v(data.data() + 1, len);
    ASSERT_EQ(probelab::chip::crc32(v), boost_crc(v)) << len;
  }
}

TEST(CaptureMath, Crc32ContinuesOverPiecesAsTheBytewiseTableDoes) {
  // The dump manifest's checksum is carried from one write to the next: the CRC of a text cut
  // anywhere, continued piece by piece, is the CRC of the whole (boost::crc_32_type fed the same
  // pieces gives the same value).
  std::mt19937_64 rng(5);
  std::string text(3000, ' ');
  for (char& c : text) c = static_cast<char>(0x20 + rng() % 95);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t a = rng() % text.size(), b = a + rng() % (text.size() - a + 1);
    const std::string_view s(text), p1 = s.substr(0, a), p2 = s.substr(a, b - a), p3 = s.substr(b);
    boost::crc_32_type c;
    for (std::string_view p : {p1, p2, p3}) c.process_bytes(p.data(), p.size());
    const std::uint32_t whole = spec::crc32(s);
    ASSERT_EQ(spec::crc32(p3, spec::crc32(p2, spec::crc32(p1))), whole) << a << " " << b;
    ASSERT_EQ(c.checksum(), whole) << a << " " << b;
  }
  EXPECT_EQ(spec::crc32(std::string_view{}, 0x1234abcdu), 0x1234abcdu);  // nothing added, nothing changed
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

namespace {

// The partial-sum part of the statistics as the top of capture_math.h defines it, element by
// element in plain scalar code: 16 interleaved partials per sum and per min/max (element i in
// partial i mod 16, in element order), partials combined in order 0..15. The finite_* fields and
// the counts; with no NaN or Inf also l2 and std (the rules for those cases are tested above).
spec::CaptureStats definition_stats(const std::vector<double>& x) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double sum[16] = {}, abs_sum[16] = {}, sq[16] = {}, dev[16] = {}, mn[16], mx[16];
  std::fill(mn, mn + 16, kInf);
  std::fill(mx, mx + 16, -kInf);
  spec::CaptureStats s;
  s.count = x.size();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    if (!std::isfinite(v)) {
      ++(std::isnan(v) ? s.nan_count : s.inf_count);
      continue;
    }
    s.zero_count += v == 0.0;
    sum[i % 16] += v;
    abs_sum[i % 16] += std::fabs(v);
    sq[i % 16] += v * v;
    if (v < mn[i % 16]) mn[i % 16] = v;
    if (v > mx[i % 16]) mx[i % 16] = v;
  }
  double total = 0, abs_total = 0, sq_total = 0, lo = kInf, hi = -kInf;
  for (int j = 0; j < 16; ++j) {
    total += sum[j];
    abs_total += abs_sum[j];
    sq_total += sq[j];
    if (mn[j] < lo) lo = mn[j];
    if (mx[j] > hi) hi = mx[j];
  }
  const std::uint64_t n = s.count - s.nan_count - s.inf_count;
  if (n == 0) return s;
  s.finite_min = lo;
  s.finite_max = hi;
  s.finite_mean = total / static_cast<double>(n);
  s.finite_abs_mean = abs_total / static_cast<double>(n);
  if (n < s.count) return s;
  s.l2 = std::sqrt(sq_total);
  for (std::size_t i = 0; i < x.size(); ++i) dev[i % 16] += (x[i] - s.finite_mean) * (x[i] - s.finite_mean);
  double dev_total = 0;
  for (double d : dev) dev_total += d;
  s.std = std::sqrt(dev_total / static_cast<double>(n));
  return s;
}

// Whether `got` has the fields definition_stats() gives, bit for bit.
bool follows_definition(const spec::CaptureStats& got, const spec::CaptureStats& want) {
  auto bits = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  const bool finite = want.nan_count + want.inf_count == 0 && want.count > 0;
  return got.count == want.count && got.nan_count == want.nan_count && got.inf_count == want.inf_count &&
         got.zero_count == want.zero_count && bits(got.finite_min) == bits(want.finite_min) &&
         bits(got.finite_max) == bits(want.finite_max) && bits(got.finite_mean) == bits(want.finite_mean) &&
         bits(got.finite_abs_mean) == bits(want.finite_abs_mean) &&
         (!finite || (bits(got.l2) == bits(want.l2) && bits(got.std) == bits(want.std)));
}

}  // namespace

// compute_stats converts whole blocks of FP32, FP16 and BF16 data a vector at a time and skips
// the masks in blocks with no NaN or Inf: the same statistics, bit for bit, as converting element
// by element and as the definition computed in scalar code (the definition's order of additions
// is the same), over every 16-bit pattern and over FP32 patterns with NaN, Inf and subnormals, at
// lengths around the block size, with and without non-finite elements.
TEST(CaptureMath, BlockConversionGivesTheElementwiseStatistics) {
  using spec::detail::load;
  std::mt19937_64 rng(5);
  std::vector<std::uint16_t> halves(65536);
  for (std::uint32_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<std::uint16_t>(i * 40503u);  // a permutation
  std::vector<std::uint32_t> words(4096);
  for (auto& w : words) {
    w = static_cast<std::uint32_t>(rng());
    if (rng() % 8 == 0) w = (w & 0x807FFFFFu) | (rng() % 2 ? 0x7F800000u : 0u);  // Inf / NaN / subnormal / zero
  }
  auto finite_only = [](auto v, auto finite) {
    v.erase(std::remove_if(v.begin(), v.end(), [&](auto x) { return !finite(x); }), v.end());
    return v;
  };
  const auto f16_finite = [](std::uint16_t h) { return (h & 0x7C00u) != 0x7C00u; };
  const auto bf16_finite = [](std::uint16_t h) { return (h & 0x7F80u) != 0x7F80u; };
  const auto f32_finite = [](std::uint32_t w) { return (w & 0x7F800000u) != 0x7F800000u; };
  auto same = [](const spec::CaptureStats& a, const spec::CaptureStats& b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  // Non-negative values with -0 in the first half and +0 in the second: the minimum is a zero, and
  // which zero a lane keeps (the first of equals, by the definition) shows in its sign.
  std::vector<std::uint16_t> zeros_both;
  for (std::uint32_t i = 0; i < 4096; ++i) {
    const bool zero = i < 2048 ? i % 5 == 0 : i % 7 == 0;
    zeros_both.push_back(static_cast<std::uint16_t>(zero ? (i < 2048 ? 0x8000u : 0u) : 1u + i % 0x7BFFu));
  }
  for (const std::size_t n : {0u, 1u, 15u, 16u, 17u, 31u, 32u, 33u, 1000u, 4096u, 65536u}) {
    SCOPED_TRACE(n);
    for (const auto& v : {halves, finite_only(halves, f16_finite), zeros_both}) {
      const std::size_t m = std::min(n, v.size());
      const auto* b = reinterpret_cast<const std::byte*>(v.data());
      const auto want = spec::detail::stats_impl(m, [b](std::size_t i) { return spec::f16_bits_to_double(load<std::uint16_t>(b, i)); });
      EXPECT_TRUE(same(spec::compute_stats(bytes_of(v), static_cast<std::uint8_t>(DType::F16), m), want));
      std::vector<double> d(m);
      for (std::size_t i = 0; i < m; ++i) d[i] = spec::f16_bits_to_double(v[i]);
      EXPECT_TRUE(follows_definition(want, definition_stats(d))) << "the definition, FP16";
    }
    for (const auto& v : {halves, finite_only(halves, bf16_finite)}) {
      const std::size_t m = std::min(n, v.size());
      const auto* b = reinterpret_cast<const std::byte*>(v.data());
      const auto want = spec::detail::stats_impl(m, [b](std::size_t i) { return spec::bf16_bits_to_double(load<std::uint16_t>(b, i)); });
      EXPECT_TRUE(same(spec::compute_stats(bytes_of(v), static_cast<std::uint8_t>(DType::BF16), m), want));
    }
    for (const auto& v : {words, finite_only(words, f32_finite)}) {
      const std::size_t m = std::min(n, v.size());
      const auto* b = reinterpret_cast<const std::byte*>(v.data());
      const auto want = spec::detail::stats_impl(m, [b](std::size_t i) { return double{load<float>(b, i)}; });
      EXPECT_TRUE(same(spec::compute_stats(bytes_of(v), static_cast<std::uint8_t>(DType::F32), m), want));
      std::vector<double> d(m);
      for (std::size_t i = 0; i < m; ++i) d[i] = double{std::bit_cast<float>(v[i])};
      EXPECT_TRUE(follows_definition(want, definition_stats(d))) << "the definition, FP32";
    }
  }
}
