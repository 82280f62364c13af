#include "chip_model/scan_memo.h"

#include <algorithm>

namespace probelab::chip {

bool ScanMemo::Entry::same_layout(const graph::TensorDesc& d) const {
  return d.dtype == dtype && d.format == format && d.shape.size() == rank &&
         std::equal(d.shape.begin(), d.shape.end(), dims.begin());
}

void ScanMemo::note(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc, const num::ScanReport& scan) {
  if (len == 0) return;
  forget(addr, len);
  if (desc.shape.size() > kMaxDims) return;
  Entry e{len, desc.dtype, desc.format, static_cast<std::uint8_t>(desc.shape.size()), {}, scan};
  std::copy(desc.shape.begin(), desc.shape.end(), e.dims.begin());
  const auto at = std::lower_bound(starts_.begin(), starts_.end(), addr);
  entries_.insert(entries_.begin() + (at - starts_.begin()), e);
  starts_.insert(at, addr);
}

std::optional<num::ScanReport> ScanMemo::find(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc) const {
  const auto at = std::lower_bound(starts_.begin(), starts_.end(), addr);
  if (at == starts_.end() || *at != addr) return std::nullopt;
  const Entry& e = entries_[static_cast<std::size_t>(at - starts_.begin())];
  if (e.len != len || !e.same_layout(desc)) return std::nullopt;
  return e.scan;
}

void ScanMemo::forget(std::uint64_t addr, std::uint64_t len) {
  if (starts_.empty() || len == 0) return;
  auto first = std::lower_bound(starts_.begin(), starts_.end(), addr);
  if (first != starts_.begin()) {
    const auto prev = std::prev(first);  // starts before: erased when it reaches into the range
    if (*prev + entries_[static_cast<std::size_t>(prev - starts_.begin())].len > addr) first = prev;
  }
  const auto last = std::lower_bound(first, starts_.end(), addr + len);
  if (first == last) return;
  const auto a = first - starts_.begin(), b = last - starts_.begin();
  entries_.erase(entries_.begin() + a, entries_.begin() + b);
  starts_.erase(first, last);
}

}  // namespace probelab::chip
