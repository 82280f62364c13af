// num::box_muller and its log and sincos against the C library: within 1 ulp in double, and equal
// after rounding to FP32.
#include "numerics/normal.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "numerics/detail/avx512.h"

namespace probelab::num {
namespace {

double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Distance in ulps between two doubles of one sign.
std::int64_t ulps(double a, double b) {
  if (a == b) return 0;
  if (std::signbit(a) != std::signbit(b)) return INT64_MAX;
  const auto x = std::bit_cast<std::int64_t>(a), y = std::bit_cast<std::int64_t>(b);
  return x > y ? x - y : y - x;
}

TEST(Normal, LogIsWithinOneUlpOfTheCLibrary) {
  std::mt19937_64 rng(11);
  std::vector<double> xs = {1.0, 0x1p-53, 0x1.fffffffffffffp-1, 0.5, 0x1.6a09e667f3bcdp-1, 0x1.6a09e667f3bccp-1, 1e-10};
  for (int i = 0; i < 1 << 20; ++i) xs.push_back(1.0 - unit(rng));
  for (int i = 0; i < 1 << 16; ++i) xs.push_back(std::ldexp(1.0 - unit(rng), -static_cast<int>(rng() % 53)));
  std::int64_t worst = 0;
  for (double x : xs) worst = std::max(worst, ulps(det_log(x), std::log(x)));
  EXPECT_LE(worst, 1);
  EXPECT_EQ(det_log(1.0), 0.0);
}

TEST(Normal, SinAndCosAreWithinOneUlpOfTheCLibrary) {
  std::mt19937_64 rng(12);
  std::vector<double> ts = {0.0, 0x1p-60, M_PI / 4, M_PI / 2, M_PI, 3 * M_PI / 2, 2 * M_PI * 0x1.fffffffffffffp-1};
  for (int q = 1; q < 4; ++q) {  // the doubles next to multiples of pi/2, where the result is tiny
    const double t = q * (M_PI / 2);
    ts.push_back(std::nextafter(t, 0.0));
    ts.push_back(std::nextafter(t, 10.0));
  }
  for (int i = 0; i < 1 << 20; ++i) ts.push_back(2 * M_PI * unit(rng));
  std::int64_t worst_sin = 0, worst_cos = 0;
  for (double t : ts) {
    double s = 0, c = 0;
    det_sincos(t, s, c);
    worst_sin = std::max(worst_sin, ulps(s, std::sin(t)));
    worst_cos = std::max(worst_cos, ulps(c, std::cos(t)));
  }
  EXPECT_LE(worst_sin, 1);
  EXPECT_LE(worst_cos, 1);
}

TEST(Normal, SamplesRoundedToFp32EqualTheCLibrarysBoxMuller) {
  std::mt19937_64 rng(13);
  const std::size_t n = (1 << 20) + 3;  // a tail that is not a whole vector
  std::vector<double> u1(n), u2(n), c(n), s(n);
  for (std::size_t i = 0; i < n; ++i) {
    u1[i] = 1.0 - unit(rng);
    u2[i] = unit(rng);
  }
  const double mean = 0.25, stddev = 3.0;
  box_muller(u1, u2, mean, stddev, c, s);
  std::size_t differ = 0, differ_double = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = stddev * std::sqrt(-2.0 * std::log(u1[i]));
    const double lc = mean + r * std::cos(2 * M_PI * u2[i]), ls = mean + r * std::sin(2 * M_PI * u2[i]);
    differ += static_cast<float>(c[i]) != static_cast<float>(lc);
    differ += static_cast<float>(s[i]) != static_cast<float>(ls);
    differ_double += c[i] != lc;
  }
  EXPECT_EQ(differ, 0u);
  EXPECT_GT(differ_double, 0u);  // the doubles do differ: the equality above is a property of the rounding
}

TEST(Normal, EveryTailLengthGivesTheValuesOfTheWholeVectors) {
  std::mt19937_64 rng(14);
  std::vector<double> u1(11), u2(11), c(11), s(11);
  for (std::size_t i = 0; i < u1.size(); ++i) {
    u1[i] = 1.0 - unit(rng);
    u2[i] = unit(rng);
  }
  box_muller(u1, u2, 0.0, 1.0, c, s);
  for (std::size_t len = 0; len <= u1.size(); ++len) {
    std::vector<double> c2(len), s2(len);
    box_muller(std::span(u1).first(len), std::span(u2).first(len), 0.0, 1.0, c2, s2);
    for (std::size_t i = 0; i < len; ++i) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(c2[i]), std::bit_cast<std::uint64_t>(c[i])) << len << " " << i;
      EXPECT_EQ(std::bit_cast<std::uint64_t>(s2[i]), std::bit_cast<std::uint64_t>(s[i])) << len << " " << i;
    }
  }
}

TEST(Normal, UniformPairsAreTheOneDrawAtATimeUniforms) {
  // Edge draws (0, all ones, the 53-bit boundaries, the lowest kept bit alone) among random ones,
  // at every tail length and both orders.
  std::mt19937_64 rng(15);
  std::vector<std::uint64_t> draws = {0,       ~0ull,     1ull << 11, (1ull << 11) - 1, 1ull << 63,
                                      ~0ull << 11, 3ull << 11, (1ull << 12) | (1ull << 11), ~0ull >> 1, 0x800};
  while (draws.size() < 2 * 40) draws.push_back(rng());
  const auto scalar = [](std::uint64_t d) { return static_cast<double>(d >> 11) * 0x1.0p-53; };
  for (const bool complement : {false, true}) {
    for (std::size_t n = 0; n <= 40; ++n) {
      std::vector<double> u1(n, -1.0), u2(n, -1.0);
      uniform_pairs(std::span(draws).first(2 * n), complement, u1, u2);
      for (std::size_t i = 0; i < n; ++i) {
        const double first = complement ? 1.0 - scalar(draws[2 * i]) : scalar(draws[2 * i]);
        EXPECT_EQ(std::bit_cast<std::uint64_t>(u1[i]), std::bit_cast<std::uint64_t>(first)) << n << " " << i;
        EXPECT_EQ(std::bit_cast<std::uint64_t>(u2[i]), std::bit_cast<std::uint64_t>(scalar(draws[2 * i + 1])))
            << n << " " << i;
      }
    }
  }
}

TEST(Normal, SamplesAreTheBoxMullerPairsOfConsecutiveDraws) {
  // Lengths around the vector width, odd ones and chunk boundaries (256 pairs), each against the
  // pair-at-a-time definition; mean and deviation applied before the rounding to FP32.
  for (const std::size_t n : {0, 1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 511, 512, 513, 1031}) {
    Mt19937_64 rng(99 + n), ref(99 + n);
    std::vector<float> out(n, -1.0f);
    normal_samples(rng, 0.25, 3.0, out);
    for (std::size_t p = 0; 2 * p < n; ++p) {
      const std::uint64_t d1 = ref(), d2 = ref();
      double u1[1] = {1.0 - unit_interval(d1)}, u2[1] = {unit_interval(d2)}, c[1], s[1];
      box_muller(u1, u2, 0.25, 3.0, c, s);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(out[2 * p]), std::bit_cast<std::uint32_t>(static_cast<float>(c[0])))
          << n << " " << p;
      if (2 * p + 1 < n) {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(out[2 * p + 1]), std::bit_cast<std::uint32_t>(static_cast<float>(s[0])))
            << n << " " << p;
      }
    }
    // The generator moved on by whole pairs: the next draw is the one after them.
    EXPECT_EQ(rng(), ref()) << n;
  }
}

// The AVX-512 kernels against the AVX2 ones, bit for bit: edge uniforms (u1 = 1 and the smallest
// u1, the log's reduction boundary at sqrt(2)/2, u2 at and next to the quadrant boundaries) among
// random ones, every tail length, and normal_samples at lengths around both vector widths.
class NormalIsa : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!detail::avx512_available()) GTEST_SKIP() << "no AVX-512 on this CPU";
  }
  void TearDown() override { detail::set_avx512_kernels(true); }
};

TEST_F(NormalIsa, BoxMullerGivesTheAvx2Bits) {
  std::mt19937_64 rng(16);
  std::vector<double> u1 = {1.0, 0x1p-53, 0x1.6a09e667f3bcdp-1, 0x1.6a09e667f3bccp-1, 0.5, 1.0 - 0x1p-53, 1e-300};
  std::vector<double> u2 = {0.0, 0.125, 0.25, 0.5, 0.75, 1.0 - 0x1p-53, 0x1.fffffffffffffp-3};
  for (int q = 1; q < 8; ++q) {
    u2.push_back(std::nextafter(q / 8.0, 0.0));
    u2.push_back(std::nextafter(q / 8.0, 1.0));
  }
  while (u1.size() < u2.size()) u1.push_back(1.0 - unit(rng));
  while (u1.size() < 300) {
    u1.push_back(1.0 - unit(rng));
    u2.push_back(unit(rng));
  }
  for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{5}, std::size_t{7}, std::size_t{8},
                          std::size_t{9}, std::size_t{13}, std::size_t{16}, std::size_t{17}, u1.size()}) {
    std::vector<double> c(len), s(len), c2(len), s2(len);
    detail::set_avx512_kernels(true);
    box_muller(std::span(u1).first(len), std::span(u2).first(len), 0.25, 3.0, c, s);
    detail::set_avx512_kernels(false);
    box_muller(std::span(u1).first(len), std::span(u2).first(len), 0.25, 3.0, c2, s2);
    for (std::size_t i = 0; i < len; ++i) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(c[i]), std::bit_cast<std::uint64_t>(c2[i])) << len << " " << i;
      EXPECT_EQ(std::bit_cast<std::uint64_t>(s[i]), std::bit_cast<std::uint64_t>(s2[i])) << len << " " << i;
    }
  }
}

TEST_F(NormalIsa, SamplesGiveTheAvx2Bits) {
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 40; ++n) lengths.push_back(n);
  for (std::size_t n : {511, 512, 513, 520, 1031, 4099}) lengths.push_back(n);
  for (const std::size_t n : lengths) {
    std::vector<float> a(n, -1.0f), b(n, -2.0f);
    Mt19937_64 ra(7 + n), rb(7 + n);
    detail::set_avx512_kernels(true);
    normal_samples(ra, -1.5, 0.5, a);
    detail::set_avx512_kernels(false);
    normal_samples(rb, -1.5, 0.5, b);
    for (std::size_t i = 0; i < n; ++i)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i])) << n << " " << i;
    EXPECT_EQ(ra(), rb()) << n;
  }
}

}  // namespace
}  // namespace probelab::num
