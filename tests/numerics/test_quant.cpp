// Quantization (numerics/quant.h): every code of every format against an independent decoding,
// rounding at every midpoint, saturation and NaN rules, scale choice, per-channel params.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "numerics/quant.h"

namespace probelab::num {
namespace {

// Value of an 8-bit OCP code from its bit fields, written from the OCP OFP8 definition.
double decode_ocp(std::uint32_t bits, int ebits) {
  const int mbits = 7 - ebits;
  const int bias = (1 << (ebits - 1)) - 1;
  const double sign = (bits & 0x80u) ? -1.0 : 1.0;
  const std::uint32_t e = (bits >> mbits) & ((1u << ebits) - 1);
  const std::uint32_t m = bits & ((1u << mbits) - 1);
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), 1 - bias - mbits);
  return sign * std::ldexp(static_cast<double>((1u << mbits) | m), static_cast<int>(e) - bias - mbits);
}
bool is_special(std::uint32_t bits, int ebits) {
  if (ebits == 4) return (bits & 0x7Fu) == 0x7Fu;  // E4M3: only NaN
  return ((bits >> 2) & 0x1Fu) == 0x1Fu;            // E5M2: Inf and NaN
}

struct Fp8Case {
  QuantFormat format;
  int ebits;
  double max;
};
const Fp8Case kFp8[] = {{QuantFormat::E4M3, 4, 448.0}, {QuantFormat::E5M2, 5, 57344.0}};

TEST(QuantFp8, EveryCodeRoundTripsAtTwoScales) {
  for (const Fp8Case& fc : kFp8) {
    for (float scale : {1.0f, 0.125f, 64.0f}) {
      const QuantParams p = params_with_scale(fc.format, scale);
      int finite = 0;
      for (std::uint32_t b = 0; b < 256; ++b) {
        if (is_special(b, fc.ebits)) continue;
        ++finite;
        const double v = decode_ocp(b, fc.ebits);
        const auto x = static_cast<float>(v * scale);
        const Result<std::int32_t> c = quantize_code(x, p);
        EXPECT_EQ(c.value, static_cast<std::int32_t>(b)) << quant_format_name(fc.format) << " code " << b;
        const bool subnormal = ((b >> (7 - fc.ebits)) & ((1u << fc.ebits) - 1)) == 0 && (b & 0x7Fu) != 0;
        EXPECT_EQ(c.flags, subnormal ? Flags(Flag::DenormalOut) : Flags())
            << quant_format_name(fc.format) << " code " << b << ": " << to_string(c.flags);
        const Result<float> q = quantize(x, p);
        EXPECT_EQ(static_cast<double>(q.value), v);
        EXPECT_EQ(static_cast<double>(dequantize(q.value, p)), static_cast<double>(x));
      }
      EXPECT_EQ(finite, fc.ebits == 4 ? 254 : 248);
    }
  }
}

TEST(QuantFp8, EveryMidpointRoundsToEvenAndNeighboursToNearest) {
  for (const Fp8Case& fc : kFp8) {
    const QuantParams p = params_with_scale(fc.format, 1.0f);
    for (std::uint32_t sign : {0x00u, 0x80u}) {
      for (std::uint32_t b = 0; b < 0x7Fu; ++b) {
        const std::uint32_t lo = sign | b, hi = sign | (b + 1);
        if (is_special(hi, fc.ebits)) continue;
        const double vl = decode_ocp(lo, fc.ebits), vh = decode_ocp(hi, fc.ebits);
        const double mid = (vl + vh) / 2;  // exact: one more bit than the format
        const auto m = static_cast<float>(mid);
        ASSERT_EQ(static_cast<double>(m), mid);
        const std::uint32_t even = (lo & 1u) == 0 ? lo : hi;
        const Result<std::int32_t> at = quantize_code(m, p);
        EXPECT_EQ(at.value, static_cast<std::int32_t>(even)) << quant_format_name(fc.format) << " midpoint of " << lo;
        EXPECT_TRUE(at.flags.has(Flag::Inexact));
        EXPECT_FALSE(at.flags.has(Flag::Overflow));
        const float below = std::nextafter(m, static_cast<float>(vl));
        const float above = std::nextafter(m, static_cast<float>(vh));
        EXPECT_EQ(quantize_code(below, p).value, static_cast<std::int32_t>(lo));
        EXPECT_EQ(quantize_code(above, p).value, static_cast<std::int32_t>(hi));
      }
    }
  }
}

TEST(QuantFp8, SaturatesBeyondMaxKeepsNaN) {
  for (const Fp8Case& fc : kFp8) {
    const QuantParams p = params_with_scale(fc.format, 1.0f);
    const std::int32_t max_code = fc.ebits == 4 ? 0x7E : 0x7B;
    // The tie just above max: E4M3 (464) rounds down to the even max; E5M2 (61440) rounds up
    // to the even (overflowing) neighbour and saturates.
    const double half_ulp_above = fc.ebits == 4 ? 464.0 : 61440.0;
    const Result<std::int32_t> tie = quantize_code(static_cast<float>(half_ulp_above), p);
    EXPECT_EQ(tie.value, max_code);
    EXPECT_EQ(tie.flags.has(Flag::Overflow), fc.ebits == 5);
    for (float big : {static_cast<float>(fc.max * 4), 3.0e38f, INFINITY}) {
      const Result<std::int32_t> r = quantize_code(big, p);
      EXPECT_EQ(r.value, max_code) << big;
      EXPECT_TRUE(r.flags.has(Flag::Overflow)) << big;
      EXPECT_EQ(quantize_code(-big, p).value, max_code | 0x80);
    }
    EXPECT_TRUE(std::isnan(quantize(NAN, p).value));
    EXPECT_TRUE(quantize(NAN, p).flags.none());
  }
}

struct IntCase {
  QuantFormat format;
  bool symmetric;
  int qmin, qmax;
};
const IntCase kInts[] = {{QuantFormat::Int8, true, -127, 127},
                         {QuantFormat::Int8, false, -128, 127},
                         {QuantFormat::Int4, true, -7, 7},
                         {QuantFormat::Int4, false, -8, 7}};

QuantParams int_params(const IntCase& ic, float scale, std::int32_t zp) {
  QuantParams p = params_with_scale(ic.format, scale);
  p.symmetric = ic.symmetric;
  p.zero_point = zp;
  return p;
}

TEST(QuantInt, EveryCodeMidpointAndSaturation) {
  for (const IntCase& ic : kInts) {
    for (std::int32_t zp : ic.symmetric ? std::vector<std::int32_t>{0} : std::vector<std::int32_t>{0, -37, 5}) {
      if (zp < ic.qmin || zp > ic.qmax) continue;
      const QuantParams p = int_params(ic, 0.25f, zp);
      for (int q = ic.qmin; q <= ic.qmax; ++q) {
        const auto x = static_cast<float>((q - zp) * 0.25);
        const Result<std::int32_t> c = quantize_code(x, p);
        EXPECT_EQ(c.value, q);
        EXPECT_TRUE(c.flags.none());
        EXPECT_EQ(quantize(x, p).value, static_cast<float>(q - zp));
        if (q == ic.qmax) continue;
        const auto mid = static_cast<float>((q - zp + 0.5) * 0.25);
        const Result<std::int32_t> m = quantize_code(mid, p);
        const int even = ((q - zp) % 2 == 0) ? q : q + 1;  // ties to an even q - zero_point
        EXPECT_EQ(m.value, even) << quant_format_name(ic.format) << " zp " << zp << " q " << q;
        EXPECT_EQ(m.flags, Flags(Flag::Inexact));
        EXPECT_EQ(quantize_code(std::nextafter(mid, -INFINITY), p).value, q);
        EXPECT_EQ(quantize_code(std::nextafter(mid, INFINITY), p).value, q + 1);
      }
      const auto over = static_cast<float>((ic.qmax - zp + 1) * 0.25);
      const Result<std::int32_t> hi = quantize_code(over, p);
      EXPECT_EQ(hi.value, ic.qmax);
      EXPECT_EQ(hi.flags, Flag::Overflow | Flag::Inexact);
      // Half a step above the top code rounds up to qmax + 1: saturated.
      EXPECT_TRUE(quantize_code(static_cast<float>((ic.qmax - zp + 0.5) * 0.25), p).flags.has(Flag::Overflow) ==
                  ((ic.qmax - zp) % 2 != 0));
      EXPECT_EQ(quantize_code(static_cast<float>((ic.qmin - zp - 1) * 0.25), p).value, ic.qmin);
      EXPECT_EQ(quantize_code(-INFINITY, p).value, ic.qmin);
      EXPECT_EQ(quantize_code(-INFINITY, p).flags, Flags(Flag::Overflow));
      const Result<std::int32_t> nan = quantize_code(NAN, p);
      EXPECT_EQ(nan.value, zp);
      EXPECT_EQ(nan.flags, Flags(Flag::Invalid));
    }
  }
}

TEST(QuantInt, RandomValuesLandWithinHalfAStep) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.0f, 5.0f);
  for (const IntCase& ic : kInts) {
    const Result<QuantParams> r = choose_scale(ic.format, ic.symmetric, -3.0, 5.0);
    ASSERT_TRUE(r.flags.none());
    const QuantParams& p = r.value;
    for (int i = 0; i < 2000; ++i) {
      const float x = u(rng);
      const Result<float> q = quantize(x, p);
      EXPECT_FALSE(q.flags.has(Flag::Overflow)) << x;
      // scale * 0.5 plus the FP32 rounding of x * inv_scale and of the dequantization
      EXPECT_LE(std::fabs(dequantize(q.value, p) - x), p.scale * 0.5 * (1 + 1e-5)) << x;
    }
  }
}

TEST(QuantScale, SymmetricAsymmetricAndDegenerate) {
  const QuantParams s = choose_scale(QuantFormat::Int8, true, -12.7, 3.0).value;
  EXPECT_EQ(s.scale, static_cast<float>(12.7 / 127));
  EXPECT_EQ(s.zero_point, 0);
  EXPECT_EQ(quantize_code(-12.7f, s).value, -127);
  const QuantParams a = choose_scale(QuantFormat::Int8, false, -1.0, 3.0).value;
  EXPECT_EQ(a.scale, static_cast<float>(4.0 / 255));
  EXPECT_EQ(a.zero_point, -64);  // rne(-128 + 1 / scale) = rne(-64.25)
  EXPECT_EQ(quantize_code(-1.0f, a).value, -128);
  EXPECT_EQ(quantize_code(3.0f, a).value, 127);
  EXPECT_EQ(quantize_code(0.0f, a).value, -64);  // zero is exact
  const QuantParams e = choose_scale(QuantFormat::E4M3, true, -2.0, 896.0).value;
  EXPECT_EQ(e.scale, 2.0f);
  EXPECT_EQ(quantize(896.0f, e).value, 448.0f);
  EXPECT_EQ(choose_scale(QuantFormat::Int4, true, 0.0, 0.0).value.scale, 1.0f);
  EXPECT_TRUE(choose_scale(QuantFormat::Int8, true, -INFINITY, 1.0).flags.has(Flag::Invalid));
  EXPECT_THROW(choose_scale(QuantFormat::E5M2, false, -1.0, 1.0), std::invalid_argument);
  EXPECT_THROW(params_with_scale(QuantFormat::Int8, 0.0f), std::invalid_argument);
  EXPECT_EQ(parse_quant_format("int4"), QuantFormat::Int4);
  EXPECT_THROW(parse_quant_format("int2"), std::invalid_argument);
}

TEST(QuantSpan, PerChannelBeatsPerTensorOnUnevenChannels) {
  // Two channels of 64 elements: channel 0 in [-1, 1], channel 1 in [-100, 100].
  std::vector<float> x(128);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = u(rng) * (i < 64 ? 1.0f : 100.0f);
  x[0] = 1.0f;
  x[64] = 100.0f;
  auto error_of_channel0 = [&](std::int64_t channels) {
    std::vector<float> q = x;
    const std::vector<QuantParams> ps = choose_params(x, QuantFormat::Int8, true, channels, 64);
    EXPECT_EQ(ps.size(), static_cast<std::size_t>(channels));
    const QuantStats st = quantize_span(q, ps, 64);
    EXPECT_EQ(st.elements, 128u);
    EXPECT_EQ(st.saturated, 0u);
    EXPECT_EQ(st.amax, 100.0);
    double err = 0;
    for (std::size_t i = 0; i < 64; ++i) err = std::max(err, std::fabs(dequantize(q[i], ps[0]) - x[i]) * 1.0);
    return err;
  };
  const double per_tensor = error_of_channel0(1), per_channel = error_of_channel0(2);
  EXPECT_LE(per_channel, 0.5 / 127 * 1.0001);
  EXPECT_GT(per_tensor, 20 * per_channel);
  // A fixed scale too small for the data saturates and counts it.
  std::vector<float> q = x;
  const QuantParams fixed = params_with_scale(QuantFormat::Int8, 0.01f);
  const QuantStats st = quantize_span(q, std::span(&fixed, 1), 1);
  EXPECT_GT(st.saturated, 60u);
  EXPECT_TRUE(st.flags.has(Flag::Overflow));
  EXPECT_THROW(quantize_span(q, {}, 1), std::invalid_argument);
}

TEST(QuantSpan, CountsSaturatedFlushedAndSubnormalCodes) {
  // E4M3 with scale 1: 500 saturates (448), 2^-11 flushes to zero (below half the smallest
  // subnormal 2^-9), 2^-8 is a subnormal code, 1.5 is normal, 0 is neither.
  std::vector<float> x = {1.5f, 500.0f, std::ldexp(1.0f, -11), std::ldexp(1.0f, -8), 0.0f, -600.0f};
  const QuantParams p = params_with_scale(QuantFormat::E4M3, 1.0f);
  const QuantStats s = quantize_span(x, std::span<const QuantParams>(&p, 1), 1);
  EXPECT_EQ(s.saturated, 2u);
  EXPECT_EQ(s.first_saturated, 1);
  EXPECT_EQ(s.first_saturated_value, 500.0f);
  EXPECT_EQ(s.underflow, 1u);
  EXPECT_EQ(s.subnormal, 1u);
  EXPECT_EQ(s.amax, 600.0);
  EXPECT_EQ(x[1], 448.0f);
  EXPECT_EQ(x[5], -448.0f);
  EXPECT_EQ(x[2], 0.0f);
}

TEST(QuantDelayed, TransformerEngineScaleFromTheHistory) {
  // The first step uses multiplier 1 (TE's initial scale); each update pushes the amax and
  // takes qmax / amax_h / 2^margin, computed in FP32 as TE does.
  DelayedScalingState st{1.0f, std::vector<float>(4, 0.0f)};
  EXPECT_EQ(delayed_params(QuantFormat::E4M3, st).inv_scale, 1.0f);
  delayed_update(QuantFormat::E4M3, st, 3.0f, AmaxAlgorithm::Max, 0);
  EXPECT_EQ(st.multiplier, static_cast<float>(448.0 / 3.0));
  EXPECT_EQ(st.history, (std::vector<float>{3.0f, 0.0f, 0.0f, 0.0f}));
  const QuantParams p = delayed_params(QuantFormat::E4M3, st);
  EXPECT_EQ(p.inv_scale, st.multiplier);
  EXPECT_EQ(p.scale, static_cast<float>(1.0 / static_cast<double>(st.multiplier)));
  // A spike enters the history and, with max, stays for the history's length.
  delayed_update(QuantFormat::E4M3, st, 3000.0f, AmaxAlgorithm::Max, 0);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(st.multiplier, static_cast<float>(448.0 / 3000.0)) << k;
    delayed_update(QuantFormat::E4M3, st, 2.0f, AmaxAlgorithm::Max, 0);
  }
  EXPECT_EQ(st.history, (std::vector<float>{2.0f, 2.0f, 2.0f, 3000.0f}));
  EXPECT_EQ(st.multiplier, static_cast<float>(448.0 / 3000.0));  // still inside the window
  delayed_update(QuantFormat::E4M3, st, 2.0f, AmaxAlgorithm::Max, 0);
  EXPECT_EQ(st.multiplier, static_cast<float>(448.0 / 2.0));  // the spike dropped out
  // most_recent follows the last amax; a margin leaves 2^margin headroom; E5M2's qmax.
  DelayedScalingState mr{1.0f, std::vector<float>(4, 0.0f)};
  delayed_update(QuantFormat::E5M2, mr, 3000.0f, AmaxAlgorithm::MostRecent, 2);
  delayed_update(QuantFormat::E5M2, mr, 7.0f, AmaxAlgorithm::MostRecent, 2);
  EXPECT_EQ(mr.multiplier, static_cast<float>(static_cast<float>(57344.0 / 7.0) / 4.0));
  // A zero or non-finite amax keeps the previous multiplier (TE's rule).
  const float before = mr.multiplier;
  delayed_update(QuantFormat::E5M2, mr, 0.0f, AmaxAlgorithm::MostRecent, 2);
  EXPECT_EQ(mr.multiplier, before);
  delayed_update(QuantFormat::E5M2, mr, INFINITY, AmaxAlgorithm::MostRecent, 2);
  EXPECT_EQ(mr.multiplier, before);
  DelayedScalingState empty{1.0f, {}};
  EXPECT_THROW(delayed_update(QuantFormat::E4M3, empty, 1.0f, AmaxAlgorithm::Max, 0), std::invalid_argument);
  EXPECT_EQ(parse_amax_algorithm("most_recent"), AmaxAlgorithm::MostRecent);
  EXPECT_THROW(parse_amax_algorithm("mean"), std::invalid_argument);
}

TEST(QuantDelayed, ALaggingScaleSaturatesTheSpikeAndALongHistoryFlushesWhatFollows) {
  // Steps of N(0, 1)-like data with one spike: with history 8 (max) the steps after the spike
  // flush many more codes than with history 1; both saturate at the spike step itself.
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<float>> steps(12, std::vector<float>(512));
  for (auto& s : steps)
    for (float& v : s) v = nd(rng);
  steps[3][17] = 50000.0f;
  auto run = [&](int len, std::vector<QuantStats>& out) {
    DelayedScalingState st{1.0f, std::vector<float>(static_cast<std::size_t>(len), 0.0f)};
    for (const auto& s : steps) {
      std::vector<float> x = s;
      const QuantParams p = delayed_params(QuantFormat::E4M3, st);
      out.push_back(quantize_span(x, std::span<const QuantParams>(&p, 1), 1));
      delayed_update(QuantFormat::E4M3, st, static_cast<float>(out.back().amax), AmaxAlgorithm::Max, 0);
    }
  };
  std::vector<QuantStats> long_h, short_h;
  run(8, long_h);
  run(1, short_h);
  EXPECT_GE(long_h[3].saturated, 1u);
  EXPECT_GE(short_h[3].saturated, 1u);
  EXPECT_EQ(long_h[3].first_saturated, 17);
  EXPECT_EQ(long_h[4].underflow, short_h[4].underflow);  // both scale step 4 by the spike's amax
  for (int k = 5; k <= 11; ++k)  // history 8: the spike of step 3 sets the scale of steps 4..11
    EXPECT_GT(long_h[k].underflow, 10 * (short_h[k].underflow + 1)) << k;
  EXPECT_GT(short_h[4].underflow, 10u);  // history 1 still uses the spike's amax once
}

}  // namespace
}  // namespace probelab::num
