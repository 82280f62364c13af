// What the detection circuit's scans found in tensors held in HBM. A kernel that stores an output
// it has scanned (NaN, Inf and subnormal counts and first indices over its logical elements)
// notes the scan with the range and the layout it wrote; a kernel that loads exactly that range
// in that layout takes the scan instead of scanning the bytes again. A write into a range forgets
// every scan noted over it (Hbm calls forget() on every path that changes its bytes), so bytes
// written by anything else (a DMA, a collective, an injected bit flip) are scanned afresh.
// Ranges noted are disjoint (noting forgets what overlaps), at most one per stored tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

#include "graph/tensor.h"
#include "numerics/bulk.h"

namespace probelab::chip {

class ScanMemo {
 public:
  void note(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc, const num::ScanReport& scan);
  /// The scan noted for [addr, addr + len) stored as `desc`, if nothing was written there since.
  std::optional<num::ScanReport> find(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc) const;
  void forget(std::uint64_t addr, std::uint64_t len);
  std::size_t size() const { return by_addr_.size(); }

 private:
  struct Entry {
    std::uint64_t len = 0;
    graph::TensorDesc desc;
    num::ScanReport scan;
  };
  std::map<std::uint64_t, Entry> by_addr_;
};

}  // namespace probelab::chip
