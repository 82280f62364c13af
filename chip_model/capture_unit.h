// Debug capture unit: writes capture records (spec/capture_record.h) into host-drained HBM
// buffers, ping-pong (two buffers) or single-buffer.
//
// Protocol (registers of spec/registers.h, programmed by the host before enabling):
//  - The device fills the active buffer (kRegCapActive) from offset 0; kRegCapFill = bytes used.
//  - A record that does not fit in the rest of the active buffer closes it: the buffer becomes
//    ready (kRegCapReady bit, kRegCapReadyBytes<i> = valid bytes, whole records only) and
//    kIrqCaptureFull is raised. Ping-pong: the other buffer becomes active if the host released
//    it; single-buffer: the same buffer becomes active again once released.
//  - kRegCapRelease = i: the host drained buffer i; its records count as drained.
//  - kRegCapFlush = 1: a non-empty active buffer is closed as above (nothing happens if empty).
//  - While no buffer is free: policy stall (kCapDropOnFull = 0) blocks the producer until a
//    release; the wait is added to the stall counter (summed over producers). Policy drop
//    discards the record (counted). A record larger than a whole buffer, or a record produced
//    while kCapEnable is 0, is dropped under either policy; the oversize ones are also counted
//    in kRegCapOversize (with the largest size in kRegCapOversizeMax) for the host to report.
//    Stalled producers resume after the other processes woken at the release's instant, as the
//    capture DMA engine resumes (capture_dma.h: the kernel's own order among the processes of
//    one instant depends on the chips a process simulates).
//  Invariant: produced = drained + dropped + buffered (records in active or ready buffers).
//  seq numbers count produced records in the order they were offered, dropped ones included
//  (gaps in a drain = drops; producers stalled together may land slightly out of seq order).
// Record bytes go to HBM through the HBM bandwidth model (client Capture), so capture traffic
// contends with compute traffic. Changing the buffer registers while enabled is not supported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <systemc>
#include <tlm_utils/tlm_quantumkeeper.h>

#include "chip_model/chip_config.h"
#include "chip_model/clock.h"
#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/spec/capture_math.h"
#include "chip_model/spec/capture_record.h"
#include "chip_model/spec/kernel_args.h"
#include "chip_model/spec/registers.h"
#include "chip_model/spec/task.h"

namespace probelab::chip {

class Hbm;
class InterruptController;
class Trace;

using spec::crc32;  // a record's checksum (capture_math.h)

/// Header of a record about tensor `t` (slot `index`, an input if `is_input`) produced for
/// `task` (op id, task id and step from the descriptor). The payload format is the plain layout
/// the device converts `t`'s format to: ND for ND and FRACTAL_NZ, NCHW otherwise.
spec::CaptureRecordHeader tensor_record_header(const spec::TaskDescriptor& task, const spec::TensorRef& t,
                                               spec::CapturePayload payload, std::uint16_t index, bool is_input);

class CaptureUnit : public sc_core::sc_module {
 public:
  CaptureUnit(sc_core::sc_module_name name, const ChipConfig& cfg, Hbm& hbm,
              InterruptController& irq, std::uint32_t rank = 0, Trace* trace = nullptr);

  /// Producer API, SC_THREAD context. Completes `header` (magic, record_bytes, seq, rank, cycle,
  /// payload_bytes, checksum), lets the fault hook see the record, and writes it into the active
  /// buffer through the HBM model. Writes are posted: the producer waits only until the capture
  /// engine has finished moving the previous record's bytes (its local time advances to then),
  /// not for the HBM latency. Under the stall policy it may block on a full buffer (syncs qk,
  /// then waits). Returns true if written, false if dropped.
  bool produce(spec::CaptureRecordHeader header, std::span<const std::byte> payload,
               tlm_utils::tlm_quantumkeeper& qk, const FaultSite& site);

  /// MMIO of the capture block (0x400..0x4FF); other offsets: 0 / ignored. `now` is the absolute
  /// time of the access (used for the buffer-full interrupt of a flush).
  std::uint32_t read_reg(std::uint32_t offset) const;
  void write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now);

  void set_fault_hooks(FaultHooks* hooks) { faults_ = hooks; }

  struct Counters {
    std::uint64_t produced = 0;   // records offered to the unit (written + dropped)
    std::uint64_t written = 0;    // records written into a buffer
    std::uint64_t dropped = 0;
    std::uint64_t drained = 0;    // records in buffers the host released
    std::uint64_t buffered = 0;   // records in buffers not yet released
    std::uint64_t bytes = 0;      // record bytes written to buffers
    std::uint64_t stall_cycles = 0;
    std::uint64_t buffers_closed = 0;  // times a buffer became ready
    std::uint64_t oversize = 0;        // records larger than a buffer (dropped, in `dropped` too)
    std::uint64_t oversize_max = 0;    // bytes of the largest of them
  };
  const Counters& counters() const { return counters_; }
  /// Notified whenever a buffer becomes ready (in addition to the interrupt).
  const sc_core::sc_event& ready_event() const { return ready_event_; }

 private:
  struct Buffer {
    std::uint64_t addr = 0;
    bool ready = false;
    std::uint32_t ready_bytes = 0;
    std::uint64_t records = 0;  // records in this buffer (filling or ready)
  };
  bool ping_pong() const { return (ctrl_ & spec::kCapPingPong) != 0; }
  bool active_writable() const { return !bufs_[active_].ready; }
  void close_active(const sc_core::sc_time& when);
  void trace_fill(const sc_core::sc_time& at, std::uint32_t fill);  // trace enabled
  void relay_release() { released_.notify(); }

  const ChipConfig& cfg_;
  Hbm& hbm_;
  InterruptController& irq_;
  ChipClock clock_;
  std::uint32_t rank_;
  Trace* trace_;
  FaultHooks* faults_ = nullptr;
  std::uint32_t ctrl_ = 0;
  std::uint32_t buf_size_ = 0;
  Buffer bufs_[2];
  std::uint32_t active_ = 0;
  std::uint32_t fill_ = 0;
  Counters counters_;
  sc_core::sc_time hbm_latency_;
  sc_core::sc_time engine_free_ = sc_core::SC_ZERO_TIME;    // capture write engine busy until
  sc_core::sc_time last_write_end_ = sc_core::SC_ZERO_TIME;  // last record's bytes in HBM
  std::vector<std::byte> scratch_;
  std::uint64_t fill_trace_ps_ = 0;  // time of the last fill sample (trace)
  sc_core::sc_event released_;
  sc_core::sc_event ready_event_;
  sc_core::sc_event release_wake_;  // a release: relay_release() notifies released_
};

}  // namespace probelab::chip
