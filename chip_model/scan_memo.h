// What the detection circuit's scans found in tensors held in HBM. A kernel that stores an output
// it has scanned (NaN, Inf and subnormal counts and first indices over its logical elements)
// notes the scan with the range and the layout it wrote; a kernel that loads exactly that range
// in that layout takes the scan instead of scanning the bytes again. A write into a range forgets
// every scan noted over it (Hbm calls forget() on every path that changes its bytes), so bytes
// written by anything else (a DMA, a collective, an injected bit flip) are scanned afresh.
// Ranges noted are disjoint (noting forgets what overlaps), at most one per stored tensor.
//
// Host-side only: a scan taken from here equals the scan of the bytes, so whether a range is
// remembered changes no result. Layouts of more than kMaxDims dimensions are not remembered.
// Storage: the ranges' starts in one sorted array (searched on every load and write of HBM,
// without a pointer per entry) and their layouts and scans beside it, the layout held inline. A
// write marks the scans it covers forgotten and leaves them in place, so that the next note of
// the same range (the same tensor stored again at the next step) reuses its slot and nothing
// moves; the forgotten ones are dropped when they outnumber the others.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "graph/tensor.h"
#include "numerics/bulk.h"

namespace probelab::chip {

class ScanMemo {
 public:
  static constexpr std::size_t kMaxDims = 8;

  void note(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc, const num::ScanReport& scan);
  /// The scan noted for [addr, addr + len) stored as `desc`, if nothing was written there since.
  std::optional<num::ScanReport> find(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc) const;
  void forget(std::uint64_t addr, std::uint64_t len);
  /// Scans remembered (not forgotten).
  std::size_t size() const { return starts_.size() - forgotten_; }

 private:
  struct Entry {
    std::uint64_t len = 0;
    bool live = false;
    graph::DType dtype = graph::DType::F32;
    graph::Format format = graph::Format::ND;
    std::uint8_t rank = 0;
    std::array<std::int64_t, kMaxDims> dims{};
    num::ScanReport scan;
    bool same_layout(const graph::TensorDesc& d) const;
  };
  /// Indices [first, last) of the entries (remembered or not) that overlap [addr, addr + len).
  std::pair<std::size_t, std::size_t> overlapping(std::uint64_t addr, std::uint64_t len) const;
  void drop_forgotten();

  // Disjoint ranges, ascending; entries_[i] starts at starts_[i]. `forgotten_` of them are not live.
  std::vector<std::uint64_t> starts_;
  std::vector<Entry> entries_;
  std::size_t forgotten_ = 0;
};

}  // namespace probelab::chip
