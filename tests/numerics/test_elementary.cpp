// The reference kernels' elementary functions (numerics/elementary.h): a float argument gives the
// float nearest the exact value (checked against an evaluation in extended precision rounded
// once), whatever the C library's float function gives, so the bits do not depend on which C
// library the simulator runs on. Special values keep their IEEE meaning.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "numerics/elementary.h"

namespace probelab::num {
namespace {

struct Fn {
  std::string name;
  std::function<float(float)> ours;
  std::function<long double(long double)> extended;
  std::function<float(float)> libc_float;
  float lo, hi;  // sampled domain
};

std::uint32_t bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

std::vector<Fn> functions() {
  const float big = 88.0f;
#define PROBELAB_FN(NAME, LO, HI)                                                                  \
  Fn {                                                                                             \
    #NAME, [](float x) { return num::NAME(x); }, [](long double x) { return std::NAME(x); },   \
        [](float x) { return std::NAME(x); }, LO, HI                                               \
  }
  return {PROBELAB_FN(exp, -104.0f, big),   PROBELAB_FN(expm1, -30.0f, big),  PROBELAB_FN(log, 0.0f, 1e30f),
          PROBELAB_FN(log1p, -1.0f, 1e30f), PROBELAB_FN(erf, -5.0f, 5.0f),    PROBELAB_FN(tanh, -12.0f, 12.0f),
          PROBELAB_FN(sin, -1e4f, 1e4f),    PROBELAB_FN(cos, -1e4f, 1e4f),    PROBELAB_FN(tan, -1e4f, 1e4f),
          PROBELAB_FN(asin, -1.0f, 1.0f),   PROBELAB_FN(acos, -1.0f, 1.0f),   PROBELAB_FN(atan, -1e6f, 1e6f),
          PROBELAB_FN(sinh, -big, big),     PROBELAB_FN(cosh, -big, big),     PROBELAB_FN(asinh, -1e30f, 1e30f),
          PROBELAB_FN(acosh, 1.0f, 1e30f),  PROBELAB_FN(atanh, -1.0f, 1.0f)};
#undef PROBELAB_FN
}

// Arguments: uniform over the domain, uniform in magnitude (log-spaced bit patterns) and near zero.
std::vector<float> samples(const Fn& f, std::mt19937& gen) {
  std::vector<float> xs;
  std::uniform_real_distribution<float> lin(f.lo, f.hi);
  std::uniform_int_distribution<std::uint32_t> pattern(0, 0x7f7fffffu);
  for (int i = 0; i < 60000; ++i) xs.push_back(lin(gen));
  for (int i = 0; i < 60000; ++i) {
    float x;
    const std::uint32_t b = pattern(gen) | (i % 2 ? 0x80000000u : 0u);
    std::memcpy(&x, &b, sizeof x);
    if (x >= f.lo && x <= f.hi) xs.push_back(x);
  }
  for (int e = -149; e <= 0; ++e) xs.push_back(std::ldexp(1.0f, e) * (e % 2 ? -1.0f : 1.0f));
  return xs;
}

TEST(Elementary, FloatArgumentsGiveTheNearestFloat) {
  std::mt19937 gen(2024);
  for (const Fn& f : functions()) {
    int checked = 0, libc_differs = 0;
    for (float x : samples(f, gen)) {
      if (!(x >= f.lo && x <= f.hi)) continue;
      const long double exact = f.extended(static_cast<long double>(x));
      if (!std::isfinite(exact)) continue;
      const float want = static_cast<float>(exact);
      const float got = f.ours(x);
      ASSERT_EQ(bits(got), bits(want)) << f.name << "(" << x << "): " << got << " vs " << want;
      ++checked;
      if (bits(f.libc_float(x)) != bits(want)) ++libc_differs;
    }
    EXPECT_GT(checked, 60000) << f.name;
    // What the C library's own float function does here (0 on a correctly rounded one).
    RecordProperty(f.name + "_libc_float_differs", libc_differs);
  }
}

TEST(Elementary, SpecialValuesKeepTheirMeaning) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(num::exp(-inf), 0.0f);
  EXPECT_EQ(num::exp(inf), inf);
  EXPECT_EQ(num::exp(89.0f), inf);  // overflows in float though not in double
  EXPECT_EQ(num::exp(-110.0f), 0.0f);
  EXPECT_EQ(num::log(0.0f), -inf);
  EXPECT_TRUE(std::isnan(num::log(-1.0f)));
  EXPECT_EQ(num::tanh(inf), 1.0f);
  EXPECT_EQ(num::erf(-inf), -1.0f);
  EXPECT_EQ(num::pow(2.0f, 3.0f), 8.0f);
  EXPECT_EQ(num::pow(0.0f, -1.0f), inf);
  for (auto f : {+[](float x) { return num::erf(x); }, +[](float x) { return num::tanh(x); },
                 +[](float x) { return num::sin(x); }, +[](float x) { return num::atan(x); },
                 +[](float x) { return num::expm1(x); }, +[](float x) { return num::log1p(x); }}) {
    EXPECT_EQ(bits(f(-0.0f)), bits(-0.0f));
    EXPECT_EQ(bits(f(0.0f)), bits(0.0f));
    EXPECT_TRUE(std::isnan(f(nan)));
  }
}

// num::pow(x, 2) squares in double instead of calling pow: the same float as the double pow of
// the widened argument rounded once (checked once over all 2^32 patterns; here every 257th
// pattern, both signs, zeros, subnormals, infinities and NaN).
TEST(Elementary, SquaresAreWhatPowGives) {
  volatile double two = 2.0;  // not folded: the library's pow itself is called
  std::uint64_t checked = 0;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 257) {
    for (const std::uint32_t pattern : {static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b) ^ 0x80000000u}) {
      float x;
      std::memcpy(&x, &pattern, sizeof x);
      const float want = static_cast<float>(std::pow(static_cast<double>(x), two));
      const float got = num::pow(x, 2.0f);
      if (std::isnan(x)) {
        ASSERT_TRUE(std::isnan(got)) << pattern;
        continue;
      }
      ASSERT_EQ(bits(got), bits(want)) << x;
      ++checked;
    }
  }
  EXPECT_GT(checked, 33000000u);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(num::pow(-inf, 2.0f), inf);
  EXPECT_EQ(bits(num::pow(-0.0f, 2.0f)), bits(0.0f));
  EXPECT_EQ(num::pow(std::numeric_limits<float>::max(), 2.0f), inf);
  EXPECT_EQ(num::pow(std::numeric_limits<float>::denorm_min(), 2.0f), 0.0f);
  EXPECT_EQ(num::pow(-3.0f, 2.0f), 9.0f);
}

TEST(Elementary, DoubleArgumentsGoToTheDoubleFunctions) {
  for (double x : {-3.5, -1e-300, 0.25, 1.0, 7.75, 700.0}) {
    EXPECT_EQ(num::exp(x), std::exp(x));
    EXPECT_EQ(num::tanh(x), std::tanh(x));
    EXPECT_EQ(num::erf(x), std::erf(x));
    EXPECT_EQ(num::pow(std::fabs(x), 0.5), std::pow(std::fabs(x), 0.5));
  }
}

}  // namespace
}  // namespace probelab::num
