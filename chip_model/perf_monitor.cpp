#include "chip_model/perf_monitor.h"

#include <algorithm>

namespace probelab::chip {
namespace {

// Heap order of PerfMonitor::pending_: the earliest completion on top.
struct Later {
  bool operator()(const std::pair<std::uint64_t, PerfMonitor::Counters>& a,
                  const std::pair<std::uint64_t, PerfMonitor::Counters>& b) const {
    return a.first > b.first;
  }
};

}  // namespace

void PerfMonitor::add(std::uint64_t done_ps, const Counters& delta, std::uint64_t now_ps) {
  fold(now_ps);
  pending_.emplace_back(done_ps, delta);
  std::push_heap(pending_.begin(), pending_.end(), Later{});
}

void PerfMonitor::add(std::uint64_t done_ps, spec::PmuCounter counter, std::uint64_t amount, std::uint64_t now_ps) {
  if (amount == 0) return;
  Counters d{};
  d[counter] = amount;
  add(done_ps, d, now_ps);
}

void PerfMonitor::fold(std::uint64_t now_ps) {
  // Integer sums: the order the finished work is added in does not matter.
  while (!pending_.empty() && pending_.front().first <= now_ps) {
    std::pop_heap(pending_.begin(), pending_.end(), Later{});
    const Counters& c = pending_.back().second;
    for (std::size_t i = 1; i < done_.size(); ++i) done_[i] += c[i];
    pending_.pop_back();
  }
}

PerfMonitor::Counters PerfMonitor::at(std::uint64_t now_ps) {
  fold(now_ps);
  return done_;
}

std::uint32_t PerfMonitor::read_reg(std::uint32_t offset, std::uint64_t now_ps, std::uint64_t cycle,
                                    std::uint64_t capture_stall) {
  if (offset >= spec::pmu_reg(spec::kPmuCounters)) return 0;
  const std::uint32_t idx = (offset - spec::kRegPmuBase) / 8;
  const bool high = (offset - spec::kRegPmuBase) % 8 == 4;
  if (high) return hi_latch_[idx];
  Counters c = at(now_ps);
  c[spec::kPmuCycle] = cycle;
  c[spec::kPmuCaptureStall] += capture_stall - capture_stall_base_;
  for (std::size_t i = 0; i < c.size(); ++i) hi_latch_[i] = static_cast<std::uint32_t>(c[i] >> 32);
  return static_cast<std::uint32_t>(c[idx]);
}

void PerfMonitor::write_reg(std::uint32_t offset, std::uint32_t value, std::uint64_t now_ps,
                            std::uint64_t capture_stall) {
  if (offset != spec::kRegPmuClear || (value & 1) == 0) return;
  fold(now_ps);
  done_.fill(0);
  capture_stall_base_ = capture_stall;
}

}  // namespace probelab::chip
