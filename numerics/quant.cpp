// Low-bit quantization (quant.h).
#include "numerics/quant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "numerics/fp8.h"

namespace probelab::num {
namespace {

// Round half to even of a finite double, without depending on the floating-point environment.
double rne(double v) {
  const double f = std::floor(v);
  const double d = v - f;  // exact for |v| < 2^52
  if (d > 0.5) return f + 1.0;
  if (d < 0.5) return f;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

float f32(double v) { return static_cast<float>(v); }  // RNE (default environment, never changed)

}  // namespace

std::string_view quant_format_name(QuantFormat f) {
  switch (f) {
    case QuantFormat::Int8: return "int8";
    case QuantFormat::Int4: return "int4";
    case QuantFormat::E4M3: return "e4m3";
    case QuantFormat::E5M2: return "e5m2";
  }
  throw std::invalid_argument("quant format value " + std::to_string(static_cast<int>(f)) + " is not a format");
}

QuantFormat parse_quant_format(std::string_view name) {
  for (QuantFormat f : {QuantFormat::Int8, QuantFormat::Int4, QuantFormat::E4M3, QuantFormat::E5M2})
    if (quant_format_name(f) == name) return f;
  throw std::invalid_argument("unknown quantization format '" + std::string(name) +
                              "' (expected int8, int4, e4m3 or e5m2)");
}

bool is_fp8(QuantFormat f) { return f == QuantFormat::E4M3 || f == QuantFormat::E5M2; }

double quant_qmax(QuantFormat f) {
  switch (f) {
    case QuantFormat::Int8: return 127.0;
    case QuantFormat::Int4: return 7.0;
    case QuantFormat::E4M3: return 448.0;
    case QuantFormat::E5M2: return 57344.0;
  }
  throw std::invalid_argument("quant format value " + std::to_string(static_cast<int>(f)) + " is not a format");
}

double quant_code_min(QuantFormat f, bool symmetric) {
  if (symmetric || is_fp8(f)) return -quant_qmax(f);
  return f == QuantFormat::Int8 ? -128.0 : -8.0;
}
double quant_code_max(QuantFormat f, bool) { return quant_qmax(f); }

QuantParams params_with_scale(QuantFormat f, float scale) {
  if (!(scale > 0.0f) || !std::isfinite(scale))
    throw std::invalid_argument("quantization scale must be positive and finite (got " + std::to_string(scale) + ")");
  QuantParams p;
  p.format = f;
  p.symmetric = true;
  p.scale = scale;
  p.inv_scale = f32(1.0 / static_cast<double>(scale));
  return p;
}

Result<QuantParams> choose_scale(QuantFormat f, bool symmetric, double lo, double hi) {
  if (is_fp8(f) && !symmetric)
    throw std::invalid_argument(std::string(quant_format_name(f)) + " quantization is symmetric only");
  QuantParams p;
  p.format = f;
  p.symmetric = symmetric;
  Flags flags;
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {p, Flags(Flag::Invalid)};
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (symmetric) {
    const double amax = std::max(-lo, hi);
    if (amax == 0.0) return {p, flags};
    p.scale = f32(amax / quant_qmax(f));
  } else {
    if (hi == lo) return {p, flags};
    const double qmin = quant_code_min(f, false), qmax = quant_code_max(f, false);
    p.scale = f32((hi - lo) / (qmax - qmin));
    p.zero_point = static_cast<std::int32_t>(std::clamp(rne(qmin - lo / static_cast<double>(p.scale)), qmin, qmax));
  }
  if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) {  // a range below FP32's subnormals, or above its max
    p.scale = 1.0f;
    p.zero_point = 0;
    flags |= Flag::Inexact;
  }
  p.inv_scale = f32(1.0 / static_cast<double>(p.scale));
  return {p, flags};
}

Result<std::int32_t> quantize_code(float x, const QuantParams& p) {
  if (is_fp8(p.format)) {
    if (std::isnan(x)) return {p.format == QuantFormat::E4M3 ? 0x7F : 0x7E, {}};
    const double v = f32(static_cast<double>(x) * static_cast<double>(p.inv_scale));
    if (std::isinf(v)) {  // clamped like any value beyond the range
      const std::int32_t max_code = p.format == QuantFormat::E4M3 ? 0x7E : 0x7B;
      return {v < 0 ? max_code | 0x80 : max_code, Flags(Flag::Overflow)};
    }
    if (p.format == QuantFormat::E4M3) {
      const Result<fp8_e4m3> r = to_e4m3(v, kSaturationMode);
      return {r.value.bits, r.flags};
    }
    const Result<fp8_e5m2> r = to_e5m2(v, kSaturationMode);
    return {r.value.bits, r.flags};
  }
  const double qmin = quant_code_min(p.format, p.symmetric), qmax = quant_code_max(p.format, p.symmetric);
  if (std::isnan(x)) return {p.zero_point, Flags(Flag::Invalid)};
  const double v = f32(static_cast<double>(x) * static_cast<double>(p.inv_scale));
  if (std::isinf(v)) return {static_cast<std::int32_t>(v > 0 ? qmax : qmin), Flags(Flag::Overflow)};
  const double r = rne(v);
  Flags flags = r != v ? Flags(Flag::Inexact) : Flags();
  const double q = r + p.zero_point;
  if (q > qmax || q < qmin) return {static_cast<std::int32_t>(q > qmax ? qmax : qmin), Flag::Overflow | Flag::Inexact};
  return {static_cast<std::int32_t>(q), flags};
}

Result<float> quantize(float x, const QuantParams& p) {
  const Result<std::int32_t> c = quantize_code(x, p);
  if (p.format == QuantFormat::E4M3) return {to_float(fp8_e4m3{static_cast<std::uint8_t>(c.value)}), c.flags};
  if (p.format == QuantFormat::E5M2) return {to_float(fp8_e5m2{static_cast<std::uint8_t>(c.value)}), c.flags};
  return {static_cast<float>(c.value - p.zero_point), c.flags};
}

float dequantize(float offset, const QuantParams& p) {
  return f32(static_cast<double>(p.scale) * static_cast<double>(offset));
}

QuantStats quantize_span(std::span<float> x, std::span<const QuantParams> params, std::int64_t inner) {
  if (params.empty()) throw std::invalid_argument("quantize_span: no quantization params");
  if (inner < 1) throw std::invalid_argument("quantize_span: inner extent must be >= 1");
  QuantStats s;
  s.elements = x.size();
  const auto nch = static_cast<std::int64_t>(params.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const QuantParams& p = params[static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % nch)];
    const float x0 = x[i];
    if (std::isfinite(x[i])) s.amax = std::max(s.amax, static_cast<double>(std::fabs(x[i])));
    const Result<float> r = quantize(x[i], p);
    x[i] = r.value;
    s.flags |= r.flags;
    if (r.flags.has(Flag::Overflow) && s.saturated++ == 0) {
      s.first_saturated = static_cast<std::int64_t>(i);
      s.first_saturated_value = x0;
    }
    if (r.flags.has(Flag::Invalid)) ++s.invalid;
    if (r.flags.has(Flag::Inexact)) ++s.inexact;
    if (r.flags.has(Flag::DenormalOut) && r.value != 0.0f) ++s.subnormal;
    if (r.value == 0.0f && x0 != 0.0f && std::isfinite(x0)) ++s.underflow;
  }
  return s;
}

std::string_view amax_algorithm_name(AmaxAlgorithm a) { return a == AmaxAlgorithm::Max ? "max" : "most_recent"; }

AmaxAlgorithm parse_amax_algorithm(std::string_view name) {
  if (name == "max") return AmaxAlgorithm::Max;
  if (name == "most_recent") return AmaxAlgorithm::MostRecent;
  throw std::invalid_argument("unknown amax algorithm '" + std::string(name) + "' (expected max or most_recent)");
}

QuantParams delayed_params(QuantFormat f, const DelayedScalingState& s) {
  QuantParams p;
  p.format = f;
  p.symmetric = true;
  p.inv_scale = s.multiplier;
  p.scale = f32(1.0 / static_cast<double>(s.multiplier));
  return p;
}

void delayed_update(QuantFormat f, DelayedScalingState& s, float amax, AmaxAlgorithm a, int margin) {
  if (s.history.empty()) throw std::invalid_argument("delayed scaling: the amax history has length 0");
  std::rotate(s.history.rbegin(), s.history.rbegin() + 1, s.history.rend());  // oldest moves to the front
  s.history.front() = amax;
  float h = s.history.front();
  if (a == AmaxAlgorithm::Max)
    for (float v : s.history) h = std::isnan(v) || std::isnan(h) ? std::numeric_limits<float>::quiet_NaN() : std::max(h, v);
  if (!(h > 0.0f) || !std::isfinite(h)) return;  // TE keeps the previous scale
  const float m = f32(f32(quant_qmax(f) / static_cast<double>(h)) / std::ldexp(1.0, margin));
  if (m > 0.0f && std::isfinite(m)) s.multiplier = m;
}

std::vector<QuantParams> choose_params(std::span<const float> x, QuantFormat f, bool symmetric, std::int64_t channels,
                                       std::int64_t inner, Flags* flags) {
  if (channels < 1 || inner < 1) throw std::invalid_argument("choose_params: channels and inner must be >= 1");
  std::vector<double> lo(static_cast<std::size_t>(channels), 0.0), hi(static_cast<std::size_t>(channels), 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto ch = static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % channels);
    if (!std::isfinite(x[i])) continue;  // NaN/Inf do not widen the range (they saturate / become zp)
    lo[ch] = std::min(lo[ch], static_cast<double>(x[i]));
    hi[ch] = std::max(hi[ch], static_cast<double>(x[i]));
  }
  std::vector<QuantParams> out;
  out.reserve(lo.size());
  for (std::size_t c = 0; c < lo.size(); ++c) {
    const Result<QuantParams> r = choose_scale(f, symmetric, lo[c], hi[c]);
    if (flags) *flags |= r.flags;
    out.push_back(r.value);
  }
  return out;
}

}  // namespace probelab::num
