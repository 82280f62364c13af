// The performance monitoring unit of one chip (registers: spec::kRegPmuBase, spec/registers.h).
// Units report work with the absolute time it is done; a register read at time t sees exactly
// the work done by t, whatever order the (temporally decoupled) units reported it in. No
// SystemC here: times are picoseconds, the chip passes the read time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "chip_model/spec/registers.h"

namespace probelab::chip {

class PerfMonitor {
 public:
  using Counters = std::array<std::uint64_t, spec::kPmuCounters>;

  /// Adds `delta` (kPmuCycle ignored) to the counters once time reaches `done_ps`. `now_ps` is
  /// the simulation kernel's time: no register access comes earlier any more, so the work done
  /// by then is folded into the totals (what waits is only the work still in flight: memory
  /// stays bounded however long the run).
  void add(std::uint64_t done_ps, const Counters& delta, std::uint64_t now_ps);
  /// Adds `amount` to one counter at `done_ps` (`now_ps` as above).
  void add(std::uint64_t done_ps, spec::PmuCounter counter, std::uint64_t amount, std::uint64_t now_ps);
  /// Work added and not yet folded into the totals.
  std::size_t in_flight() const { return pending_.size(); }
  /// Counters as of `now_ps` (kPmuCycle is the caller's to fill).
  Counters at(std::uint64_t now_ps);
  /// Register access. `cycle` is the device cycle of the access, `capture_stall` the capture
  /// unit's stall counter now (mirrored as kPmuCaptureStall).
  std::uint32_t read_reg(std::uint32_t offset, std::uint64_t now_ps, std::uint64_t cycle, std::uint64_t capture_stall);
  void write_reg(std::uint32_t offset, std::uint32_t value, std::uint64_t now_ps, std::uint64_t capture_stall);
  static bool owns(std::uint32_t offset) {
    return offset >= spec::kRegPmuBase && offset <= spec::kRegPmuClear;
  }

 private:
  void fold(std::uint64_t now_ps);
  Counters done_{};
  /// (completion time, work), a min-heap by time (std::push_heap with Later): no node to allocate
  /// per add.
  std::vector<std::pair<std::uint64_t, Counters>> pending_;
  std::uint64_t capture_stall_base_ = 0;           // capture stall at the last clear
  std::array<std::uint32_t, spec::kPmuCounters> hi_latch_{};
};

}  // namespace probelab::chip
