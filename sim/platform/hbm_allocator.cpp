#include "sim/platform/hbm_allocator.h"

#include <stdexcept>

#include <fmt/format.h>

namespace probelab::sim {

HbmAllocator::HbmAllocator(std::uint64_t base, std::uint64_t limit) {
  if (limit > base) free_.emplace(base, limit - base);
}

std::uint64_t HbmAllocator::free_bytes() const {
  std::uint64_t n = 0;
  for (const auto& [a, s] : free_) n += s;
  return n;
}

std::uint64_t HbmAllocator::alloc(std::size_t bytes, std::size_t align) {
  if (bytes == 0) throw std::invalid_argument("HBM alloc: zero bytes requested");
  if (align == 0 || (align & (align - 1)) != 0)
    throw std::invalid_argument(fmt::format("HBM alloc: alignment {} is not a power of two", align));
  if (align < 64) align = 64;
  const std::uint64_t size = (static_cast<std::uint64_t>(bytes) + 63) & ~std::uint64_t{63};
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const std::uint64_t start = it->first, len = it->second;
    const std::uint64_t addr = (start + align - 1) & ~static_cast<std::uint64_t>(align - 1);
    if (addr + size > start + len) continue;
    free_.erase(it);
    if (addr > start) free_.emplace(start, addr - start);
    if (addr + size < start + len) free_.emplace(addr + size, start + len - (addr + size));
    live_.emplace(addr, size);
    used_ += size;
    if (used_ > peak_) peak_ = used_;
    return addr;
  }
  throw std::runtime_error(fmt::format("HBM exhausted: {} bytes requested (aligned {}), {} bytes free in {} fragments, "
                                       "{} bytes in use",
                                       bytes, align, free_bytes(), free_.size(), used_));
}

void HbmAllocator::free(std::uint64_t addr) {
  auto it = live_.find(addr);
  if (it == live_.end()) throw std::invalid_argument(fmt::format("HBM free: 0x{:x} is not an allocated block", addr));
  std::uint64_t start = addr, size = it->second;
  live_.erase(it);
  used_ -= size;
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(start, size);
}

}  // namespace probelab::sim
