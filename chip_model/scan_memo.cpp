#include "chip_model/scan_memo.h"

#include <algorithm>

namespace probelab::chip {

bool ScanMemo::Entry::same_layout(const graph::TensorDesc& d) const {
  return d.dtype == dtype && d.format == format && d.shape.size() == rank &&
         std::equal(d.shape.begin(), d.shape.end(), dims.begin());
}

std::pair<std::size_t, std::size_t> ScanMemo::overlapping(std::uint64_t addr, std::uint64_t len) const {
  auto first = std::lower_bound(starts_.begin(), starts_.end(), addr);
  // The ranges are disjoint: only the one just before can reach into [addr, ...).
  if (first != starts_.begin() && *std::prev(first) + entries_[static_cast<std::size_t>(first - starts_.begin()) - 1].len > addr)
    --first;
  const auto last = std::lower_bound(first, starts_.end(), addr + len);
  return {static_cast<std::size_t>(first - starts_.begin()), static_cast<std::size_t>(last - starts_.begin())};
}

void ScanMemo::note(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc, const num::ScanReport& scan) {
  if (len == 0) return;
  if (desc.shape.size() > kMaxDims) return forget(addr, len);
  Entry e{len, true, desc.dtype, desc.format, static_cast<std::uint8_t>(desc.shape.size()), {}, scan};
  std::copy(desc.shape.begin(), desc.shape.end(), e.dims.begin());
  const auto [a, b] = overlapping(addr, len);
  const auto da = static_cast<std::ptrdiff_t>(a);
  if (a == b) {
    entries_.insert(entries_.begin() + da, e);
    starts_.insert(starts_.begin() + da, addr);
    return;
  }
  // The overlapped entries give way to this one, in the first one's slot (the same range noted
  // again, the tensor stored at the next step, moves nothing).
  for (std::size_t i = a; i < b; ++i) forgotten_ -= entries_[i].live ? 0 : 1;
  entries_[a] = e;
  starts_[a] = addr;
  const auto db = static_cast<std::ptrdiff_t>(b);
  entries_.erase(entries_.begin() + da + 1, entries_.begin() + db);
  starts_.erase(starts_.begin() + da + 1, starts_.begin() + db);
}

std::optional<num::ScanReport> ScanMemo::find(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& desc) const {
  const auto at = std::lower_bound(starts_.begin(), starts_.end(), addr);
  if (at == starts_.end() || *at != addr) return std::nullopt;
  const Entry& e = entries_[static_cast<std::size_t>(at - starts_.begin())];
  if (!e.live || e.len != len || !e.same_layout(desc)) return std::nullopt;
  return e.scan;
}

void ScanMemo::forget(std::uint64_t addr, std::uint64_t len) {
  if (starts_.empty() || len == 0) return;
  const auto [a, b] = overlapping(addr, len);
  for (std::size_t i = a; i < b; ++i)
    if (entries_[i].live) {
      entries_[i].live = false;
      ++forgotten_;
    }
  if (forgotten_ > 64 && forgotten_ > starts_.size() / 2) drop_forgotten();
}

void ScanMemo::drop_forgotten() {
  std::size_t out = 0;
  for (std::size_t i = 0; i < starts_.size(); ++i)
    if (entries_[i].live) {
      starts_[out] = starts_[i];
      entries_[out++] = entries_[i];
    }
  starts_.resize(out);
  entries_.resize(out);
  forgotten_ = 0;
}

}  // namespace probelab::chip
