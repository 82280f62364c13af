// Storage types of the numerics layer: raw IEEE-style bit patterns wrapped in trivial structs, so
// that tensors can be stored as plain uint16/uint8 arrays and reinterpreted without conversion
// (each type has the size and alignment of its bit field). FP32 is plain `float`.
#pragma once

#include <cstdint>
#include <type_traits>

#include "numerics/flags.h"

namespace probelab::num {

// IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits. Max finite 65504.
struct f16 {
  std::uint16_t bits = 0;
  friend constexpr bool operator==(f16, f16) = default;  // bitwise, not IEEE equality
};

// bfloat16: the upper half of a binary32: 1 sign, 8 exponent (bias 127), 7 fraction bits.
struct bf16 {
  std::uint16_t bits = 0;
  friend constexpr bool operator==(bf16, bf16) = default;
};

// OCP OFP8 E4M3: 1 sign, 4 exponent (bias 7), 3 fraction bits. No infinities; the only NaN
// encodings are S.1111.111 (0x7F, 0xFF). Max finite 448 (S.1111.110), min subnormal 2^-9.
struct fp8_e4m3 {
  std::uint8_t bits = 0;
  friend constexpr bool operator==(fp8_e4m3, fp8_e4m3) = default;
};

// OCP OFP8 E5M2: IEEE-like: 1 sign, 5 exponent (bias 15), 2 fraction bits, Inf and NaN as in
// IEEE 754. Max finite 57344, min subnormal 2^-16.
struct fp8_e5m2 {
  std::uint8_t bits = 0;
  friend constexpr bool operator==(fp8_e5m2, fp8_e5m2) = default;
};

static_assert(sizeof(f16) == 2 && alignof(f16) == 2 && std::is_trivially_copyable_v<f16>);
static_assert(sizeof(bf16) == 2 && alignof(bf16) == 2 && std::is_trivially_copyable_v<bf16>);
static_assert(sizeof(fp8_e4m3) == 1 && sizeof(fp8_e5m2) == 1);

// Every operation returns its value together with the flags it raised.
template <class T>
struct Result {
  T value{};
  Flags flags{};
};

// Outcome of a comparison. Unordered iff at least one operand is NaN.
enum class Cmp : std::uint8_t { Less = 0, Equal = 1, Greater = 2, Unordered = 3 };

// Canonical (default) NaNs, produced by every arithmetic operation whose result is NaN:
// positive sign, quiet bit set, zero payload (the ARM "default NaN" / RISC-V canonical NaN).
inline constexpr f16 kF16DefaultNaN{0x7E00};
inline constexpr bf16 kBF16DefaultNaN{0x7FC0};
inline constexpr std::uint32_t kF32DefaultNaNBits = 0x7FC00000u;

inline constexpr f16 kF16Max{0x7BFF};       // 65504
inline constexpr f16 kF16Inf{0x7C00};
inline constexpr bf16 kBF16Max{0x7F7F};     // 3.3895e38
inline constexpr bf16 kBF16Inf{0x7F80};

}  // namespace probelab::num
