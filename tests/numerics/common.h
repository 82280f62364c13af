// Helpers shared by the numerics tests: seeded random patterns and special-value lists.
#pragma once

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "numerics/flags.h"
#include "numerics/mode.h"

namespace probelab::num::testing {

inline const Mode kModes[] = {
    {OverflowMode::InfNan, DenormalMode::Preserve},
    {OverflowMode::Saturation, DenormalMode::Preserve},
    {OverflowMode::InfNan, DenormalMode::FlushToZero},
    {OverflowMode::Saturation, DenormalMode::FlushToZero},
};

inline std::string mode_name(const Mode& m) {
  return std::string(to_string(m.overflow)) + "/" + to_string(m.denormal);
}

// Interesting 16-bit patterns of a format with `ebits` exponent bits: zeros, subnormal extremes,
// normal boundaries, one, max, Inf, quiet and signaling NaNs, both signs.
inline std::vector<std::uint16_t> special16(int ebits) {
  const int fbits = 15 - ebits;
  const std::uint16_t fmask = static_cast<std::uint16_t>((1u << fbits) - 1);
  const std::uint16_t emask = static_cast<std::uint16_t>(((1u << ebits) - 1) << fbits);
  const std::uint16_t one = static_cast<std::uint16_t>(((1u << (ebits - 1)) - 1) << fbits);
  std::vector<std::uint16_t> pos = {
      0, 1, 2, 3, static_cast<std::uint16_t>(fmask >> 1), fmask,            // zero, subnormals
      static_cast<std::uint16_t>(fmask + 1), static_cast<std::uint16_t>(fmask + 2),  // min normals
      one, static_cast<std::uint16_t>(one + 1), static_cast<std::uint16_t>(one - 1),
      static_cast<std::uint16_t>(one + (1u << fbits)),                       // 2
      static_cast<std::uint16_t>(emask - 1), static_cast<std::uint16_t>(emask - 2),  // max, max-ulp
      emask,                                                                 // Inf
      static_cast<std::uint16_t>(emask | (1u << (fbits - 1))),               // qNaN
      static_cast<std::uint16_t>(emask | 1),                                 // sNaN
      static_cast<std::uint16_t>(emask | fmask),                             // qNaN all ones
  };
  std::vector<std::uint16_t> all = pos;
  for (std::uint16_t p : pos) all.push_back(static_cast<std::uint16_t>(p | 0x8000u));
  return all;
}

// Random 16-bit patterns biased towards hard cases: half uniform bits, half with exponents near
// the extremes or operands close to each other.
class Gen16 {
 public:
  Gen16(std::uint64_t seed, int ebits) : rng_(seed), ebits_(ebits) {}
  std::uint16_t next() {
    const std::uint32_t u = static_cast<std::uint32_t>(rng_());
    const int fbits = 15 - ebits_;
    switch (u & 3u) {
      case 0:
      case 1: return static_cast<std::uint16_t>(u >> 8);
      case 2: {  // small exponent (subnormal/tiny range)
        const std::uint32_t e = (u >> 8) % 4;
        return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | (e << fbits) | ((u >> 12) & ((1u << fbits) - 1)));
      }
      default: {  // large exponent (overflow range)
        const std::uint32_t emax = (1u << ebits_) - 2;
        const std::uint32_t e = emax - (u >> 8) % 3;
        return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | (e << fbits) | ((u >> 12) & ((1u << fbits) - 1)));
      }
    }
  }
  // A pattern near `x` (same exponent region), to provoke cancellation.
  std::uint16_t near(std::uint16_t x) {
    const int d = static_cast<int>(rng_() % 9) - 4;
    return static_cast<std::uint16_t>((x + d) ^ ((rng_() & 1) ? 0x8000u : 0u));
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  int ebits_;
};

}  // namespace probelab::num::testing
