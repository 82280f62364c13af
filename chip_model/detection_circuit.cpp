#include "chip_model/detection_circuit.h"

#include <fmt/format.h>

#include "chip_model/interrupt_controller.h"
#include "chip_model/spec/irq.h"
#include "chip_model/trace.h"

namespace probelab::chip {

DetectionCircuit::DetectionCircuit(sc_core::sc_module_name name, const ChipConfig& cfg, InterruptController& irq,
                                   std::uint32_t rank, Trace* trace)
    : sc_module(name), irq_(irq), clock_(cfg.clock_mhz), rank_(rank), trace_(trace) {}

void DetectionCircuit::report(const DetectionEvent& ev) {
  ++reports_;
  float_status_ |= ev.status;
  step_status_ |= ev.status;
  if (!ev.armed || ev.kind_mask == 0) return;
  for (std::uint32_t k = 0; k < spec::kExcKindCount; ++k) {
    if ((ev.kind_mask & (1u << k)) == 0) continue;
    const std::uint64_t add = ev.kind_counts[k] == 0 ? 1 : ev.kind_counts[k];
    const std::uint64_t sum = counters_[k] + add;
    counters_[k] = sum > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<std::uint32_t>(sum);
  }
  const std::uint32_t enabled = ev.kind_mask & enable_;
  if (enabled == 0) return;
  anomalous_ops_.insert({ev.op_id, ev.step});
  if (valid_) {
    more_ = true;
    return;
  }
  valid_ = true;
  more_ = false;
  latch_ = ev;
  // The latched kind is the first element's kind if it is enabled, else the enabled kind whose
  // first element comes first (lowest kind on ties), with that element.
  if ((enabled & (1u << ev.first_kind)) == 0) {
    int best = -1;
    for (std::uint32_t k = 0; k < spec::kExcKindCount; ++k)
      if ((enabled & (1u << k)) && (best < 0 || ev.kind_first[k] < ev.kind_first[static_cast<std::size_t>(best)]))
        best = static_cast<int>(k);
    latch_.first_kind = static_cast<spec::ExcKindBit>(best);
    latch_.first_elem = ev.kind_first[static_cast<std::size_t>(best)];
  }
  const sc_core::sc_time at = clock_.time_of_cycle(ev.cycle);
  latch_ps_ = ChipClock::to_ps(at);
  if (trace_ && trace_->enabled())
    trace_->instant(rank_, "detect", "latch", "exception", ChipClock::to_ps(at),
                    {{"kind", std::uint64_t{latch_.first_kind}},
                     {"op_id", std::uint64_t{ev.op_id}},
                     {"task_id", std::uint64_t{ev.task_id}},
                     {"core", std::uint64_t{ev.core}},
                     {"elem", ev.first_elem}});
  irq_.raise(spec::kIrqException, at);
}

bool DetectionCircuit::anomaly_seen(std::uint32_t op_id, std::uint32_t step) const {
  return anomalous_ops_.count({op_id, step}) != 0;
}

std::uint32_t DetectionCircuit::read_reg(std::uint32_t offset) const {
  using namespace spec;
  if (offset >= kRegExcCountBase && offset < kRegExcCountBase + 4 * kExcKindCount && offset % 4 == 0)
    return counters_[(offset - kRegExcCountBase) / 4];
  switch (offset) {
    case kRegFloatStatus: return float_status_;
    case kRegExcEnable: return enable_;
    case kRegExcStatus:
      return valid_ ? (1u | (static_cast<std::uint32_t>(latch_.first_kind) << 8) | (more_ ? 1u << 16 : 0u)) : 0u;
    default: break;
  }
  if (!valid_) return 0;
  switch (offset) {
    case kRegExcOpId: return latch_.op_id;
    case kRegExcTaskId: return latch_.task_id;
    case kRegExcCore: return latch_.core;
    case kRegExcStream: return latch_.stream;
    case kRegExcElemLo: return static_cast<std::uint32_t>(latch_.first_elem);
    case kRegExcElemHi: return static_cast<std::uint32_t>(latch_.first_elem >> 32);
    case kRegExcCycleLo: return static_cast<std::uint32_t>(latch_.cycle);
    case kRegExcCycleHi: return static_cast<std::uint32_t>(latch_.cycle >> 32);
    case kRegExcStep: return latch_.step;
    case kRegExcOutput: return latch_.output_index;
    default: return 0;
  }
}

void DetectionCircuit::write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now) {
  using namespace spec;
  switch (offset) {
    case kRegFloatStatusClear: float_status_ &= ~value; break;
    case kRegExcEnable: enable_ = value & ((1u << kExcKindCount) - 1); break;
    case kRegExcAck:
      if (value & 1u) {
        if (valid_ && trace_ && trace_->enabled()) {
          // The latch held from the offending tile until the ISR acknowledged it; a flow from
          // this slice leads to the ISR and the report entry (sim/run/trace_flows.h).
          const std::uint64_t end = std::max(latch_ps_, ChipClock::to_ps(now));
          static const char* kKind[] = {"overflow", "underflow", "invalid", "nan_input"};
          trace_->complete(rank_, "detect", fmt::format("{} latched", kKind[latch_.first_kind % 4]), "exception",
                           latch_ps_, end - latch_ps_,
                           {{"op_id", std::uint64_t{latch_.op_id}}, {"elem", latch_.first_elem},
                            {"more", std::uint64_t{more_ ? 1u : 0u}}});
        }
        valid_ = false;
        more_ = false;
        latch_ = DetectionEvent{};
      }
      break;
    case kRegExcCountClear:
      if (value & 1u) counters_.fill(0);
      break;
    default: break;
  }
}

}  // namespace probelab::chip
