// Deterministic timeline recorder, written as Chrome/Perfetto trace JSON ("traceEvents").
// No SystemC: times are absolute picoseconds supplied by the caller.
//
// Layout: one process (pid) per chip = rank (the host may use its own pid, see kHostPid), one
// track (thread) per unit: "core<i>.mte", "core<i>.cube", "core<i>.vector", "hbm", "pcie",
// "capture", "irq", "stream<s>", "host", ... Tracks are created on first use; their tids and the
// order of events in the file depend only on names and times, never on insertion order, so the
// same simulation gives the same bytes.
//
// Cost when disabled: callers test enabled() (an inline bool read) before building names/args.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace probelab::chip {

class Trace {
 public:
  using ArgValue = std::variant<std::int64_t, std::uint64_t, double, std::string>;
  using Args = std::vector<std::pair<std::string, ArgValue>>;

  static constexpr std::uint32_t kHostPid = 1000;  // conventional pid of the host model

  explicit Trace(bool enabled = false) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  void set_enabled(bool on) { enabled_ = on; }

  /// A span of work ("X" event) on track `track` of process `pid`.
  void complete(std::uint32_t pid, std::string_view track, std::string_view name,
                std::string_view category, std::uint64_t start_ps, std::uint64_t dur_ps,
                Args args = {});
  /// A point in time ("i" event, thread scope).
  void instant(std::uint32_t pid, std::string_view track, std::string_view name,
               std::string_view category, std::uint64_t ts_ps, Args args = {});
  /// A counter sample ("C" event); Perfetto draws one counter track per (pid, name).
  void counter(std::uint32_t pid, std::string_view name, std::uint64_t ts_ps, double value);

  /// Display names ("process_name" metadata), e.g. "chip0", "host".
  void set_process_name(std::uint32_t pid, std::string name);
  /// Optional display order of a track within its process (lower first; default: by name).
  void set_track_order(std::uint32_t pid, std::string_view track, int order);

  std::size_t size() const { return events_.size(); }
  void clear();

  /// Writes the whole trace as JSON. Events are sorted by (pid, track, start, seq of
  /// insertion among identical keys); timestamps are microseconds with picosecond precision.
  void write_json(std::ostream& out) const;
  std::string to_json_string() const;
  void write_file(const std::string& path) const;  // throws std::runtime_error on I/O errors

 private:
  struct Event {
    char phase;  // 'X', 'i', 'C'
    std::uint32_t pid;
    std::string track;
    std::string name;
    std::string category;
    std::uint64_t ts_ps;
    std::uint64_t dur_ps;
    double value;  // counters
    Args args;
  };
  bool enabled_;
  std::vector<Event> events_;
  std::map<std::uint32_t, std::string> process_names_;
  std::map<std::pair<std::uint32_t, std::string>, int> track_order_;
};

}  // namespace probelab::chip
