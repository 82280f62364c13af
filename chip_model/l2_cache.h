// The chip's shared L2 in front of HBM, for the timing model (ChipConfig::l2_model = "shared").
// Plain C++, no SystemC; values live in HBM (the L2 holds no bytes, only which lines are
// resident and dirty).
//
// Contract:
//  - capacity = ChipConfig::l2_bytes, split into lines of kLineBytes; fully associative, least
//    recently used line replaced first.
//  - read(addr, bytes): every line the range touches is looked up; a resident line is a hit
//    (its bytes in the range count as hit bytes), a missing one is a miss (its bytes in the range
//    count as miss bytes; the whole line is fetched from HBM, fetched_bytes, and allocated clean).
//  - write(addr, bytes): write-allocate without fetch (tiles write whole lines), the lines
//    become dirty; their bytes count as written.
//  - an allocation that evicts a dirty line counts kLineBytes of write-back (the caller sends
//    them to HBM); a clean eviction costs nothing.
//  - lookup(addr, bytes): a read that does not allocate (initiators outside the AI cores: the
//    capture engines, host DMA, collectives): resident lines are hits (dirty ones stay dirty),
//    missing lines are miss bytes served by HBM; nothing is fetched, evicted or reordered (the
//    replacement order stays the cores' own, so a debug read cannot change what the next op hits).
//  - invalidate(addr, bytes): a write that bypasses the L2 (host DMA, streaming writes): every
//    resident line the range touches is dropped so no stale copy survives; a dirty line the
//    range covers only partly is written back first (its other bytes are still the newest),
//    a wholly overwritten dirty line is dropped without write-back.
//  - deterministic: the outcome depends only on the sequence of calls.
#pragma once

#include <cstdint>
#include <vector>

#include "chip_model/line_index.h"

namespace probelab::chip {

class L2Cache {
 public:
  /// Line size: the granule hits, misses and write-backs are counted in (estimate: the 512 B an
  /// MTE burst and a 16 x 16 FP16 fractal move).
  static constexpr std::uint64_t kLineBytes = 512;

  struct Access {
    std::uint64_t hit_bytes = 0, miss_bytes = 0, fetched_bytes = 0, written_bytes = 0;
    std::uint64_t invalidated_bytes = 0;    // resident line bytes dropped by invalidate()
    std::vector<std::uint64_t> writebacks;  // addresses of evicted dirty lines
  };

  explicit L2Cache(std::uint64_t capacity_bytes);

  Access read(std::uint64_t addr, std::uint64_t bytes);
  Access write(std::uint64_t addr, std::uint64_t bytes);
  Access lookup(std::uint64_t addr, std::uint64_t bytes);
  Access invalidate(std::uint64_t addr, std::uint64_t bytes);
  /// Whether the line holding `addr` is resident (dirty: and modified since it was fetched).
  bool resident(std::uint64_t addr) const { return index_.find(addr / kLineBytes) != LineIndex::kNone; }
  bool dirty(std::uint64_t addr) const;
  /// Adds the outcome of one call to `acc` (sums the counts, appends the write-backs).
  static void merge(Access& acc, const Access& a);

  std::uint64_t capacity_lines() const { return capacity_; }
  std::uint64_t resident_bytes() const { return index_.size() * kLineBytes; }
  std::uint64_t dirty_bytes() const { return dirty_lines_ * kLineBytes; }

 private:
  static constexpr std::uint32_t kNil = LineIndex::kNone;
  /// A resident line in its slot, linked into the recency order (by slot numbers).
  struct Slot {
    std::uint64_t line = 0;
    std::uint32_t newer = kNil, older = kNil;
    bool dirty = false;
  };
  Access access(std::uint64_t addr, std::uint64_t bytes, bool write);
  /// Makes `line` (at `slot`, or kNil when not resident) the most recently used, allocating it.
  void touch(std::uint64_t line, std::uint32_t slot, bool write, Access& a);
  void unlink(std::uint32_t s);
  void link_newest(std::uint32_t s);

  std::uint64_t capacity_;          // lines
  std::vector<Slot> slots_;         // grows to at most capacity_ entries
  std::vector<std::uint32_t> free_;  // slots emptied by invalidate()
  std::uint32_t newest_ = kNil, oldest_ = kNil;
  LineIndex index_;                 // line -> slot
  std::uint64_t dirty_lines_ = 0;
};

}  // namespace probelab::chip
