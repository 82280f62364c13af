#include "probes/log.h"

#include <cstdlib>
#include <string>

namespace probelab::probes::log {

bool enabled(std::string_view channel) {
  static const std::string spec = [] {
    const char* e = std::getenv("PROBELAB_DEBUG");
    return e ? fmt::format(",{},", e) : std::string();
  }();
  if (spec.empty()) return false;
  return spec.find(",all,") != std::string::npos || spec.find(fmt::format(",{},", channel)) != std::string::npos;
}

bool quiet() {
  static const bool q = std::getenv("PROBELAB_QUIET") != nullptr;
  return q;
}

}  // namespace probelab::probes::log
