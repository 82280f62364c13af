#include "numerics/mode.h"

#include <stdexcept>
#include <string>

namespace probelab::num {

void validate(const Mode& mode) {
  if (mode.overflow != OverflowMode::InfNan && mode.overflow != OverflowMode::Saturation) {
    throw std::invalid_argument("probelab::num::Mode.overflow: invalid value " +
                                std::to_string(static_cast<int>(mode.overflow)) +
                                " (expected InfNan or Saturation)");
  }
  if (mode.denormal != DenormalMode::Preserve && mode.denormal != DenormalMode::FlushToZero) {
    throw std::invalid_argument("probelab::num::Mode.denormal: invalid value " +
                                std::to_string(static_cast<int>(mode.denormal)) +
                                " (expected Preserve or FlushToZero)");
  }
}

const char* to_string(OverflowMode m) {
  switch (m) {
    case OverflowMode::InfNan: return "inf_nan";
    case OverflowMode::Saturation: return "saturation";
  }
  return "invalid";
}

const char* to_string(DenormalMode m) {
  switch (m) {
    case DenormalMode::Preserve: return "preserve";
    case DenormalMode::FlushToZero: return "flush_to_zero";
  }
  return "invalid";
}

}  // namespace probelab::num
