#include "numerics/flags.h"

#include <stdexcept>

namespace probelab::num {

std::string_view flag_name(Flag f) {
  switch (f) {
    case Flag::Invalid: return "Invalid";
    case Flag::DivByZero: return "DivByZero";
    case Flag::Overflow: return "Overflow";
    case Flag::Underflow: return "Underflow";
    case Flag::Inexact: return "Inexact";
    case Flag::DenormalIn: return "DenormalIn";
    case Flag::DenormalOut: return "DenormalOut";
  }
  throw std::invalid_argument("probelab::num::flag_name: invalid Flag value " +
                              std::to_string(static_cast<int>(f)));
}

std::string to_string(Flags f) {
  if (f.none()) return "none";
  std::string out;
  for (Flag k : kAllFlags) {
    if (!f.has(k)) continue;
    if (!out.empty()) out += '|';
    out += flag_name(k);
  }
  return out;
}

}  // namespace probelab::num
