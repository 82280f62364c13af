#include "chip_model/scan_memo.h"

namespace probelab::chip {

void ScanMemo::note(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc, const num::ScanReport& scan) {
  if (len == 0) return;
  forget(addr, len);
  by_addr_.emplace(addr, Entry{len, desc, scan});
}

std::optional<num::ScanReport> ScanMemo::find(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc) const {
  const auto it = by_addr_.find(addr);
  if (it == by_addr_.end() || it->second.len != len || !(it->second.desc == desc)) return std::nullopt;
  return it->second.scan;
}

void ScanMemo::forget(std::uint64_t addr, std::uint64_t len) {
  if (by_addr_.empty() || len == 0) return;
  auto it = by_addr_.lower_bound(addr);
  if (it != by_addr_.begin()) {
    const auto prev = std::prev(it);
    if (prev->first + prev->second.len > addr) by_addr_.erase(prev);  // starts before, reaches into the range
  }
  while (it != by_addr_.end() && it->first < addr + len) it = by_addr_.erase(it);
}

}  // namespace probelab::chip
