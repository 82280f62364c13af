// Internal: format descriptions and the one rounding routine every scalar path goes through.
#pragma once

#include <bit>
#include <cstdint>

#include "numerics/flags.h"
#include "numerics/mode.h"

namespace probelab::num::detail {

// A binary floating-point format with precision p (incl. the hidden bit) and `ebits` exponent bits.
// max_frac: the largest fraction field of a finite number at emax (all ones for IEEE formats, 0b110
// for E4M3 whose all-ones pattern is NaN). tiny: 2^emin * (1 - 2^-(p+1)), below which a non-zero
// exact value is tiny after rounding (ties to even round up to 2^emin).
template <class Bits, int P, int EBITS, bool HasInf, std::uint32_t MaxFrac, std::uint32_t QNaN>
struct Format {
  using bits_t = Bits;
  static constexpr int p = P;
  static constexpr int ebits = EBITS;
  static constexpr int bias = (1 << (EBITS - 1)) - 1;
  static constexpr int emin = 1 - bias;
  static constexpr int emax = HasInf ? bias : bias + 1;
  static constexpr bool has_inf = HasInf;
  static constexpr int fbits = P - 1;
  static constexpr std::uint32_t sign_mask = 1u << (EBITS + P - 1);
  static constexpr std::uint32_t exp_mask = ((1u << EBITS) - 1u) << fbits;
  static constexpr std::uint32_t frac_mask = (1u << fbits) - 1u;
  static constexpr std::uint32_t quiet_bit = 1u << (fbits - 1);
  static constexpr std::uint32_t max_frac = MaxFrac;
  static constexpr std::uint32_t max_bits = (static_cast<std::uint32_t>(emax + bias) << fbits) | MaxFrac;
  static constexpr std::uint32_t inf_bits = exp_mask;
  static constexpr std::uint32_t default_nan = QNaN;
};

using F16 = Format<std::uint16_t, 11, 5, true, 0x3FFu, 0x7E00u>;
using BF16 = Format<std::uint16_t, 8, 8, true, 0x7Fu, 0x7FC0u>;
using F32 = Format<std::uint32_t, 24, 8, true, 0x7FFFFFu, 0x7FC00000u>;
using E5M2 = Format<std::uint8_t, 3, 5, true, 0x3u, 0x7Eu>;
using E4M3 = Format<std::uint8_t, 4, 4, false, 0x6u, 0x7Fu>;

template <class F> constexpr double kTiny = 0;
template <> inline constexpr double kTiny<F16> = 0x1.ffep-15;     // 2^-14 (1 - 2^-12)
template <> inline constexpr double kTiny<BF16> = 0x1.ffp-127;    // 2^-126 (1 - 2^-9)
template <> inline constexpr double kTiny<F32> = 0x1.ffffffp-127; // 2^-126 (1 - 2^-25)
template <> inline constexpr double kTiny<E5M2> = 0x1.ep-15;      // 2^-14 (1 - 2^-4)
template <> inline constexpr double kTiny<E4M3> = 0x1.fp-7;       // 2^-6 (1 - 2^-5)

template <class F>
constexpr bool is_nan_bits(std::uint32_t b) noexcept {
  if constexpr (F::has_inf) return (b & F::exp_mask) == F::exp_mask && (b & F::frac_mask) != 0;
  else return (b & ~F::sign_mask) == (F::exp_mask | F::frac_mask);
}
template <class F>
constexpr bool is_snan_bits(std::uint32_t b) noexcept {
  if constexpr (F::has_inf) return is_nan_bits<F>(b) && (b & F::quiet_bit) == 0;
  else return false;
}
template <class F>
constexpr bool is_inf_bits(std::uint32_t b) noexcept {
  return F::has_inf && (b & ~F::sign_mask) == F::exp_mask;
}
template <class F>
constexpr bool is_sub_bits(std::uint32_t b) noexcept {
  return (b & F::exp_mask) == 0 && (b & F::frac_mask) != 0;
}

template <class F>
struct Rounded {
  std::uint32_t bits;
  Flags flags;
};

constexpr std::uint8_t fbit(Flag f) noexcept { return Flags::bit(f); }

// The value delivered for an infinite result of sign `neg` (the caller raises the flags).
template <class F>
constexpr std::uint32_t inf_result(bool neg, const Mode& m) noexcept {
  std::uint32_t s = neg ? F::sign_mask : 0u;
  if (m.overflow == OverflowMode::Saturation || !F::has_inf) {
    return m.overflow == OverflowMode::Saturation ? (s | F::max_bits) : (s | F::default_nan);
  }
  return s | F::inf_bits;
}

// The value delivered for a NaN result: `bits` (an already quiet NaN of F) or +0 when saturating.
constexpr std::uint32_t nan_result(std::uint32_t bits, const Mode& m) noexcept {
  return m.overflow == OverflowMode::Saturation ? 0u : bits;
}

// Rounds d (not NaN) to F with round-to-nearest-even and the Mode, computing all result flags.
// d must be the exact result or its binary64 round-to-odd (then the rounding is still correct, as
// F has at most 24 bits of precision: see arith.h). An infinite d is delivered without flags.
template <class F>
Rounded<F> round_to(double d, const Mode& m) noexcept {
  const std::uint64_t u = std::bit_cast<std::uint64_t>(d);
  const bool neg = (u >> 63) != 0;
  const std::uint64_t mag = u & 0x7FFFFFFFFFFFFFFFull;
  const std::uint32_t sign = neg ? F::sign_mask : 0u;
  if (mag == 0) return {sign, {}};
  if (mag == 0x7FF0000000000000ull) return {inf_result<F>(neg, m), {}};
  const unsigned bexp = static_cast<unsigned>(mag >> 52);
  const std::uint64_t M = bexp == 0 ? mag : ((mag & 0xFFFFFFFFFFFFFull) | (1ull << 52));
  const int e2 = bexp == 0 ? -1074 : static_cast<int>(bexp) - 1075;
  const int lead = e2 + 63 - std::countl_zero(M);
  int q = (lead > F::emin ? lead : F::emin) - (F::p - 1);
  const int shift = q - e2;
  std::uint64_t r = 0;
  bool inexact = false;
  if (shift <= 0) {
    r = M << -shift;
  } else if (shift >= 64) {
    inexact = true;
  } else {
    r = M >> shift;
    const std::uint64_t rem = M & ((1ull << shift) - 1);
    const std::uint64_t half = 1ull << (shift - 1);
    inexact = rem != 0;
    if (rem > half || (rem == half && (r & 1))) ++r;
  }
  constexpr std::uint64_t kHidden = 1ull << (F::p - 1);
  if (r == 2 * kHidden) {
    r = kHidden;
    ++q;
  }
  std::uint8_t fl = inexact ? fbit(Flag::Inexact) : 0;
  const bool normal = r >= kHidden;
  if (normal) {
    const int e = q + F::p - 1;
    if (e > F::emax || (e == F::emax && (r - kHidden) > F::max_frac)) {
      fl |= fbit(Flag::Overflow) | fbit(Flag::Inexact);
      return {inf_result<F>(neg, m), Flags(fl)};
    }
  }
  const double ad = neg ? -d : d;
  if (inexact && ad < kTiny<F>) fl |= fbit(Flag::Underflow);
  if (!normal && r != 0) {
    fl |= fbit(Flag::DenormalOut);
    if (m.denormal == DenormalMode::FlushToZero) {
      fl |= fbit(Flag::Underflow) | fbit(Flag::Inexact);
      return {sign, Flags(fl)};
    }
    return {sign | static_cast<std::uint32_t>(r), Flags(fl)};
  }
  if (!normal) return {sign, Flags(fl)};
  const auto biased = static_cast<std::uint32_t>(q + F::p - 1 + F::bias);
  return {sign | (biased << F::fbits) | static_cast<std::uint32_t>(r - kHidden), Flags(fl)};
}

// Exact value of a non-NaN, non-infinite pattern of F (E4M3's saturating max included).
template <class F>
double decode_finite(std::uint32_t b) noexcept {
  const bool neg = (b & F::sign_mask) != 0;
  const std::uint32_t e = (b & F::exp_mask) >> F::fbits;
  const std::uint32_t f = b & F::frac_mask;
  // Build the binary64 pattern directly (every value of every F is a normal binary64).
  std::uint64_t out;
  if (e == 0) {
    if (f == 0) return neg ? -0.0 : 0.0;
    const int lz = std::countl_zero(f) - (32 - F::fbits);  // leading zeros within the fraction
    const int exp = F::emin - 1 - lz;
    const std::uint64_t frac = (static_cast<std::uint64_t>(f) << (lz + 1)) & F::frac_mask;
    out = (static_cast<std::uint64_t>(exp + 1023) << 52) | (frac << (52 - F::fbits));
  } else {
    const int exp = static_cast<int>(e) - F::bias;
    out = (static_cast<std::uint64_t>(exp + 1023) << 52) | (static_cast<std::uint64_t>(f) << (52 - F::fbits));
  }
  return std::bit_cast<double>(out | (neg ? (1ull << 63) : 0ull));
}

// Quiet NaN of F carrying the sign and upper payload bits of a binary64 NaN (F16C convention).
template <class F>
std::uint32_t nan_from_double(double d) noexcept {
  const std::uint64_t u = std::bit_cast<std::uint64_t>(d);
  const std::uint32_t sign = (u >> 63) ? F::sign_mask : 0u;
  if constexpr (!F::has_inf) {
    return sign | F::exp_mask | F::frac_mask;
  } else {
    const auto payload = static_cast<std::uint32_t>((u & 0xFFFFFFFFFFFFFull) >> (52 - F::fbits));
    return sign | F::exp_mask | F::quiet_bit | payload;
  }
}

// Binary64 NaN carrying the sign and payload of a NaN of F, quieted.
template <class F>
double nan_to_double(std::uint32_t b) noexcept {
  const std::uint64_t sign = (b & F::sign_mask) ? (1ull << 63) : 0ull;
  const std::uint64_t payload = static_cast<std::uint64_t>(b & F::frac_mask) << (52 - F::fbits);
  return std::bit_cast<double>(sign | 0x7FF8000000000000ull | payload);
}

// Round-to-odd of the exact value s + err, where s = RN(exact) and err has the sign of exact - s
// (only its sign and whether it is zero matter).
inline double to_odd(double s, double err) noexcept {
  if (err == 0) return s;
  std::uint64_t u = std::bit_cast<std::uint64_t>(s);
  if ((u & 1) == 0) {
    const bool away = (err > 0) == (s > 0);
    u = away ? u + 1 : u - 1;
  }
  return std::bit_cast<double>(u);
}

}  // namespace probelab::num::detail
