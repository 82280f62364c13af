// num::accumulate (moments.h) on FP32/FP16/BF16 storage against the scalar loop over the same
// values widened to double (the squares summed in eight lanes by index): every field bit for bit,
// on random values and on NaN, Inf, subnormals and signed zeros, at lengths that are not
// multiples of eight, in one call and in pieces.
#include "numerics/moments.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace probelab::num {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float widen(float v) { return v; }
float widen(f16 v) { return _cvtsh_ss(v.bits); }
float widen(bf16 v) { return std::bit_cast<float>(static_cast<std::uint32_t>(v.bits) << 16); }

f16 narrow16(float v) { return f16{_cvtss_sh(v, 0)}; }
bf16 narrowb(float v) { return bf16{static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >> 16)}; }

template <class T> FiniteMoments reference(const std::vector<T>& x, std::size_t listed) {
  std::vector<double> d;
  for (T v : x) d.push_back(widen(v));
  FiniteMoments m;
  accumulate(m, std::span<const double>(d), listed);
  return m;
}

void expect_same(const FiniteMoments& a, const FiniteMoments& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.elements, b.elements);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a.max_abs), std::bit_cast<std::uint64_t>(b.max_abs));
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a.min), std::bit_cast<std::uint64_t>(b.min)) << a.min << " vs " << b.min;
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a.sum_sq), std::bit_cast<std::uint64_t>(b.sum_sq)) << a.sum_sq << " vs " << b.sum_sq;
  EXPECT_EQ(a.nonfinite_count, b.nonfinite_count);
  EXPECT_EQ(a.nonfinite, b.nonfinite);
}

// FP32 values: normal and wide-range randoms, with specials mixed in at a rate.
std::vector<float> values(std::mt19937_64& rng, std::size_t n, double special_rate) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, 0.0f, -0.0f,
                            std::numeric_limits<float>::denorm_min(), -1e-40f, 65504.0f, 65520.0f, 3e38f, -3e38f};
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> x(n);
  for (float& v : x) {
    if (u(rng) < special_rate) v = specials[rng() % std::size(specials)];
    else if (rng() % 4 == 0) v = std::ldexp(normal(rng), static_cast<int>(rng() % 200) - 100);
    else v = normal(rng);
  }
  return x;
}

template <class T, class Narrow> void check_all(Narrow narrow) {
  std::mt19937_64 rng(7);
  for (std::size_t n : {0u, 1u, 3u, 7u, 8u, 9u, 15u, 16u, 17u, 63u, 1000u, 4099u}) {
    for (double rate : {0.0, 0.01, 0.3, 1.0}) {
      std::vector<T> x;
      for (float v : values(rng, n, rate)) x.push_back(narrow(v));
      for (std::size_t listed : {std::size_t{0}, std::size_t{3}, std::size_t{4096}}) {
        const std::string what = "n=" + std::to_string(n) + " rate=" + std::to_string(rate) + " listed=" + std::to_string(listed);
        FiniteMoments one;
        accumulate(one, std::span<const T>(x), listed);
        const FiniteMoments ref = reference(x, listed);
        expect_same(one, ref, what);
        FiniteMoments pieces;  // in pieces of 5: the state carries over
        for (std::size_t i = 0; i < n; i += 5)
          accumulate(pieces, std::span<const T>(x).subspan(i, std::min<std::size_t>(5, n - i)), listed);
        expect_same(pieces, ref, what + " in pieces");
      }
    }
  }
}

TEST(Moments, F32MatchesTheScalarLoop) { check_all<float>([](float v) { return v; }); }
TEST(Moments, F16MatchesTheScalarLoop) { check_all<f16>(narrow16); }
TEST(Moments, BF16MatchesTheScalarLoop) { check_all<bf16>(narrowb); }

TEST(Moments, MinKeepsTheFirstOfEqualZeros) {
  for (float first : {0.0f, -0.0f}) {
    std::vector<float> x(21, 1.0f);
    x[2] = std::numeric_limits<float>::quiet_NaN();
    x[11] = first;
    x[13] = -first;
    x[19] = first;
    FiniteMoments m;
    accumulate(m, std::span<const float>(x), 8);
    EXPECT_EQ(std::signbit(m.min), std::signbit(first));
    EXPECT_EQ(m.min, 0.0);
    // A later call's zero of the other sign does not replace an earlier minimum of zero.
    const std::vector<float> y = {-first, 2.0f};
    accumulate(m, std::span<const float>(y), 8);
    EXPECT_EQ(std::signbit(m.min), std::signbit(first));
  }
}

TEST(Moments, SumOfSquaresIsAddedInIndexOrderWithinEachOfEightLanes) {
  // Element 0 is 1, the other 63 squares are 2^-54. Lane 0 (elements 0, 8, ..., 56) rounds
  // 1 + 2^-54 back to 1 at every step; lanes 1 .. 7 each sum eight 2^-54 exactly (2^-51); the
  // lanes combine pairwise: 1 + 7 * 2^-51. One chain in index order would give 1, the exact sum
  // 1 + 63 * 2^-54 rounds to 1 + 16 * 2^-52.
  std::vector<float> x(64, 0x1p-27f);
  x[0] = 1.0f;
  FiniteMoments m;
  accumulate(m, std::span<const float>(x), 0);
  EXPECT_EQ(m.sum_sq, 1.0 + 7 * 0x1p-51);
  EXPECT_EQ(m.sq_lanes[0], 1.0);
  EXPECT_EQ(m.sq_lanes[3], 0x1p-51);
  EXPECT_EQ(m.count, 64u);
  // The lanes follow the element index across calls: the same 64 elements from a call that
  // starts at index 3 put element 0's square in lane 3.
  FiniteMoments shifted;
  const std::vector<float> head(3, 0.0f);
  accumulate(shifted, std::span<const float>(head), 0);
  accumulate(shifted, std::span<const float>(x), 0);
  EXPECT_EQ(shifted.sq_lanes[3], 1.0);
  EXPECT_EQ(shifted.sum_sq, 1.0 + 7 * 0x1p-51);
}

TEST(Moments, AllNonFiniteLeavesTheMagnitudesAtZero) {
  const std::vector<float> x = {kInf, -kInf, std::numeric_limits<float>::quiet_NaN()};
  FiniteMoments m;
  accumulate(m, std::span<const float>(x), 2);
  EXPECT_EQ(m.count, 0u);
  EXPECT_EQ(m.nonfinite_count, 3u);
  EXPECT_EQ(m.nonfinite, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(m.max_abs, 0.0);
  EXPECT_EQ(m.min, 0.0);
  EXPECT_EQ(m.sum_sq, 0.0);
}

}  // namespace
}  // namespace probelab::num
