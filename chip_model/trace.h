// Deterministic timeline recorder, written as Chrome/Perfetto trace JSON ("traceEvents") or as
// Perfetto's native protobuf trace. No SystemC: times are absolute picoseconds from the caller.
//
// Layout: one process (pid) per chip = rank (the host uses kHostPid + rank), one track per
// resource that works serially: "core<i>.mte", "core<i>.cube", "core<i>.vector", "stream<s>",
// "hbm.ch<c>" (one per HBM channel), "pcie.h2d", "pcie.d2h", "capture", "capture.stall",
// "capture_dma", "detect <kind>", "irq", "link->r<d>", "collective"; on the host "main", "isr",
// "report". A caller that records work which really overlaps on one track gets it shown whole
// anyway: the writer moves a slice that would break the nesting rule onto an extra lane
// ("<track> #2", ...) and counts it (stats().lane_slices), so nothing is dropped by a viewer.
//
// Output rules (both formats, checked by tests on every bundled trace):
//  - every boundary is rounded to the nearest nanosecond, start and end alike (monotone, so
//    nesting and order survive; a slice shorter than 1 ns may become 0 ns long, never negative);
//  - on each track slices nest (a slice starting inside another ends inside it) and appear in
//    start order, longer first on ties;
//  - JSON timestamps are microseconds with three decimals, and each "dur" is chosen so that the
//    double sum ts + dur a viewer computes equals the end exactly (no 36.346563 + 0.032223 =
//    36.378786000000005 overshoot);
//  - the file depends only on what was recorded (names, times, args, keys), never on the order
//    of recording among equal keys beyond the insertion sequence, so the same simulation gives the
//    same bytes, and per-chip recording in several processes merges to the same bytes.
//
// Cost when disabled: callers test enabled() (an inline bool read) before building names/args.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
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

  /// Process ids: chip r is r, its host kHostPid + r, switch s kSwitchPid + s (leaves first, then
  /// spines; collective/cluster_topology.h): apart for any job below a million ranks (with 1000
  /// and 2000, a 1,024-rank job put chip 1000's tracks into host 0's process, host 1000's into
  /// the switch's).
  static constexpr std::uint32_t kHostPid = 1'000'000;
  static constexpr std::uint32_t kSwitchPid = 2'000'000;

  explicit Trace(bool enabled = false) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  void set_enabled(bool on) { enabled_ = on; }

  // ---- recording ----
  /// A span of work ("X" event) on track `track` of process `pid`.
  void complete(std::uint32_t pid, std::string_view track, std::string_view name, std::string_view category,
                std::uint64_t start_ps, std::uint64_t dur_ps, Args args = {});
  /// A point in time ("i" event, thread scope).
  void instant(std::uint32_t pid, std::string_view track, std::string_view name, std::string_view category,
               std::uint64_t ts_ps, Args args = {});
  /// A sample of a level counter: counter track `name` of `pid`, series `unit` (e.g. "bytes");
  /// the value holds until the next sample.
  void counter(std::uint32_t pid, std::string_view name, std::string_view unit, std::uint64_t ts_ps, double value);
  /// A rate counter: `amount` (e.g. bytes) spread evenly over [start, start + dur) (all of it at
  /// `start` when dur is 0); written as amount per nanosecond (bytes/ns = GB/s) averaged over
  /// bins of rate_bin_ps(). Integer sums: the result does not depend on the order of calls.
  void rate(std::uint32_t pid, std::string_view name, std::string_view unit, std::uint64_t start_ps,
            std::uint64_t dur_ps, std::uint64_t amount);
  /// Joins the innermost slice of (pid, track) that encloses `ts_ps` (start <= ts <= end) to the
  /// flow `key`: the slices of one key are linked by arrows in time order. Slices of one flow
  /// must share a category (Chrome binds a flow to slices of its own category). A point that no
  /// slice encloses is counted in stats().unbound_flow_points and left out.
  void flow(std::string_view key, std::uint32_t pid, std::string_view track, std::uint64_t ts_ps);

  /// Display names ("process_name" metadata), e.g. "chip0", "host".
  void set_process_name(std::uint32_t pid, std::string name);
  /// Optional display order of a track within its process (lower first; default: by name).
  void set_track_order(std::uint32_t pid, std::string_view track, int order);
  void set_rate_bin_ps(std::uint64_t ps) { rate_bin_ps_ = ps == 0 ? 1 : ps; }
  std::uint64_t rate_bin_ps() const { return rate_bin_ps_; }

  // ---- what was recorded ----
  struct Event {
    char phase;  // 'X' slice, 'i' instant, 'C' counter sample
    std::uint32_t pid;
    std::string track;     // counters: the unit
    std::string name;
    std::string category;
    std::uint64_t ts_ps;
    std::uint64_t dur_ps;
    double value;  // counters
    Args args;
  };
  struct FlowPoint {
    std::string key;
    std::uint32_t pid;
    std::string track;
    std::uint64_t ts_ps;
  };
  struct Rate {
    std::string unit;
    std::map<std::uint64_t, std::uint64_t> bins;  // bin index -> amount
  };
  const std::vector<Event>& events() const { return events_; }
  const std::vector<FlowPoint>& flow_points() const { return flows_; }
  /// Rate keys (pid, name) in (pid, name) order; found by a (pid, string_view) without a copy.
  struct RateKeyLess {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      if (a.first != b.first) return a.first < b.first;
      return std::string_view(a.second) < std::string_view(b.second);
    }
  };
  using Rates = std::map<std::pair<std::uint32_t, std::string>, Rate, RateKeyLess>;
  const Rates& rates() const { return rates_; }
  const std::map<std::uint32_t, std::string>& process_names() const { return process_names_; }
  const std::map<std::pair<std::uint32_t, std::string>, int>& track_orders() const { return track_order_; }
  /// For each (pid, ts_ps) query, the innermost slice of (pid, track) enclosing ts_ps, as recorded
  /// (before lane assignment): the latest start, then the shortest, then the first recorded. One
  /// pass over the events for all queries.
  std::vector<std::optional<Event>> slices_at(std::string_view track,
                                              const std::vector<std::pair<std::uint32_t, std::uint64_t>>& queries) const;
  std::size_t size() const { return events_.size(); }
  void clear();

  /// Calls f(pid, name, category, dur_ps, args) for every span ("X" event), in insertion order.
  template <class F>
  void each_span(F&& f) const {
    for (const auto& e : events_)
      if (e.phase == 'X') f(e.pid, e.name, e.category, e.dur_ps, e.args);
  }

  // ---- merging the traces of the partitions of a distributed run ----
  /// Everything recorded (events, flow points, rate bins, process names, track orders, the rate
  /// bin) as bytes. The partitions' traces appended in partition order give the same file as the
  /// one-process trace: events keep their order within a partition, flows and rates do not depend
  /// on the order of recording, and lanes are assigned when the trace is written.
  std::vector<std::uint8_t> serialize() const;
  /// Appends a serialize() result: events and flow points behind this trace's, rate bins added.
  /// Throws std::runtime_error on malformed bytes or a different rate bin.
  void append_serialized(const std::vector<std::uint8_t>& bytes);
  /// Moves `other`'s recording behind this trace's (as append_serialized(other.serialize()) would).
  void append(Trace&& other);

  // ---- a window of steps (probelab run --trace-steps FIRST:LAST) ----
  /// Keeps of each rank (its chip's pid r and its host's kHostPid + r) only what overlaps its
  /// steps [first, last], as its host's "step N" slices on track "main" delimit them; of a switch
  /// (any other pid) what overlaps the union of the ranks' windows. A counter keeps its last
  /// sample before the window (the level it starts at), a rate its bins that overlap it. While
  /// the run goes on, what certainly lies before a rank's window (ending before the end of one of
  /// its steps before `first`) or after it (starting after the end of step `last`) is dropped as
  /// it comes or in passes as the recording grows, so a long run holds about the window;
  /// close_step_window() drops the rest. The result depends only on what was recorded (the same
  /// for any partitioning).
  void set_step_window(std::uint32_t first, std::uint32_t last);
  /// Drops whatever lies outside the window (after the partitions' traces were merged; before
  /// writing). No-op without a window.
  void close_step_window();

  // ---- output ----
  enum class Format { Json, Perfetto };
  /// Parses "json" | "perfetto"; throws std::invalid_argument naming the choices otherwise.
  static Format parse_format(std::string_view s);
  /// File name of the trace in an output directory: "trace.json" | "trace.pftrace".
  static const char* file_name(Format f);

  void write_json(std::ostream& out) const;
  /// Perfetto's TracePacket stream (perfetto.protos.Trace): one track descriptor per process,
  /// track and counter, slices as SLICE_BEGIN/END pairs, flows as flow_ids.
  void write_perfetto(std::ostream& out) const;
  std::string to_json_string() const;
  void write_file(const std::string& path, Format format = Format::Json) const;  // throws on I/O errors

  /// What the layout had to do (same for both formats).
  struct Stats {
    std::uint64_t slices = 0;               // 'X' events written
    std::uint64_t lane_slices = 0;          // slices moved to an extra lane to keep nesting
    std::uint64_t flows = 0;                // flows with at least two bound slices
    std::uint64_t unbound_flow_points = 0;  // flow points no slice enclosed
    std::uint64_t mixed_category_flows = 0; // flows whose slices have different categories
  };
  Stats stats() const;

 private:
  bool enabled_;
  std::uint64_t rate_bin_ps_ = 100'000;  // 100 ns
  std::vector<Event> events_;
  std::vector<FlowPoint> flows_;
  Rates rates_;
  std::map<std::uint32_t, std::string> process_names_;
  std::map<std::pair<std::uint32_t, std::string>, int> track_order_;

  /// What is known of one rank's window while recording: drop what ends before `cut` or starts
  /// after `end`.
  struct RankBounds {
    std::uint64_t cut = 0, end = UINT64_MAX;
  };
  struct StepWindow {
    std::uint32_t first = 0, last = 0;
    std::vector<RankBounds> ranks;  // by rank
    std::size_t purge_at = 1 << 16;  // event count of the next pass
  };
  std::optional<StepWindow> window_;
  /// Rank of a chip's or host's pid; nullopt for a switch's.
  static std::optional<std::uint32_t> rank_of(std::uint32_t pid);
  /// With a window: notes a host's step slice, and whether [start, end] lies outside what is kept.
  bool outside_window(std::uint32_t pid, std::string_view track, std::string_view name, std::uint64_t start,
                      std::uint64_t end);
  /// Drops what lies outside `bounds` (by rank; `past` for a rank past them; switches untouched
  /// unless `shared` is given).
  void drop_outside(const std::vector<RankBounds>& bounds, const RankBounds& past, const std::optional<RankBounds>& shared);
  void maybe_purge();
};

}  // namespace probelab::chip
