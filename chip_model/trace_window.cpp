// Trace: a window of steps (probelab run --trace-steps FIRST:LAST). See trace.h.
#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>

#include "chip_model/trace.h"

namespace probelab::chip {
namespace {

// "step N" -> N (the host's step slices on its "main" track).
std::optional<std::uint32_t> step_number(std::string_view name) {
  if (!name.starts_with("step ")) return std::nullopt;
  std::uint32_t n = 0;
  const char* b = name.data() + 5;
  const char* e = name.data() + name.size();
  const auto [p, ec] = std::from_chars(b, e, n);
  if (ec != std::errc() || p != e || b == e) return std::nullopt;
  return n;
}

bool overlaps(std::uint64_t start, std::uint64_t end, const std::uint64_t lo, const std::uint64_t hi) {
  return end >= lo && start <= hi;
}

}  // namespace

std::optional<std::uint32_t> Trace::rank_of(std::uint32_t pid) {
  if (pid < kHostPid) return pid;
  if (pid < kSwitchPid) return pid - kHostPid;
  return std::nullopt;
}

void Trace::set_step_window(std::uint32_t first, std::uint32_t last) {
  window_ = StepWindow{};
  window_->first = first;
  window_->last = std::max(first, last);
}

bool Trace::outside_window(std::uint32_t pid, std::string_view track, std::string_view name, std::uint64_t start,
                           std::uint64_t end) {
  StepWindow& w = *window_;
  const std::optional<std::uint32_t> rank = rank_of(pid);
  if (!rank) return false;
  if (*rank >= w.ranks.size()) w.ranks.resize(std::size_t{*rank} + 1);
  RankBounds& b = w.ranks[*rank];
  if (pid >= kHostPid && track == "main")
    if (const auto step = step_number(name)) {
      // Steps end in order: what ended before step k ended lies before step k + 1 began.
      if (*step < w.first) b.cut = std::max(b.cut, end);
      if (*step == w.first) b.cut = std::max(b.cut, start);
      if (*step == w.last) b.end = end;
    }
  return end < b.cut || start > b.end;
}

void Trace::maybe_purge() {
  if (events_.size() < window_->purge_at) return;
  drop_outside(window_->ranks, RankBounds{}, std::nullopt);
  window_->purge_at = std::max<std::size_t>(std::size_t{1} << 16, 2 * events_.size());
}

void Trace::drop_outside(const std::vector<RankBounds>& bounds, const RankBounds& past,
                         const std::optional<RankBounds>& shared) {
  auto bounds_of = [&](std::uint32_t pid) -> std::optional<RankBounds> {
    const std::optional<std::uint32_t> r = rank_of(pid);
    if (!r) return shared;
    return *r < bounds.size() ? bounds[*r] : past;
  };
  // A counter's last sample before its process's window start stays: the level the window opens at.
  std::map<std::pair<std::uint32_t, std::string>, std::size_t> last_before;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    if (e.phase != 'C') continue;
    const auto b = bounds_of(e.pid);
    if (b && e.ts_ps < b->cut) last_before[{e.pid, e.name}] = i;
  }
  std::vector<bool> keep_counter(events_.size(), false);
  for (const auto& [key, i] : last_before) keep_counter[i] = true;
  std::size_t out = 0;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    const auto b = bounds_of(e.pid);
    const bool keep = !b || keep_counter[i] ||
                      (e.phase == 'C' ? e.ts_ps >= b->cut && e.ts_ps <= b->end
                                      : overlaps(e.ts_ps, e.ts_ps + e.dur_ps, b->cut, b->end));
    if (keep) {
      if (out != i) events_[out] = std::move(events_[i]);
      ++out;
    }
  }
  events_.resize(out);
  std::erase_if(flows_, [&](const FlowPoint& f) {
    const auto b = bounds_of(f.pid);
    return b && (f.ts_ps < b->cut || f.ts_ps > b->end);
  });
  for (auto& [key, r] : rates_) {
    const auto b = bounds_of(key.first);
    if (!b) continue;
    std::erase_if(r.bins, [&](const auto& bin) {
      const std::uint64_t lo = bin.first * rate_bin_ps_, hi = lo + rate_bin_ps_;
      return hi <= b->cut || lo > b->end;
    });
  }
}

void Trace::close_step_window() {
  if (!window_) return;
  // The windows from the host step slices recorded (merged from every partition): a rank that
  // never began step `first` keeps nothing, one that never ended step `last` all from its start.
  std::vector<RankBounds> bounds;
  std::vector<bool> began;
  for (const Event& e : events_) {
    if (e.phase != 'X' || e.pid < kHostPid || e.pid >= kSwitchPid || e.track != "main") continue;
    const std::optional<std::uint32_t> step = step_number(e.name);
    if (!step || (*step != window_->first && *step != window_->last)) continue;
    const std::uint32_t r = e.pid - kHostPid;
    if (r >= bounds.size()) {
      bounds.resize(std::size_t{r} + 1);
      began.resize(std::size_t{r} + 1, false);
    }
    if (*step == window_->first) {
      bounds[r].cut = e.ts_ps;
      began[r] = true;
    }
    if (*step == window_->last) bounds[r].end = e.ts_ps + e.dur_ps;
  }
  RankBounds shared{UINT64_MAX, 0};
  for (std::size_t r = 0; r < bounds.size(); ++r) {
    if (!began[r]) bounds[r] = RankBounds{UINT64_MAX, 0};  // nothing of it
    else shared = {std::min(shared.cut, bounds[r].cut), std::max(shared.end, bounds[r].end)};
  }
  // A rank past the vector has no host step slice at all: nothing of it either.
  drop_outside(bounds, RankBounds{UINT64_MAX, 0}, shared);
  window_.reset();
}

}  // namespace probelab::chip
