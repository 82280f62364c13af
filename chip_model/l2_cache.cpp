// Shared L2 residency model (see l2_cache.h).
#include "chip_model/l2_cache.h"

#include <algorithm>

namespace probelab::chip {

L2Cache::L2Cache(std::uint64_t capacity_bytes) : capacity_(capacity_bytes / kLineBytes) {}

void L2Cache::touch(std::uint64_t line, bool write, Access& a) {
  auto it = lines_.find(line);
  if (it != lines_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    if (write && !it->second.dirty) {
      it->second.dirty = true;
      ++dirty_lines_;
    }
    return;
  }
  if (capacity_ == 0) {
    if (write) a.writebacks.push_back(line * kLineBytes);  // no L2: the write goes straight through
    return;
  }
  if (lines_.size() >= capacity_) {
    const std::uint64_t victim = lru_.back();
    lru_.pop_back();
    const auto v = lines_.find(victim);
    if (v->second.dirty) {
      a.writebacks.push_back(victim * kLineBytes);
      --dirty_lines_;
    }
    lines_.erase(v);
  }
  lru_.push_front(line);
  lines_.emplace(line, Line{lru_.begin(), write});
  if (write) ++dirty_lines_;
}

L2Cache::Access L2Cache::access(std::uint64_t addr, std::uint64_t bytes, bool write) {
  Access a;
  if (bytes == 0) return a;
  const std::uint64_t first = addr / kLineBytes, last = (addr + bytes - 1) / kLineBytes;
  for (std::uint64_t line = first; line <= last; ++line) {
    const std::uint64_t lo = std::max(addr, line * kLineBytes), hi = std::min(addr + bytes, (line + 1) * kLineBytes);
    if (write) {
      a.written_bytes += hi - lo;
    } else if (lines_.count(line) != 0) {
      a.hit_bytes += hi - lo;
    } else {
      a.miss_bytes += hi - lo;
      a.fetched_bytes += kLineBytes;
    }
    touch(line, write, a);
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
    (lines_.count(line) != 0 ? a.hit_bytes : a.miss_bytes) += hi - lo;
  }
  return a;
}

L2Cache::Access L2Cache::invalidate(std::uint64_t addr, std::uint64_t bytes) {
  Access a;
  if (bytes == 0) return a;
  const std::uint64_t first = addr / kLineBytes, last = (addr + bytes - 1) / kLineBytes;
  for (std::uint64_t line = first; line <= last; ++line) {
    auto it = lines_.find(line);
    if (it == lines_.end()) continue;
    const bool whole = addr <= line * kLineBytes && addr + bytes >= (line + 1) * kLineBytes;
    if (it->second.dirty) {
      if (!whole) a.writebacks.push_back(line * kLineBytes);
      --dirty_lines_;
    }
    a.invalidated_bytes += kLineBytes;
    lru_.erase(it->second.lru);
    lines_.erase(it);
  }
  return a;
}

bool L2Cache::dirty(std::uint64_t addr) const {
  const auto it = lines_.find(addr / kLineBytes);
  return it != lines_.end() && it->second.dirty;
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
