// Named debug channels of the probe runtime, written with fmt to stderr. A channel prints when its
// name (or "all") appears in the comma-separated environment variable PROBELAB_DEBUG, e.g.
// PROBELAB_DEBUG=drain,isr. Warnings always print unless PROBELAB_QUIET is set.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
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

/// A warning of `rank`, one of the `ranks` ranks of the job. All ranks run the same probe config,
/// so most warnings come once per rank: each distinct (channel, message) prints once per process,
/// as "[probes:CHANNEL] warning: rank R: MSG (and N more ranks)", R the first rank that gave it and
/// N how many other ranks gave it by then. It is held back until every rank gave it, a rank that
/// gave it gives a new warning after another rank did (the ranks have moved on), or
/// flush_rank_warnings() / process exit; held warnings print in order of first appearance, and
/// repeats after printing are silent. Deterministic: ranks simulated in one process warn in a
/// deterministic order.
void warn_rank(std::string_view channel, std::uint32_t rank, std::uint32_t ranks, const std::string& msg);

/// Prints the warnings warn_rank() holds back. For processes that end without running exit
/// handlers (forked children ending with _exit), at the end of each simulation.
void flush_rank_warnings();

}  // namespace probelab::probes::log
