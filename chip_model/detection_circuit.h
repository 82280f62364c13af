// Exception detection circuit. One per chip, with one input per AI core (the core index travels
// in each event): the float-status register, the exception latch and the counters of
// spec/registers.h are chip-wide registers, so a single unit owns them and every core reports
// into it. Latency from a core's report to the register update is zero; the interrupt it raises
// reaches the host after the interrupt controller's latency.
//
// Inputs: the AI core (and the vector unit of capture/breakpoint tasks) calls report() once per
// result block it produces that has any numerics flag set — a tile, a vector block — with the
// flags already mapped to spec bits and the first offending element of that block in the
// documented scan order (the op's logical output, row-major). Blocks without flags need no call.
//
// Registers:
//  - kRegFloatStatus: sticky OR of `status` of every report (armed or not); W1C via
//    kRegFloatStatusClear.
//  - kRegExcEnable (reset: all kinds enabled): kinds that latch and interrupt.
//  - latch: the first armed report with an enabled kind while the latch is empty records the
//    event (kind = first_kind, or the enabled kind with the lowest first element when first_kind
//    is disabled; the element is that kind's, kind_first) and raises kIrqException; later armed reports with an enabled kind
//    set the "more" bit (kRegExcStatus bit 16). kRegExcAck=1 clears valid+more and re-arms.
//  - counters (kRegExcCountBase + 4*kind): per kind, the number of offending elements of armed
//    reports (kind_counts, or 1 when a kind bit is set with a zero count), saturating at 2^32-1,
//    counted whether or not the kind is enabled; kRegExcCountClear=1 zeroes them.
// "Armed" = the task's kTaskFlagCheckExceptions flag (DetectionEvent::armed).
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <utility>

#include <systemc>

#include "chip_model/chip_config.h"
#include "chip_model/clock.h"
#include "chip_model/spec/registers.h"

namespace probelab::chip {

class InterruptController;
class Trace;

struct DetectionEvent {
  std::uint32_t status = 0;      // spec::FloatStatusBits raised by any element of the block
  std::uint32_t kind_mask = 0;   // 1u << spec::ExcKindBit for every kind present in the block
  std::array<std::uint64_t, spec::kExcKindCount> kind_counts{};  // offending elements per kind
  spec::ExcKindBit first_kind = spec::kExcOverflow;  // kind of first_elem (lowest index if several)
  std::uint64_t first_elem = 0;  // linear row-major index in the op's logical output `output_index`
  /// First offending element of each kind present (kind_mask), same indexing as first_elem.
  std::array<std::uint64_t, spec::kExcKindCount> kind_first{};
  std::uint32_t op_id = 0;
  std::uint32_t task_id = 0;
  std::uint32_t core = 0;
  std::uint32_t stream = 0;
  std::uint16_t output_index = 0;
  std::uint32_t step = 0;
  std::uint64_t cycle = 0;       // cycle at which the offending block completed
  bool armed = true;             // task flag kTaskFlagCheckExceptions
};

/// Kind mapping expected from callers: overflow -> kExcOverflow + kFsOverflow; underflow or a
/// denormal result -> kExcUnderflow + kFsUnderflow (and kFsDenormal); NaN produced from non-NaN
/// operands -> kExcInvalid + kFsInvalid; NaN operand read -> kExcNanInput + kFsNanInput.
/// Division by zero sets kFsDivByZero only (no latch kind).
inline constexpr std::uint32_t exc_bit(spec::ExcKindBit k) { return 1u << k; }

class DetectionCircuit : public sc_core::sc_module {
 public:
  DetectionCircuit(sc_core::sc_module_name name, const ChipConfig& cfg, InterruptController& irq,
                   std::uint32_t rank = 0, Trace* trace = nullptr);

  /// One result block with flags. Callable from any process; the interrupt is raised at the
  /// time of `ev.cycle` (or now, if that is earlier than the current simulation time).
  void report(const DetectionEvent& ev);

  /// True if an armed report with an enabled kind was made for (op_id, step) since the start
  /// (breakpoint tasks with halt_on_exception use this).
  bool anomaly_seen(std::uint32_t op_id, std::uint32_t step) const;

  /// MMIO of the float-status and exception blocks (0x100..0x2FF). Other offsets: 0 / ignored.
  std::uint32_t read_reg(std::uint32_t offset) const;
  /// `now`: absolute time of the write (the trace shows the latch held until its ack).
  void write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now = sc_core::SC_ZERO_TIME);

  // Direct views for tests and the report.
  std::uint32_t float_status() const { return float_status_; }
  /// Float status bits reported since the previous call (for StepStatus records); independent of
  /// kRegFloatStatus and its clears.
  std::uint32_t take_step_status() { return std::exchange(step_status_, 0u); }
  bool latched() const { return valid_; }
  bool more() const { return more_; }
  const DetectionEvent& latch() const { return latch_; }
  std::uint32_t counter(spec::ExcKindBit k) const { return counters_[k]; }
  std::uint32_t enable_mask() const { return enable_; }
  std::uint64_t reports() const { return reports_; }

 private:
  InterruptController& irq_;
  ChipClock clock_;
  std::uint32_t rank_;
  Trace* trace_;
  std::uint32_t float_status_ = 0;
  std::uint32_t step_status_ = 0;
  std::uint32_t enable_ = (1u << spec::kExcKindCount) - 1;
  bool valid_ = false, more_ = false;
  DetectionEvent latch_;
  std::uint64_t latch_ps_ = 0;  // when the latch was set (trace)
  std::array<std::uint32_t, spec::kExcKindCount> counters_{};
  std::uint64_t reports_ = 0;
  std::set<std::pair<std::uint32_t, std::uint32_t>> anomalous_ops_;  // (op_id, step)
};

}  // namespace probelab::chip
