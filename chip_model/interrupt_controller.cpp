#include "chip_model/interrupt_controller.h"

#include <fmt/format.h>

#include "chip_model/clock.h"
#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"
#include "chip_model/trace.h"

namespace probelab::chip {

InterruptController::InterruptController(sc_core::sc_module_name name, const ChipConfig& cfg, std::uint32_t rank,
                                         Trace* trace)
    : sc_module(name),
      latency_ps_(static_cast<std::uint64_t>(cfg.irq_latency_ns) * 1000),
      rank_(rank),
      clock_mhz_(cfg.clock_mhz),
      trace_(trace) {
  SC_METHOD(deliver);
  sensitive << wake_;
  dont_initialize();
}

void InterruptController::raise(std::uint32_t lines, const sc_core::sc_time& when) {
  lines &= spec::kIrqAll;
  if (lines == 0) return;
  const sc_core::sc_time at = when < sc_core::sc_time_stamp() ? sc_core::sc_time_stamp() : when;
  raw_ |= lines;
  ++counters_.raised;
  if (trace_ && trace_->enabled())
    trace_->instant(rank_, "irq", fmt::format("raise 0x{:x}", lines), "irq", ChipClock::to_ps(at),
                    {{"lines", std::uint64_t{lines}}});
  const std::uint32_t unmasked = lines & ~mask_;
  if (unmasked != 0) schedule(unmasked, at);
}

void InterruptController::schedule(std::uint32_t lines, const sc_core::sc_time& raised_at) {
  // One message per line, so a fault hook can drop or delay lines independently.
  for (std::uint32_t bit = 1; bit <= spec::kIrqAll; bit <<= 1) {
    if ((lines & bit) == 0) continue;
    std::uint64_t t = ChipClock::to_ps(raised_at) + latency_ps_;
    if (fault_wanted(faults_, kFaultInterrupt)) {
      const ChipClock clk(clock_mhz_);
      FaultSite site;
      site.rank = rank_;
      site.cycle = clk.cycle_at(raised_at);
      const InterruptFault f = faults_->on_interrupt(site, bit);
      if (f.drop) {
        ++counters_.dropped;
        continue;
      }
      t += f.extra_delay_ps;
    }
    queue_.emplace(t, bit);
    wake_.notify(ChipClock::from_ps(t) - sc_core::sc_time_stamp());
  }
}

void InterruptController::deliver() {
  const std::uint64_t now = ChipClock::to_ps(sc_core::sc_time_stamp());
  std::uint32_t lines = 0;
  while (!queue_.empty() && queue_.begin()->first <= now) {
    lines |= queue_.begin()->second;
    queue_.erase(queue_.begin());
  }
  if (!queue_.empty()) wake_.notify(ChipClock::from_ps(queue_.begin()->first) - sc_core::sc_time_stamp());
  if (lines == 0) return;
  const std::uint32_t p = pending();
  if ((p & lines) == 0) {
    ++counters_.suppressed;
    return;
  }
  ++counters_.delivered;
  last_delivered_ = p;
  if (trace_ && trace_->enabled())
    trace_->instant(rank_, "irq", fmt::format("deliver 0x{:x}", p), "irq", now, {{"pending", std::uint64_t{p}}});
  host_event_.notify(sc_core::SC_ZERO_TIME);
  if (host_cb_) host_cb_(p);
}

std::uint32_t InterruptController::read_reg(std::uint32_t offset) const {
  switch (offset) {
    case spec::kRegIrqRaw: return raw_;
    case spec::kRegIrqPending: return pending();
    case spec::kRegIrqMask: return mask_;
    default: return 0;
  }
}

void InterruptController::write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now) {
  switch (offset) {
    case spec::kRegIrqMask: {
      const std::uint32_t unmasked = mask_ & ~value & raw_;
      mask_ = value & spec::kIrqAll;
      if (unmasked != 0) schedule(unmasked, now < sc_core::sc_time_stamp() ? sc_core::sc_time_stamp() : now);
      break;
    }
    case spec::kRegIrqAck: raw_ &= ~value; break;
    default: break;
  }
}

}  // namespace probelab::chip
