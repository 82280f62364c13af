#include "chip_model/detection_circuit.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "chip_model/interrupt_controller.h"
#include "chip_model/spec/irq.h"
#include "chip_model/trace.h"

namespace probelab::chip {

namespace {
// One trace track per exception kind ("detect <kind>", the report's anomaly kind names): the
// latches of different kinds are held at overlapping times.
const char* const kKindName[spec::kExcKindCount] = {"overflow", "underflow", "invalid", "nan_input", "inf_input"};
std::string track_of(std::uint32_t kind) { return fmt::format("detect {}", kKindName[kind]); }
}  // namespace

DetectionCircuit::DetectionCircuit(sc_core::sc_module_name name, const ChipConfig& cfg, InterruptController& irq,
                                   std::uint32_t rank, Trace* trace)
    : sc_module(name), irq_(irq), clock_(cfg.clock_mhz), rank_(rank), trace_(trace) {}

void DetectionCircuit::report(const DetectionEvent& ev) {
  ++reports_;
  if (ev.armed && (ev.kind_mask() & unit_.enable_mask())) anomalous_ops_.insert({ev.op_id, ev.step});
  const std::uint32_t filled = unit_.report(ev);
  for (std::uint32_t k = 0; k < spec::kExcKindCount; ++k) {
    if (!(filled & (1u << k))) continue;
    const spec::ExcHit& h = ev.kinds[k];
    const sc_core::sc_time at = clock_.time_of_cycle(h.cycle);
    // A latch refilled after an acknowledge holds from then on, even when the tile completed earlier.
    latch_ps_[k] = std::max(ChipClock::to_ps(at), ack_ps_[k]);
    if (trace_ && trace_->enabled())
      trace_->instant(rank_, track_of(k), "latch", "exception", ChipClock::to_ps(at),
                      {{"kind", std::uint64_t{k}},
                       {"op_id", std::uint64_t{ev.op_id}},
                       {"task_id", std::uint64_t{ev.task_id}},
                       {"core", std::uint64_t{ev.core}},
                       {"elem", h.element}});
    irq_.raise(spec::kIrqException, at);
  }
}

bool DetectionCircuit::anomaly_seen(std::uint32_t op_id, std::uint32_t step) const {
  return anomalous_ops_.count({op_id, step}) != 0;
}

void DetectionCircuit::write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now) {
  if (offset == spec::kRegExcAck && trace_ && trace_->enabled()) {
    // Each latch held from its offending tile until the ISR acknowledged it; a flow from this
    // slice leads to the ISR and the report entry (sim/run/trace_flows.h).
    for (std::uint32_t k = 0; k < spec::kExcKindCount; ++k) {
      const spec::ExcLatch& l = unit_.latch(k);
      if (!(value & (1u << k)) || !l.valid) continue;
      const std::uint64_t end = std::max(latch_ps_[k], ChipClock::to_ps(now));
      ack_ps_[k] = end;
      trace_->complete(rank_, track_of(k), fmt::format("{} latched", kKindName[k]), "exception", latch_ps_[k],
                       end - latch_ps_[k],
                       {{"op_id", std::uint64_t{l.op_id}}, {"elem", l.hit.element},
                        {"more", std::uint64_t{l.more ? 1u : 0u}}, {"suppressed", std::uint64_t{l.suppressed}}});
    }
  }
  unit_.set_cycle(clock_.cycle_at(now));
  if (offset == spec::kRegFloatStatusClear && value && trace_ && trace_->enabled())
    trace_->instant(rank_, "float status", "reset (register)", "exception", ChipClock::to_ps(now),
                    {{"bits", std::uint64_t{value & unit_.float_status()}}});
  unit_.write(offset, value);
}

spec::FloatStatusBuffer DetectionCircuit::status_buffer(std::uint64_t cycle) const { return unit_.status_buffer(cycle); }

void DetectionCircuit::reset_status(std::uint64_t cycle, std::uint32_t by) {
  const std::uint32_t before = unit_.float_status();
  unit_.clear_status(0xFFFFFFFFu, cycle, by);
  if (trace_ && trace_->enabled())
    trace_->instant(rank_, "float status", by == spec::kResetByOther ? "reset (other client)" : "reset", "exception",
                    ChipClock::to_ps(clock_.time_of_cycle(cycle)),
                    {{"cleared", std::uint64_t{before}}, {"by", std::uint64_t{by}}});
}

void DetectionCircuit::raise_status(std::uint32_t bits) { unit_.raise_status(bits); }

}  // namespace probelab::chip
