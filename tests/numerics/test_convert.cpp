// Scalar conversions: exhaustive FP16/BF16 round trips, FP32 -> FP16 against the F16C instruction,
// every conversion against the exact reference (value and flags), FP8.
#include <random>
#include <limits>
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "numerics/bf16.h"
#include "numerics/fp16.h"
#include "numerics/fp32.h"
#include "numerics/fp8.h"
#include "tests/numerics/common.h"
#include "tests/numerics/reference.h"

namespace probelab::num {
namespace {

using testing::kModes;
using R = ref::Big;
using ref::BigInt;

std::uint32_t fbits(float x) { return std::bit_cast<std::uint32_t>(x); }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// Reference conversion of an FP32 pattern to a format.
ref::Out ref_from_f32(const ref::Fmt& f, std::uint32_t x, const Mode& m) {
  Flags fl;
  const R::Val v = R::decode(ref::kF32, x, m, fl);
  if (v.nan) {
    const std::uint32_t sign = v.neg ? f.sign() : 0u;
    std::uint32_t nan = f.ieee ? (sign | f.inf_bits() | (1u << (f.fbits() - 1)) | ((x & 0x7FFFFFu) >> (23 - f.fbits())))
                               : (sign | f.qnan());
    return {m.overflow == OverflowMode::Saturation ? 0u : nan, fl};
  }
  if (v.inf && !f.ieee) fl.set(Flag::Overflow);
  return R::round(f, v, m, fl);
}

// Edge-case FP32 inputs for FP32 -> FP16: around every FP16 exponent boundary, every halfway point
// between adjacent FP16 values (+-1 FP32 ulp), subnormals, zeros, Inf and NaN payloads.
std::vector<std::uint32_t> f16_edge_inputs() {
  std::vector<std::uint32_t> v;
  for (std::uint32_t h = 0; h < 0x7C00; ++h) {
    const float lo = _cvtsh_ss(static_cast<unsigned short>(h));
    const float hi = _cvtsh_ss(static_cast<unsigned short>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);  // exact in FP32
    for (float x : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      v.push_back(fbits(x));
      v.push_back(fbits(x) | 0x80000000u);
    }
  }
  for (int e = -30; e <= 17; ++e) {
    const float p = std::ldexp(1.0f, e);
    for (float x : {p, std::nextafter(p, 0.0f), std::nextafter(p, 1e30f)}) v.push_back(fbits(x));
  }
  for (std::uint32_t x : {0u, 1u, 0x7FFFFFu, 0x800000u, 0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u,
                          0x7F7FFFFFu, 0x7F800000u, 0x7F800001u, 0x7FA00000u, 0x7FC00000u, 0x7FC00001u, 0x7FFFFFFFu,
                          0x7F802000u, 0x7FBFE000u, 0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x387FC000u, 0x387FE000u}) {
    v.push_back(x);
    v.push_back(x | 0x80000000u);
  }
  return v;
}

TEST(Fp16Convert, ExhaustiveRoundTripThroughFp32) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const f16 x{static_cast<std::uint16_t>(h)};
    const Result<float> w = to_f32(x);
    ASSERT_EQ(fbits(w.value), fbits(_cvtsh_ss(static_cast<unsigned short>(h)))) << std::hex << h;
    ASSERT_EQ(fbits(to_float(x)), fbits(w.value)) << std::hex << h;
    Flags expect;
    if (is_snan(x)) expect.set(Flag::Invalid);
    if (is_subnormal(x)) expect.set(Flag::DenormalIn);
    ASSERT_EQ(w.flags, expect) << std::hex << h;
    const Result<f16> back = to_f16(w.value);
    const std::uint16_t want = is_snan(x) ? static_cast<std::uint16_t>(h | 0x0200u) : static_cast<std::uint16_t>(h);
    ASSERT_EQ(back.value.bits, want) << std::hex << h;
    // Exact; a subnormal result is still reported as such.
    ASSERT_EQ(back.flags, is_subnormal(x) ? Flags(Flag::DenormalOut) : Flags()) << std::hex << h;
  }
}

TEST(Fp16Convert, Fp32ToFp16MatchesF16cAndReference) {
  std::vector<std::uint32_t> inputs = f16_edge_inputs();
  std::mt19937_64 rng(0x5eed16);
  for (int i = 0; i < 1'000'000; ++i) {
    const auto u = static_cast<std::uint32_t>(rng());
    // half fully random patterns, half concentrated on the FP16 range (|exp| <= 17)
    inputs.push_back((i & 1) ? u : ((u & 0x807FFFFFu) | ((100u + (u >> 23) % 50u) << 23)));
  }
  for (std::uint32_t x : inputs) {
    const Result<f16> r = to_f16(from_bits(x));
    ASSERT_EQ(r.value.bits, _cvtss_sh(from_bits(x), _MM_FROUND_TO_NEAREST_INT)) << std::hex << x;
    const ref::Out e = ref_from_f32(ref::kF16, x, Mode{});
    ASSERT_EQ(r.value.bits, e.bits) << std::hex << x;
    ASSERT_EQ(r.flags, e.flags) << std::hex << x << " got " << to_string(r.flags) << " want " << to_string(e.flags);
  }
}

TEST(Fp16Convert, AllModesAgainstReference) {
  std::vector<std::uint32_t> inputs = f16_edge_inputs();
  std::mt19937_64 rng(42);
  for (int i = 0; i < 100'000; ++i) inputs.push_back(static_cast<std::uint32_t>(rng()));
  for (const Mode& m : kModes) {
    for (std::size_t i = 0; i < inputs.size(); i += (m == Mode{} ? 1 : 3)) {
      const std::uint32_t x = inputs[i];
      const Result<f16> r = to_f16(from_bits(x), m);
      const ref::Out e = ref_from_f32(ref::kF16, x, m);
      ASSERT_EQ(r.value.bits, e.bits) << std::hex << x << " " << testing::mode_name(m);
      ASSERT_EQ(r.flags, e.flags) << std::hex << x << " " << testing::mode_name(m) << " got " << to_string(r.flags)
                                  << " want " << to_string(e.flags);
    }
    for (std::uint32_t h = 0; h < 0x10000; ++h) {  // widening in every mode
      Flags fl;
      const R::Val v = R::decode(ref::kF16, h, m, fl);
      const Result<float> w = to_f32(f16{static_cast<std::uint16_t>(h)}, m);
      ASSERT_EQ(w.flags, fl) << std::hex << h;
      if (v.nan) {
        ASSERT_EQ(fbits(w.value), m.overflow == OverflowMode::Saturation ? 0u : fbits(_cvtsh_ss(static_cast<unsigned short>(h))));
      } else if (v.inf) {
        ASSERT_EQ(std::fabs(w.value), m.overflow == OverflowMode::Saturation ? 0x1.fffffep127f : INFINITY);
      } else {
        const ref::Out e = R::round(ref::kF32, v, m, {});
        ASSERT_EQ(fbits(w.value), e.bits) << std::hex << h;
      }
    }
  }
}

// to_f16_value (round to odd to FP32, then F16C) against to_f16(double): random bit patterns and
// normal samples, every FP16 value and midpoint with the doubles a few ulps either side (where a
// double rounding would go wrong), the range ends, subnormals, infinities and NaNs.
TEST(Fp16Convert, ValueFromDoubleEqualsTheCorrectlyRoundedConversion) {
  std::vector<double> xs;
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> nd(0.0, 3.0);
  for (int i = 0; i < 400000; ++i) {
    xs.push_back(std::bit_cast<double>(rng()));
    xs.push_back(nd(rng));
    xs.push_back(nd(rng) * 1e4);
  }
  for (std::uint32_t h = 0; h < 0x7C00; ++h) {
    const double v = static_cast<double>(to_float(f16{static_cast<std::uint16_t>(h)}));
    const double next = static_cast<double>(to_float(f16{static_cast<std::uint16_t>(h + 1)}));
    for (const double base : {v, (v + next) / 2}) {
      double up = base, down = base;
      for (int k = 0; k < 4; ++k) {
        for (const double x : {up, down, -up, -down}) xs.push_back(x);
        up = std::nextafter(up, INFINITY);
        down = std::nextafter(down, -INFINITY);
      }
      // and an FP32 ulp away (the first rounding's own midpoints)
      xs.push_back(base + std::ldexp(std::abs(base), -24));
      xs.push_back(base - std::ldexp(std::abs(base), -24));
    }
  }
  for (const double x : std::initializer_list<double>{65504.0, 65519.99999999999, 65520.0, 65520.00000000001, 1e300, -1e300, 3.4028235677973366e38,
                         3.4028235677973366e38 * 2, 0x1p-24, 0x1p-25, std::nextafter(0x1p-25, 1.0), 0x1p-1074,
                         -0x1p-1074, 0x1p-1022, 0x1p-149, 0x1p-150, 0.0, -0.0, INFINITY, -INFINITY,
                         std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                         std::bit_cast<double>(0x7FF0000000000001ULL), std::bit_cast<double>(0xFFF8000000000123ULL)})
    xs.push_back(x);
  for (const double x : xs)
    ASSERT_EQ(to_f16_value(x).bits, to_f16(x).value.bits) << std::hexfloat << x;
  // The bulk conversion, at every offset from the start (so that each value meets each lane and
  // the scalar tail), equals the one-value conversion; the NaNs share blocks with other values.
  for (std::size_t start = 0; start < 9; ++start) {
    const std::span<const double> in = std::span<const double>(xs).subspan(start);
    std::vector<f16> out(in.size());
    to_f16_values(in, out);
    for (std::size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(out[i].bits, to_f16_value(in[i]).bits) << std::hexfloat << in[i] << " at " << start + i;
  }
}

TEST(Bf16Convert, ExhaustiveRoundTripAndReference) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const bf16 x{static_cast<std::uint16_t>(h)};
    const Result<float> w = to_f32(x);
    const std::uint32_t want32 = (h << 16) | (is_nan(x) ? 0x00400000u : 0u);
    ASSERT_EQ(fbits(w.value), want32) << std::hex << h;
    ASSERT_EQ(fbits(to_float(x)), want32);
    const Result<bf16> back = to_bf16(w.value);
    ASSERT_EQ(back.value.bits, is_snan(x) ? (h | 0x40u) : h) << std::hex << h;
    ASSERT_EQ(back.flags, is_subnormal(x) ? Flag::DenormalIn | Flag::DenormalOut : Flags()) << std::hex << h;
  }
  std::mt19937_64 rng(7);
  for (const Mode& m : kModes) {
    for (int i = 0; i < 300'000; ++i) {
      const auto x = static_cast<std::uint32_t>(rng());
      const Result<bf16> r = to_bf16(from_bits(x), m);
      const ref::Out e = ref_from_f32(ref::kBF16, x, m);
      ASSERT_EQ(r.value.bits, e.bits) << std::hex << x << " " << testing::mode_name(m);
      ASSERT_EQ(r.flags, e.flags) << std::hex << x << " got " << to_string(r.flags) << " want " << to_string(e.flags);
    }
  }
}

TEST(Fp32Convert, FromDoubleAgainstReference) {
  std::mt19937_64 rng(99);
  for (const Mode& m : kModes) {
    for (int i = 0; i < 100'000; ++i) {
      // doubles in and around the FP32 range, plus exact FP32 midpoints
      const std::uint64_t u = rng();
      const int e = static_cast<int>(u % 320) - 170;
      double d = std::ldexp(1.0 + static_cast<double>(u >> 12) * 0x1p-52, e);
      if (i % 4 == 0) d = static_cast<double>(from_bits(static_cast<std::uint32_t>(u >> 32))) * (1 + 0x1p-24);
      if (u & 1) d = -d;
      if (std::isnan(d)) continue;
      const Result<float> r = to_f32(d, m);
      int ex = 0;
      const double fr = std::frexp(std::fabs(d), &ex);
      R::Val v;
      v.neg = std::signbit(d);
      if (std::isinf(d)) {
        v.inf = true;
      } else if (fr != 0) {
        v.num = BigInt(static_cast<std::uint64_t>(std::ldexp(fr, 53)));
        v.exp = ex - 53;
      }
      const ref::Out want = R::round(ref::kF32, v, m, {});
      ASSERT_EQ(fbits(r.value), want.bits) << d << " " << testing::mode_name(m);
      ASSERT_EQ(r.flags, want.flags) << d << " got " << to_string(r.flags) << " want " << to_string(want.flags);
    }
  }
}

TEST(Fp8Convert, E4M3Encoding) {
  EXPECT_EQ(to_float(fp8_e4m3{0x7E}), 448.0f);
  EXPECT_EQ(to_float(fp8_e4m3{0x01}), 0x1p-9f);
  EXPECT_EQ(to_float(fp8_e4m3{0x08}), 0x1p-6f);
  EXPECT_EQ(to_float(fp8_e4m3{0x78}), 256.0f);
  EXPECT_TRUE(std::isnan(to_float(fp8_e4m3{0x7F})));
  EXPECT_TRUE(std::isnan(to_float(fp8_e4m3{0xFF})));
  EXPECT_EQ(to_float(fp8_e4m3{0xFE}), -448.0f);
  // 464 is the tie between 448 and (non-existent) 480: ties to even -> 448, no overflow.
  EXPECT_EQ(to_e4m3(464.0).value.bits, 0x7E);
  EXPECT_EQ(to_e4m3(464.0).flags, Flags(Flag::Inexact));
  EXPECT_EQ(to_e4m3(465.0).value.bits, 0x7F);
  EXPECT_EQ(to_e4m3(465.0).flags, Flag::Overflow | Flag::Inexact);
  EXPECT_EQ(to_e4m3(-465.0, kSaturationMode).value.bits, 0xFE);
  EXPECT_EQ(to_e4m3(INFINITY).value.bits, 0x7F);
  EXPECT_EQ(to_e4m3(INFINITY).flags, Flags(Flag::Overflow));
  EXPECT_EQ(to_e4m3(-INFINITY, kSaturationMode).value.bits, 0xFE);
  EXPECT_EQ(to_e4m3(NAN, kSaturationMode).value.bits, 0x00);
  EXPECT_EQ(to_e4m3(-NAN).value.bits, 0xFF);
}

TEST(Fp8Convert, E5M2Encoding) {
  EXPECT_EQ(to_float(fp8_e5m2{0x7B}), 57344.0f);
  EXPECT_EQ(to_float(fp8_e5m2{0x01}), 0x1p-16f);
  EXPECT_TRUE(std::isinf(to_float(fp8_e5m2{0x7C})));
  EXPECT_EQ(to_e5m2(61440.0).value.bits, 0x7C);  // tie above max rounds to even: overflow
  EXPECT_EQ(to_e5m2(61439.0).value.bits, 0x7B);
  EXPECT_EQ(to_e5m2(1e6, kSaturationMode).value.bits, 0x7B);
  EXPECT_EQ(to_e5m2(1e6, kSaturationMode).flags, Flag::Overflow | Flag::Inexact);
}

TEST(Fp8Convert, ExhaustiveAgainstReference) {
  std::mt19937_64 rng(8);
  for (const Mode& m : kModes) {
    for (std::uint32_t b = 0; b < 256; ++b) {
      for (const ref::Fmt* f : {&ref::kE4M3, &ref::kE5M2}) {
        Flags fl;
        const R::Val v = R::decode(*f, b, m, fl);
        const Result<float> w = f == &ref::kE4M3 ? to_f32(fp8_e4m3{static_cast<std::uint8_t>(b)}, m)
                                                 : to_f32(fp8_e5m2{static_cast<std::uint8_t>(b)}, m);
        ASSERT_EQ(w.flags, fl) << b;
        if (!v.nan && !v.inf) {
          ASSERT_EQ(fbits(w.value), R::round(ref::kF32, v, m, {}).bits) << b;
        }
        // round trip of every finite value
        if (!v.nan && !v.inf && m == Mode{}) {
          const std::uint32_t back = f == &ref::kE4M3 ? to_e4m3(w.value).value.bits : to_e5m2(w.value).value.bits;
          ASSERT_EQ(back, b);
        }
      }
    }
    for (int i = 0; i < 50'000; ++i) {
      const auto u = static_cast<std::uint32_t>(rng());
      const std::uint32_t x = (u & 0x807FFFFFu) | ((110u + (u >> 23) % 40u) << 23);
      const ref::Out e4 = ref_from_f32(ref::kE4M3, x, m);
      const ref::Out e5 = ref_from_f32(ref::kE5M2, x, m);
      const auto r4 = to_e4m3(from_bits(x), m);
      const auto r5 = to_e5m2(from_bits(x), m);
      ASSERT_EQ(r4.value.bits, e4.bits) << std::hex << x;
      ASSERT_EQ(r4.flags, e4.flags) << std::hex << x << " " << to_string(r4.flags) << " vs " << to_string(e4.flags);
      ASSERT_EQ(r5.value.bits, e5.bits) << std::hex << x;
      ASSERT_EQ(r5.flags, e5.flags) << std::hex << x;
    }
  }
}

TEST(Fp32Deliver, ModeOnFp32Results) {
  EXPECT_EQ(deliver(0x1p-130f).flags, Flags(Flag::DenormalOut));
  EXPECT_EQ(deliver(0x1p-130f).value, 0x1p-130f);
  const Mode ftz{OverflowMode::InfNan, DenormalMode::FlushToZero};
  EXPECT_EQ(fbits(deliver(-0x1p-130f, ftz).value), 0x80000000u);
  EXPECT_EQ(deliver(-0x1p-130f, ftz).flags, Flag::DenormalOut | Flag::Underflow | Flag::Inexact);
  EXPECT_EQ(deliver(-INFINITY, kSaturationMode).value, -0x1.fffffep127f);
  EXPECT_EQ(fbits(deliver(NAN, kSaturationMode).value), 0u);
  EXPECT_TRUE(deliver(INFINITY, kSaturationMode).flags.none());
}

}  // namespace
}  // namespace probelab::num
