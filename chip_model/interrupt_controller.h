// Interrupt controller of one chip: lines of spec/irq.h, raw/pending/mask/ack registers, and
// delivery to the host model after the configured interrupt latency.
//
// Semantics (registers of spec/registers.h):
//   raw     : set by raise(); cleared by writing 1s to kRegIrqAck (W1C)
//   mask    : 1 = masked; reset value 0 (nothing masked)
//   pending : raw & ~mask
// Delivery is message-signalled: every raise() of an unmasked line sends one interrupt message,
// which reaches the host `irq_latency_ns` after the time it was raised (plus any delay a fault
// hook adds; a hook may also drop the message while the raw bit still sets). Unmasking a line
// whose raw bit is set sends a message too. At delivery the host callback receives the pending
// lines at that moment; a message whose lines were all acknowledged or masked in the meantime is
// not delivered (counted as suppressed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include <systemc>

#include "chip_model/chip_config.h"
#include "chip_model/hooks/fault_hooks.h"

namespace probelab::chip {

class Trace;

class InterruptController : public sc_core::sc_module {
 public:
  /// Called in SC_METHOD context at delivery time with the pending lines; must not wait().
  /// sim/ connects its host model here (e.g. notify an event its ISR thread waits on).
  using HostCallback = std::function<void(std::uint32_t pending_lines)>;

  InterruptController(sc_core::sc_module_name name, const ChipConfig& cfg, std::uint32_t rank = 0,
                      Trace* trace = nullptr);
  SC_HAS_PROCESS(InterruptController);

  /// Raises `lines` (IrqLine bits) at absolute time `when` (clamped to now if earlier), typically
  /// the caller's quantum-keeper time. Sets the raw bits immediately.
  void raise(std::uint32_t lines, const sc_core::sc_time& when);

  std::uint32_t raw() const { return raw_; }
  std::uint32_t mask() const { return mask_; }
  std::uint32_t pending() const { return raw_ & ~mask_; }

  /// MMIO of kRegIrqRaw/Pending/Mask/Ack. Offsets outside the block: read 0 / ignored.
  std::uint32_t read_reg(std::uint32_t offset) const;
  /// `now`: absolute time of the access (an unmask schedules delivery from then).
  void write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now);

  void set_host_callback(HostCallback cb) { host_cb_ = std::move(cb); }
  /// Notified at every delivery (alternative to the callback).
  const sc_core::sc_event& host_event() const { return host_event_; }
  /// Pending lines passed with the most recent delivery.
  std::uint32_t last_delivered() const { return last_delivered_; }
  void set_fault_hooks(FaultHooks* hooks) { faults_ = hooks; }

  struct Counters {
    std::uint64_t raised = 0, delivered = 0, dropped = 0, suppressed = 0;
  };
  const Counters& counters() const { return counters_; }

 private:
  void schedule(std::uint32_t lines, const sc_core::sc_time& raised_at);
  void deliver();

  std::uint64_t latency_ps_;
  std::uint32_t rank_;
  std::uint32_t clock_mhz_;
  Trace* trace_;
  FaultHooks* faults_ = nullptr;
  std::uint32_t raw_ = 0, mask_ = 0;
  std::uint32_t last_delivered_ = 0;
  Counters counters_;
  std::multimap<std::uint64_t, std::uint32_t> queue_;  // delivery time (ps) -> lines
  sc_core::sc_event wake_;
  sc_core::sc_event host_event_;
  HostCallback host_cb_;
};

}  // namespace probelab::chip
