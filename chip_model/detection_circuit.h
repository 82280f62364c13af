// Exception detection circuit. One per chip, with one input per AI core (the core index travels
// in each report): the float-status register, the per-kind exception latches and the counters of
// spec/registers.h are chip-wide registers, so a single unit owns them and every core reports into
// it. The register semantics are spec::ExceptionUnit's (spec/exception_unit.h), shared with the
// probe runtime's FakeDevice; this module adds the interrupt and the trace. Self-contained: a chip
// with several core kinds (Cube and Vector cores) may give each kind its own circuit.
//
// Inputs: the AI core (the vector unit of capture/breakpoint tasks, the collective engine) calls
// report() once per result block it produces that has any numerics flag set — a tensor of a task —
// with the flags mapped to spec bits and, per exception kind present, the first offending element
// of that kind in the documented scan order (the tensor's logical layout, row-major), the cycle at
// which the tile holding it completed, its value and what raised it. Blocks without flags need no
// call. Latency from a report to the register update is zero; each latch it fills raises
// kIrqException at the latched cycle (the interrupt controller adds its latency).
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <utility>

#include <systemc>

#include "chip_model/chip_config.h"
#include "chip_model/clock.h"
#include "chip_model/spec/exception_unit.h"
#include "chip_model/spec/registers.h"

namespace probelab::chip {

class InterruptController;
class Trace;

/// What a core reports: spec::ExcReport (ids, float status, per-kind hits).
/// Kind mapping expected from callers: overflow -> kExcOverflow + kFsOverflow; underflow or a
/// denormal result -> kExcUnderflow + kFsUnderflow (and kFsDenormal); NaN produced from non-NaN
/// operands -> kExcInvalid + kFsInvalid; NaN operand read -> kExcNanInput + kFsNanInput; infinite
/// operand read -> kExcInfInput + kFsInfInput. Division by zero sets kFsDivByZero only.
using DetectionEvent = spec::ExcReport;

inline constexpr std::uint32_t exc_bit(spec::ExcKindBit k) { return 1u << k; }

class DetectionCircuit : public sc_core::sc_module {
 public:
  DetectionCircuit(sc_core::sc_module_name name, const ChipConfig& cfg, InterruptController& irq,
                   std::uint32_t rank = 0, Trace* trace = nullptr);

  /// One result block with flags. Callable from any process; the interrupt of each latch it fills
  /// is raised at the time of that kind's cycle (or now, if that is earlier).
  void report(const DetectionEvent& ev);

  /// True if an armed report with an enabled kind was made for (op_id, step) since the start
  /// (breakpoint tasks with halt_on_exception use this).
  bool anomaly_seen(std::uint32_t op_id, std::uint32_t step) const;

  /// MMIO of the float-status and exception blocks (0x100..0x2FF, latch banks 0x600..). Other
  /// offsets: 0 / ignored.
  std::uint32_t read_reg(std::uint32_t offset) const { return unit_.read(offset); }
  /// `now`: absolute time of the write; an acknowledge draws, per latch it clears, the slice during
  /// which that latch was held (from the offending tile to the ack).
  void write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now = sc_core::SC_ZERO_TIME);
  /// Whether `offset` belongs to this block.
  static bool owns(std::uint32_t offset) { return spec::ExceptionUnit::owns(offset); }

  /// The device's float status as a FloatStatusGet task writes it (spec/float_status.h).
  spec::FloatStatusBuffer status_buffer(std::uint64_t cycle) const;
  /// A reset of the float status at `cycle` by `by` (a stream, spec::kResetByOther); traced on
  /// the "float status" track.
  void reset_status(std::uint64_t cycle, std::uint32_t by);
  /// Status bits raised without a report (spec::ExceptionUnit::raise_status).
  void raise_status(std::uint32_t bits);

  // Direct views for tests and the report.
  std::uint32_t float_status() const { return unit_.float_status(); }
  /// The StepStatus record contents since the previous call (float status bits and suppressed
  /// reports per kind); independent of kRegFloatStatus and its clears.
  spec::StepStatus take_step_status() { return unit_.take_step_status(); }
  bool latched(spec::ExcKindBit k) const { return unit_.latch(k).valid; }
  const spec::ExcLatch& latch(spec::ExcKindBit k) const { return unit_.latch(k); }
  std::uint32_t counter(spec::ExcKindBit k) const { return unit_.counter(k); }
  std::uint32_t suppressed(spec::ExcKindBit k) const { return unit_.suppressed(k); }
  std::uint32_t enable_mask() const { return unit_.enable_mask(); }
  std::uint64_t reports() const { return reports_; }

 private:
  InterruptController& irq_;
  ChipClock clock_;
  std::uint32_t rank_;
  Trace* trace_;
  spec::ExceptionUnit unit_;
  std::array<std::uint64_t, spec::kExcKindCount> latch_ps_{};  // when each latch was filled (trace)
  std::array<std::uint64_t, spec::kExcKindCount> ack_ps_{};    // when each latch was last acknowledged (trace)
  std::uint64_t reports_ = 0;
  std::set<std::pair<std::uint32_t, std::uint32_t>> anomalous_ops_;  // (op_id, step)
};

}  // namespace probelab::chip
