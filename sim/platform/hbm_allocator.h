// Host-side allocator of one chip's HBM (what a driver keeps): deterministic first-fit over
// [base, limit) with coalescing frees. No SystemC; addresses are HBM addresses (0 = first byte).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

namespace probelab::sim {

class HbmAllocator {
 public:
  /// Manages [base, limit). `base` > 0 keeps address 0 unused (never a valid allocation).
  HbmAllocator(std::uint64_t base, std::uint64_t limit);

  /// Lowest-address block of `bytes` (rounded up to 64) aligned to `align` (a power of two).
  /// Throws std::runtime_error naming the request and the free space when exhausted, and
  /// std::invalid_argument for a zero size or a bad alignment.
  std::uint64_t alloc(std::size_t bytes, std::size_t align = 64);
  /// Frees a block returned by alloc; throws std::invalid_argument for an unknown address.
  void free(std::uint64_t addr);

  std::uint64_t used_bytes() const { return used_; }
  std::uint64_t peak_bytes() const { return peak_; }
  std::uint64_t free_bytes() const;
  std::size_t live_blocks() const { return live_.size(); }

 private:
  std::map<std::uint64_t, std::uint64_t> free_;  // addr -> size, disjoint and coalesced
  std::map<std::uint64_t, std::uint64_t> live_;  // addr -> size (the block as carved, with padding)
  std::uint64_t used_ = 0, peak_ = 0;
};

}  // namespace probelab::sim
