// Floating-point exception flags, in the style of Berkeley SoftFloat: a small enum of flag kinds and
// a bitmask value type. Every numerics operation returns its flags with its value; there is no
// global (sticky) flag state anywhere in the library. The chip model ORs the flags it receives into
// its own sticky status registers.
//
// Exact meaning of each flag (identical for every operation and format in this library):
//   Invalid     an IEEE 754 invalid operation: a signaling-NaN operand, 0*Inf, Inf-Inf (magnitude
//               subtraction of infinities), 0/0, Inf/Inf, sqrt of a negative non-zero number, a
//               signaling comparison with a NaN operand. A quiet NaN operand that merely propagates
//               raises nothing.
//   DivByZero   finite non-zero dividend divided by zero (exact infinite result).
//   Overflow    the result rounded as if the exponent range were unbounded exceeds the largest
//               finite number of the destination format. Always comes with Inexact. The delivered
//               value is +-Inf (INF_NAN mode) or +-max finite (SATURATION mode); E4M3, which has no
//               infinity, delivers NaN in INF_NAN mode.
//   Underflow   the result is tiny AND inexact (IEEE 754 default, untrapped). Tininess is detected
//               AFTER rounding: the non-zero exact result, rounded to the destination precision with
//               an unbounded exponent range, is below the smallest normal number. This is the x86
//               SSE/AVX and RISC-V convention (ARM detects tininess before rounding).
//   Inexact     the delivered value differs from the exact result (includes overflow, and any
//               flush to zero of a non-zero result).
//   DenormalIn  an operand is a non-zero subnormal of its format (raised in both denormal modes;
//               in FLUSH_TO_ZERO mode the operand is then treated as a zero of the same sign).
//   DenormalOut the IEEE-rounded result is a non-zero subnormal of the destination format (raised
//               in both denormal modes; in FLUSH_TO_ZERO mode the result is replaced by a zero of
//               the same sign and Underflow and Inexact are raised as well).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace probelab::num {

enum class Flag : std::uint8_t {
  Invalid = 0,
  DivByZero = 1,
  Overflow = 2,
  Underflow = 3,
  Inexact = 4,
  DenormalIn = 5,
  DenormalOut = 6,
};

inline constexpr int kFlagCount = 7;

inline constexpr std::array<Flag, kFlagCount> kAllFlags = {
    Flag::Invalid,   Flag::DivByZero,  Flag::Overflow,   Flag::Underflow,
    Flag::Inexact,   Flag::DenormalIn, Flag::DenormalOut};

// Stable name of a flag ("Invalid", "DivByZero", ...). Throws std::invalid_argument on a value
// outside the enum.
std::string_view flag_name(Flag f);

// A set of flags, one bit per Flag (bit index = enum value).
struct Flags {
  std::uint8_t bits = 0;

  static constexpr std::uint8_t bit(Flag f) noexcept {
    return static_cast<std::uint8_t>(1u << static_cast<unsigned>(f));
  }
  constexpr Flags() noexcept = default;
  constexpr explicit Flags(std::uint8_t raw) noexcept : bits(raw) {}
  constexpr Flags(Flag f) noexcept : bits(bit(f)) {}  // NOLINT: implicit by design

  constexpr bool has(Flag f) const noexcept { return (bits & bit(f)) != 0; }
  constexpr bool any() const noexcept { return bits != 0; }
  constexpr bool none() const noexcept { return bits == 0; }
  constexpr Flags& set(Flag f) noexcept { bits |= bit(f); return *this; }
  constexpr Flags& clear(Flag f) noexcept { bits &= static_cast<std::uint8_t>(~bit(f)); return *this; }
  constexpr Flags& operator|=(Flags o) noexcept { bits |= o.bits; return *this; }
  constexpr Flags& operator&=(Flags o) noexcept { bits &= o.bits; return *this; }
  friend constexpr Flags operator|(Flags a, Flags b) noexcept { return Flags(static_cast<std::uint8_t>(a.bits | b.bits)); }
  friend constexpr Flags operator&(Flags a, Flags b) noexcept { return Flags(static_cast<std::uint8_t>(a.bits & b.bits)); }
  constexpr Flags operator~() const noexcept { return Flags(static_cast<std::uint8_t>(~bits & 0x7Fu)); }
  friend constexpr bool operator==(Flags a, Flags b) noexcept = default;
};

constexpr Flags operator|(Flag a, Flag b) noexcept { return Flags(a) | Flags(b); }

// "none" or the set flag names joined by '|', in enum order, e.g. "Overflow|Inexact".
std::string to_string(Flags f);

}  // namespace probelab::num
