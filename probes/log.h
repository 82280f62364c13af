// Named debug channels of the probe runtime, written with fmt to stderr. A channel prints when its
// name (or "all") appears in the comma-separated environment variable PROBELAB_DEBUG, e.g.
// PROBELAB_DEBUG=drain,isr. Warnings always print unless PROBELAB_QUIET is set.
#pragma once

#include <cstdio>
#include <string_view>

#include <fmt/format.h>

namespace probelab::probes::log {

bool enabled(std::string_view channel);
bool quiet();

template <class... Args>
void debug(std::string_view channel, fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(channel)) fmt::print(stderr, "[probes:{}] {}\n", channel, fmt::format(f, std::forward<Args>(args)...));
}

template <class... Args>
void warn(std::string_view channel, fmt::format_string<Args...> f, Args&&... args) {
  if (!quiet()) fmt::print(stderr, "[probes:{}] warning: {}\n", channel, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace probelab::probes::log
