// The hardware boundary. The probe runtime and the host executor reach the accelerator only
// through this interface: what a host driver offers for one chip. sim/ implements it as SimDevice
// (TLM-2.0, simulated PCIe costs, every call costs simulated time); tests use FakeDevice. A driver
// for silicon would implement the same class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "chip_model/spec/task.h"

namespace probelab::probes {

class Device {
 public:
  virtual ~Device() = default;

  /// Rank of this chip in the job (kRegChipId).
  virtual std::uint32_t rank() const = 0;

  // ---- MMIO (BAR0, 32-bit registers of chip_model/spec/registers.h) ----
  virtual std::uint32_t read_reg(std::uint32_t offset) = 0;
  virtual void write_reg(std::uint32_t offset, std::uint32_t value) = 0;
  /// Reads out.size() consecutive registers starting at `offset` (at most
  /// spec::kMmioMaxBurstBytes / 4) in one bus transaction, so a block of status registers costs
  /// one read round trip. The default reads them one by one.
  virtual void read_regs(std::uint32_t offset, std::span<std::uint32_t> out) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = read_reg(offset + static_cast<std::uint32_t>(4 * i));
  }

  // ---- Device memory (HBM) ----
  /// Allocates `bytes` of HBM aligned to `align`; throws std::runtime_error when exhausted.
  virtual std::uint64_t alloc(std::size_t bytes, std::size_t align = 64) = 0;
  virtual void free(std::uint64_t addr) = 0;
  /// DMA host -> HBM and HBM -> host; blocking; costs PCIe bandwidth and latency in simulation.
  virtual void dma_write(std::uint64_t hbm_addr, std::span<const std::byte> src) = 0;
  virtual void dma_read(std::uint64_t hbm_addr, std::span<std::byte> dst) = 0;

  // ---- Streams ----
  /// Appends a descriptor to the stream's ring and rings the doorbell. Returns without waiting.
  virtual void submit(std::uint32_t stream, const spec::TaskDescriptor& task) = 0;
  /// Blocks until every task submitted to `stream` has completed (or the stream halted at a
  /// breakpoint: then returns false). Interrupt handlers keep running while it blocks.
  virtual bool synchronize(std::uint32_t stream) = 0;

  // ---- Interrupts ----
  /// Called in host ISR context with the pending lines (spec::IrqLine bits) each time the device
  /// raises an interrupt. The handler acknowledges through write_reg(kRegIrqAck, ...).
  using IrqHandler = std::function<void(std::uint32_t lines)>;
  virtual void set_irq_handler(IrqHandler handler) = 0;
  /// Runs `work` outside interrupt context as soon as possible, as a driver's bottom half (work
  /// queue): an ISR defers long work (draining capture buffers) so that other interrupts, e.g.
  /// the stream completion a synchronize() waits for, are serviced meanwhile. Items run one at a
  /// time, in order, concurrently with the caller's other threads (interleaving only inside Device
  /// calls). Default: runs `work` at once.
  virtual void defer(std::function<void()> work) { work(); }
  /// Blocks until every deferred item has run (not callable from deferred work itself).
  virtual void wait_deferred() {}

  // ---- Time ----
  /// Device cycle counter as the host reads it (kRegCycleLo/Hi), for latency measurements.
  virtual std::uint64_t cycles() = 0;
};

}  // namespace probelab::probes
