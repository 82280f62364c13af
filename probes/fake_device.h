// FakeDevice: an in-memory Device for tests (no SystemC, no timing model). It implements the
// register contract of chip_model/spec functionally, enough to drive the probe runtime:
//   - a register file with the read-only/W1C/write-to-act semantics of registers.h;
//   - HBM as allocations of host memory (bump allocator, bounds-checked DMA);
//   - a capture unit with ping-pong or single buffering, stall or drop overrun policy, exact
//     counters, buffer-full interrupts, flush and release;
//   - Capture tasks executed on submit (statistics, full tensor converted to the logical layout,
//     or XXH64 hash) and Breakpoint tasks evaluating their predicate and halting the stream;
//   - the exception block (float status, per-kind latches, counters) with the chip's semantics
//     (spec::ExceptionUnit), fed by latch_exception() as the datapath would report;
//   - interrupts delivered synchronously to the handler (a line raised while the handler runs is
//     delivered after it returns), honouring the mask.
// Kernel tasks are recorded but not executed: tests place tensor values with dma_write (or in
// on_kernel). A Kernel task asking for in-kernel statistics (stats_inputs / stats_outputs) or
// output dumps (dump_outputs) must carry a spec::OpArgs block: input statistics are taken before
// on_kernel, output statistics and full output records after it. kTaskFlagStatusRecord emits a StepStatus record (float status bits since the last one).
// The fake cannot block a producer: under the stall policy it delivers the buffer-full interrupt
// (the handler drains and releases) and retries once; if still no buffer is free the record is
// dropped and counted in kRegCapDropped (and in stall_fallback_drops()).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "chip_model/spec/capture_record.h"
#include "chip_model/spec/exception_unit.h"
#include "chip_model/spec/kernel_args.h"
#include "chip_model/spec/registers.h"
#include "chip_model/spec/task.h"
#include "graph/tensor.h"
#include "probes/device.h"

namespace probelab::probes {

class FakeDevice : public Device {
 public:
  explicit FakeDevice(std::uint32_t rank = 0, std::size_t hbm_bytes = 256u << 20);

  // ---- Device ----
  std::uint32_t rank() const override { return rank_; }
  std::uint32_t read_reg(std::uint32_t offset) override;
  void write_reg(std::uint32_t offset, std::uint32_t value) override;
  std::uint64_t alloc(std::size_t bytes, std::size_t align = 64) override;
  void free(std::uint64_t addr) override;
  void dma_write(std::uint64_t hbm_addr, std::span<const std::byte> src) override;
  void dma_read(std::uint64_t hbm_addr, std::span<std::byte> dst) override;
  void submit(std::uint32_t stream, const spec::TaskDescriptor& task) override;
  bool synchronize(std::uint32_t stream) override;
  void set_irq_handler(IrqHandler handler) override { handler_ = std::move(handler); }
  std::uint64_t cycles() override;

  // ---- test controls ----
  /// Every Device call advances the cycle counter by this much (default 10).
  void set_cycles_per_call(std::uint64_t c) { cycles_per_call_ = c; }
  void advance(std::uint64_t cycles) { cycle_ += cycles; }
  std::uint64_t now() const { return cycle_; }
  /// Reports an exception as the datapath would to the detection circuit (spec::ExceptionUnit:
  /// per-kind latch, counters, float status; kIrqException when a latch fills).
  struct Exception {
    std::uint32_t kind = spec::kExcInvalid;  // ExcKindBit
    std::uint32_t op_id = 0, task_id = 0, core = 0, stream = 0;
    std::uint32_t output = 0;                // tensor slot (the input index for nan_input/inf_input
                                             // and for a quantization overflow, kExcDetailQuantize)
    std::uint64_t element = 0, cycle = 0;    // cycle 0: now
    std::optional<std::uint32_t> step = std::nullopt;  // default: the kRegStep value
    std::optional<float> value = std::nullopt;         // default: NaN (invalid, nan_input), +Inf (others)
    std::uint32_t detail = 0;                // spec::ExcDetailBits
    std::uint64_t count = 1;
    std::uint8_t dtype = 1;                  // graph::DType (default F16)
  };
  void latch_exception(const Exception& e);
  /// Another client of the device resets the float status now (spec/float_status.h).
  void other_client_reset() { exc_.clear_status(0xFFFFFFFFu, cycle_, spec::kResetByOther); }
  /// Produces a capture record (header fields op/task/step/rank/etc. as given; seq, sizes and
  /// checksum filled in) as the capture unit would.
  void emit_record(spec::CaptureRecordHeader header, std::span<const std::byte> payload);
  /// Appends raw bytes to the active buffer (for corrupted-record tests). Counts as one record.
  void emit_raw(std::span<const std::byte> bytes);
  /// Raises interrupt lines (delivered unless masked).
  void raise_irq(std::uint32_t lines);
  /// Halts `stream` after task `task_id` as a breakpoint would and raises kIrqBreakpoint.
  void halt_stream(std::uint32_t stream, std::uint32_t task_id);
  /// Direct HBM access for tests (same as DMA, without cost).
  void poke(std::uint64_t addr, std::span<const std::byte> src) { dma_write(addr, src); }
  /// Places a tensor in HBM in its own format; returns its TensorRef.
  spec::TensorRef place(const graph::Tensor& t);

  const std::vector<std::pair<std::uint32_t, spec::TaskDescriptor>>& submitted() const { return submitted_; }
  std::uint64_t stall_fallback_drops() const { return stall_drops_; }
  std::uint32_t reg(std::uint32_t offset) const;  // raw register value without side effects
  bool halted(std::uint32_t stream) const;
  /// Hook run for Kernel tasks (e.g. to write outputs or latch exceptions); optional.
  std::function<void(std::uint32_t stream, const spec::TaskDescriptor&)> on_kernel;

 private:
  struct Block {
    std::uint64_t addr;
    std::vector<std::byte> bytes;
  };
  Block& block_at(std::uint64_t addr, std::size_t len);
  void tick() { cycle_ += cycles_per_call_; }
  void deliver();
  void cap_append(std::span<const std::byte> rec);
  bool cap_handover();  // active buffer -> ready; switch to a free buffer; false if none free
  void run_queue(std::uint32_t stream);
  void run_capture(const spec::TaskDescriptor& t);
  void run_kernel(std::uint32_t stream, const spec::TaskDescriptor& t);
  void emit_stats(const spec::TaskDescriptor& t, const spec::TensorRef& ref, std::uint16_t index, bool is_input);
  spec::CaptureRecordHeader tensor_header(const spec::TaskDescriptor& t, const spec::TensorRef& ref,
                                          spec::CapturePayload payload, std::uint16_t index, bool is_input) const;
  void run_breakpoint(std::uint32_t stream, const spec::TaskDescriptor& t);
  graph::Tensor read_tensor(const spec::TensorRef& ref);

  std::uint32_t rank_;
  std::size_t hbm_capacity_;
  std::uint64_t next_addr_ = 0x1000;
  std::map<std::uint64_t, Block> blocks_;
  std::map<std::uint32_t, std::uint32_t> regs_;
  std::uint64_t cycle_ = 0, cycles_per_call_ = 10;
  IrqHandler handler_;
  bool in_handler_ = false, redeliver_ = false;
  std::uint32_t raw_irq_ = 0;
  // capture unit
  int active_ = 0;  // -1: no buffer to write
  std::uint32_t fill_ = 0;
  std::uint32_t ready_ = 0;
  std::uint32_t ready_bytes_[2] = {0, 0};
  std::uint32_t seq_ = 0;
  std::uint64_t produced_ = 0, dropped_ = 0, cap_bytes_ = 0, stall_cycles_ = 0, stall_drops_ = 0;
  std::uint64_t oversize_ = 0, oversize_max_ = 0;
  // exception block
  spec::ExceptionUnit exc_;
  std::set<std::uint32_t> exc_ops_;  // op ids that reported an exception (halt_on_exception)
  // streams
  std::map<std::uint32_t, std::uint32_t> halted_task_;
  std::map<std::uint32_t, std::deque<spec::TaskDescriptor>> queue_;  // tasks waiting behind a halt
  std::vector<std::pair<std::uint32_t, spec::TaskDescriptor>> submitted_;
};

}  // namespace probelab::probes
