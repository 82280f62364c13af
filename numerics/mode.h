// Rounding environment of the simulated datapath. Rounding is always round-to-nearest-even; what
// varies (as on real Ascend parts) is the treatment of overflow/NaN and of subnormals.
#pragma once

#include <cstdint>

namespace probelab::num {

enum class OverflowMode : std::uint8_t {
  // IEEE 754: overflow delivers +-Inf, invalid operations deliver NaN.
  InfNan = 0,
  // Saturation: the IEEE result (and its flags) is computed first; then any +-Inf result becomes
  // +-max finite of the destination format and any NaN result becomes +0. No flag is added or
  // removed by this step (an overflow still raises Overflow|Inexact, 0/0 still raises Invalid).
  Saturation = 1,
};

enum class DenormalMode : std::uint8_t {
  // Subnormal operands and results are kept (IEEE 754). DenormalIn/DenormalOut are still raised.
  Preserve = 0,
  // Subnormal operands are read as zero of the same sign (raising DenormalIn) and subnormal
  // results are replaced by zero of the same sign (raising DenormalOut|Underflow|Inexact).
  FlushToZero = 1,
};

struct Mode {
  OverflowMode overflow = OverflowMode::InfNan;
  DenormalMode denormal = DenormalMode::Preserve;

  friend constexpr bool operator==(const Mode&, const Mode&) = default;
};

inline constexpr Mode kIeeeMode{};
inline constexpr Mode kSaturationMode{OverflowMode::Saturation, DenormalMode::Preserve};

// Throws std::invalid_argument naming the field if a Mode holds a value outside its enums.
void validate(const Mode& mode);

const char* to_string(OverflowMode m);
const char* to_string(DenormalMode m);

}  // namespace probelab::num
