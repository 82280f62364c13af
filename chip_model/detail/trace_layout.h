// What both trace writers share: recorded events resolved to tracks (with extra lanes where a
// track's slices would not nest), integer-nanosecond boundaries, counter samples and flows.
// Internal to chip_model/trace*.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chip_model/trace.h"

namespace probelab::chip::detail {

/// Picoseconds to the nearest nanosecond (ties up): monotone, so order and nesting survive.
inline std::uint64_t ns_of(std::uint64_t ps) { return (ps + 500) / 1000; }

struct LaidItem {
  const Trace::Event* event;  // 'X' or 'i'
  std::uint64_t start_ns, end_ns;
  std::vector<std::uint64_t> flows_out;  // flow ids leaving / passing this slice
  std::vector<std::uint64_t> flows_end;  // flow ids ending here
};

struct LaidTrack {
  std::uint32_t pid;
  std::string name;  // lanes: "<track> #<k>"
  int tid;           // 1.. within the process, in display order
  std::vector<LaidItem> items;  // start asc, end desc, then recording order: they nest
};

struct LaidCounter {
  std::uint32_t pid;
  std::string name, unit;
  std::vector<std::pair<std::uint64_t, double>> samples;  // (ns, value), ns strictly increasing
};

struct LaidFlow {
  std::uint64_t id;
  std::string category;
  struct Point {
    std::size_t track, item;
  };
  std::vector<Point> points;  // time order, at least two
};

struct Layout {
  std::vector<LaidTrack> tracks;  // by (pid, tid)
  std::vector<LaidCounter> counters;
  std::vector<LaidFlow> flows;
  Trace::Stats stats;
};

Layout lay_out(const Trace& trace);

}  // namespace probelab::chip::detail
