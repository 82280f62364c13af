// Shared L2 residency model (see l2_cache.h): the recency order is a list linked by slot numbers,
// the lines are found through a LineIndex.
#include "chip_model/l2_cache.h"

#include <algorithm>
#include <stdexcept>

namespace probelab::chip {

L2Cache::L2Cache(std::uint64_t capacity_bytes) : capacity_(capacity_bytes / kLineBytes) {
  if (capacity_ >= kNil) throw std::invalid_argument("L2Cache: more lines than slot numbers");  // l2_bytes <= 2^36
}

void L2Cache::unlink(std::uint32_t s) {
  Slot& n = slots_[s];
  (n.newer == kNil ? newest_ : slots_[n.newer].older) = n.older;
  (n.older == kNil ? oldest_ : slots_[n.older].newer) = n.newer;
}

void L2Cache::link_newest(std::uint32_t s) {
  Slot& n = slots_[s];
  n.newer = kNil;
  n.older = newest_;
  (newest_ == kNil ? oldest_ : slots_[newest_].newer) = s;
  newest_ = s;
}

void L2Cache::touch(std::uint64_t line, std::uint32_t slot, bool write, Access& a) {
  if (slot != kNil) {
    if (slot != newest_) {
      unlink(slot);
      link_newest(slot);
    }
    if (write && !slots_[slot].dirty) {
      slots_[slot].dirty = true;
      ++dirty_lines_;
    }
    return;
  }
  if (capacity_ == 0) {
    if (write) a.writebacks.push_back(line * kLineBytes);  // no L2: the write goes straight through
    return;
  }
  if (index_.size() >= capacity_) {  // the least recently used line gives up its slot
    slot = oldest_;
    unlink(slot);
    const Slot& victim = slots_[slot];
    if (victim.dirty) {
      a.writebacks.push_back(victim.line * kLineBytes);
      --dirty_lines_;
    }
    index_.erase(victim.line);
  } else if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot].line = line;
  slots_[slot].dirty = write;
  link_newest(slot);
  index_.insert(line, slot);
  if (write) ++dirty_lines_;
}

L2Cache::Access L2Cache::access(std::uint64_t addr, std::uint64_t bytes, bool write) {
  Access a;
  if (bytes == 0) return a;
  const std::uint64_t first = addr / kLineBytes, last = (addr + bytes - 1) / kLineBytes;
  for (std::uint64_t line = first; line <= last; ++line) {
    const std::uint64_t lo = std::max(addr, line * kLineBytes), hi = std::min(addr + bytes, (line + 1) * kLineBytes);
    const std::uint32_t slot = index_.find(line);
    if (write) {
      a.written_bytes += hi - lo;
    } else if (slot != kNil) {
      a.hit_bytes += hi - lo;
    } else {
      a.miss_bytes += hi - lo;
      a.fetched_bytes += kLineBytes;
    }
    touch(line, slot, write, a);
  }
  return a;
}

L2Cache::Access L2Cache::read(std::uint64_t addr, std::uint64_t bytes) { return access(addr, bytes, false); }
L2Cache::Access L2Cache::write(std::uint64_t addr, std::uint64_t bytes) { return access(addr, bytes, true); }

L2Cache::Access L2Cache::lookup(std::uint64_t addr, std::uint64_t bytes) {
  Access a;
  if (bytes == 0) return a;
  const std::uint64_t first = addr / kLineBytes, last = (addr + bytes - 1) / kLineBytes;
  for (std::uint64_t line = first; line <= last; ++line) {
    const std::uint64_t lo = std::max(addr, line * kLineBytes), hi = std::min(addr + bytes, (line + 1) * kLineBytes);
    (index_.find(line) != kNil ? a.hit_bytes : a.miss_bytes) += hi - lo;
  }
  return a;
}

L2Cache::Access L2Cache::invalidate(std::uint64_t addr, std::uint64_t bytes) {
  Access a;
  if (bytes == 0 || index_.size() == 0) return a;
  const std::uint64_t first = addr / kLineBytes, last = (addr + bytes - 1) / kLineBytes;
  for (std::uint64_t line = first; line <= last; ++line) {
    const std::uint32_t slot = index_.find(line);
    if (slot == kNil) continue;
    const bool whole = addr <= line * kLineBytes && addr + bytes >= (line + 1) * kLineBytes;
    if (slots_[slot].dirty) {
      if (!whole) a.writebacks.push_back(line * kLineBytes);
      --dirty_lines_;
    }
    a.invalidated_bytes += kLineBytes;
    unlink(slot);
    index_.erase(line);
    free_.push_back(slot);
  }
  return a;
}

bool L2Cache::dirty(std::uint64_t addr) const {
  const std::uint32_t slot = index_.find(addr / kLineBytes);
  return slot != kNil && slots_[slot].dirty;
}

void L2Cache::merge(Access& acc, const Access& a) {
  acc.hit_bytes += a.hit_bytes;
  acc.miss_bytes += a.miss_bytes;
  acc.fetched_bytes += a.fetched_bytes;
  acc.written_bytes += a.written_bytes;
  acc.invalidated_bytes += a.invalidated_bytes;
  acc.writebacks.insert(acc.writebacks.end(), a.writebacks.begin(), a.writebacks.end());
}

}  // namespace probelab::chip
