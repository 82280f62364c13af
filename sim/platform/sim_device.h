// SimDevice: probes::Device over the chip's TLM-2.0 PCIe endpoint (chip::Chip::host_socket), used
// by SystemC processes of the host CPU model (sim/platform/host_model.h). Every call costs simulated time in
// the calling SC_THREAD; each host thread has its own quantum keeper (temporal decoupling) and
// synchronises on register reads, blocking DMA and interrupts.
//
// Cost model (PCIe figures from the chip config, the rest documented model choices):
//  - every call: `host_call_ns` of driver entry;
//  - MMIO write: posted — the host pays the call cost only; the write reaches the chip
//    pcie_latency_ns later, in issue order (HostModel's posted-write process delivers it);
//  - MMIO read: non-posted — waits for earlier posted writes to land (PCIe ordering), then
//    pcie_latency_ns out + the chip's mmio_latency_ns + pcie_latency_ns back;
//  - DMA (blocking): pcie_latency_ns + bytes / pcie_bandwidth on the shared PCIe link (one
//    transfer at a time, both directions share it) + the HBM time the chip adds;
//  - submit: the 64-byte descriptor is written into the stream's ring in HBM as a posted write
//    (link bandwidth, no round trip), then the tail doorbell as a posted MMIO write;
//  - synchronize: submits a Barrier task with kTaskFlagNotify (what a driver's stream synchronize
//    does), sleeps until a stream interrupt was serviced (kIrqStreamDone, consumed here, or
//    kIrqBreakpoint) or a `poll_timeout_ns` fallback expires, then reads the stream's status
//    and completed count. A stream that completed nothing for `poll_backoff_after` fallback
//    periods (10 ms; interrupts may wake the host meanwhile) is stalled: the fallback then grows
//    to about the time it has been stalled, so each poll about doubles it, and one poll falls just
//    after the `sync_timeout_ns` deadline. A hung job costs tens of register reads per host, not
//    one per period, and is noticed at the deadline.
// Interrupts: HostModel calls service_interrupt() in its ISR thread with the delivered lines; the
// installed handler runs there, so it keeps running while the main thread blocks in synchronize().
// defer()red work runs in a third host thread (deferred_loop), so a long drain neither blocks the
// ISR thread nor delays the stream completion the main thread waits for.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/tlm_quantumkeeper.h>

#include "chip_model/chip_config.h"
#include "chip_model/trace.h"
#include "probes/device.h"
#include "sim/platform/hbm_allocator.h"

namespace probelab::sim {

struct HostCosts {
  std::uint32_t host_call_ns = 100;       // driver entry per Device call (model choice)
  std::uint32_t poll_timeout_ns = 100000; // synchronize() re-checks at least this often
  std::uint32_t poll_backoff_after = 100; // ... until no task completed for this many of those periods
  std::uint32_t ring_entries = 4096;      // descriptors per stream ring (256 KiB of HBM)
  /// synchronize() gives up when no task of the stream completed for this long (simulated; a
  /// driver's execution timeout): a job whose chips wait for each other forever (collectives
  /// that never match) ends with SyncTimeout instead of polling without end.
  std::uint64_t sync_timeout_ns = 1'000'000'000;
};

/// synchronize() timed out (HostCosts::sync_timeout_ns); the message names the rank and stream.
struct SyncTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class SimDevice final : public probes::Device {
 public:
  /// Forwards a transaction to the chip's host_socket (the host's initiator socket).
  using Bus = std::function<void(tlm::tlm_generic_payload&, sc_core::sc_time&)>;
  /// `trace` may be null.
  SimDevice(std::uint32_t rank, const chip::ChipConfig& cfg, Bus bus, chip::Trace* trace, HostCosts costs = {});
  ~SimDevice() override;

  std::uint32_t rank() const override { return rank_; }
  std::uint32_t read_reg(std::uint32_t offset) override;
  void read_regs(std::uint32_t offset, std::span<std::uint32_t> out) override;
  void write_reg(std::uint32_t offset, std::uint32_t value) override;
  std::uint64_t alloc(std::size_t bytes, std::size_t align = 64) override;
  void free(std::uint64_t addr) override;
  void dma_write(std::uint64_t hbm_addr, std::span<const std::byte> src) override;
  void dma_read(std::uint64_t hbm_addr, std::span<std::byte> dst) override;
  void submit(std::uint32_t stream, const spec::TaskDescriptor& task) override;
  bool synchronize(std::uint32_t stream) override;
  void set_irq_handler(IrqHandler handler) override { handler_ = std::move(handler); }
  std::uint64_t cycles() override;

  // ---- host model glue ----
  /// Runs in the host ISR thread at delivery: consumes kIrqStreamDone, then calls the installed
  /// handler with the remaining lines, then wakes synchronize().
  void service_interrupt(std::uint32_t lines);
  /// Body of the posted-write process: delivers queued MMIO writes at their arrival times.
  void posted_write_loop();
  /// Body of the host's deferred-work thread (HostModel): runs defer()red items in order.
  void deferred_loop();
  void defer(std::function<void()> work) override;
  void wait_deferred() override;
  /// The current host thread's local time (sc_time_stamp() + decoupled offset).
  sc_core::sc_time local_now();
  /// Synchronises the calling thread's quantum keeper with the kernel.
  void sync();
  /// Sleeps until a stream interrupt (kIrqStreamDone / kIrqBreakpoint) was serviced or `timeout`
  /// passed (main-thread helper). `seen`: the count of such interrupts before the caller last read
  /// the device; one serviced since then returns at once (no lost wake-up while the caller's
  /// register reads waited).
  void wait_for_interrupt(const sc_core::sc_time& timeout, std::uint64_t seen);
  /// synchronize()'s fallback when the stream last made progress at `progress_at`.
  sc_core::sc_time poll_interval(const sc_core::sc_time& progress_at);
  /// Delay at which host DMA touches HBM: the calling thread's local time (see the .cpp).
  sc_core::sc_time hbm_issue_delay();

  struct Stats {
    std::uint64_t mmio_reads = 0, mmio_writes = 0, dma_writes = 0, dma_reads = 0;
    std::uint64_t dma_bytes_written = 0, dma_bytes_read = 0, submits = 0, interrupts = 0;
    std::uint64_t pcie_busy_ps = 0;
  };
  const Stats& stats() const { return stats_; }
  const HbmAllocator& allocator() const { return alloc_; }

 private:
  struct Posted {
    sc_core::sc_time at;
    std::uint64_t addr;
    std::uint32_t value;
    std::uint64_t seq;  // issue order
  };
  /// Per host thread (SystemC process): its quantum keeper and the issue number of its last
  /// posted write (0: none).
  struct ThreadState {
    std::unique_ptr<tlm_utils::tlm_quantumkeeper> qk;
    std::uint64_t last_posted = 0;
  };
  ThreadState& thread_state();
  std::uint64_t& thread_last_posted();
  tlm_utils::tlm_quantumkeeper& qk();
  void charge_call();
  /// Reserves the PCIe link for `bytes` starting no earlier than `ready`; returns when the last
  /// byte arrives (absolute).
  /// Occupies one direction of the (full-duplex) host link for `bytes`; returns the arrival time.
  enum class LinkDir { ToDevice, ToHost };
  sc_core::sc_time pcie_transfer(const sc_core::sc_time& ready, std::uint64_t bytes, const char* what,
                                 LinkDir dir = LinkDir::ToDevice);
  void transport(tlm::tlm_command cmd, std::uint64_t bus_addr, std::byte* data, std::size_t len,
                 sc_core::sc_time& delay, const char* what);
  void ensure_ring(std::uint32_t stream);
  std::uint32_t read_reg_now(std::uint32_t offset);
  void read_regs_now(std::uint32_t offset, std::span<std::uint32_t> out);  // one non-posted read

  std::uint32_t rank_;
  const chip::ChipConfig cfg_;
  Bus bus_;
  chip::Trace* trace_;
  HostCosts costs_;
  HbmAllocator alloc_;
  IrqHandler handler_;
  std::map<const void*, ThreadState> threads_;  // by process object
  const void* current_key_ = nullptr;           // the process thread_state() last served
  ThreadState* current_ = nullptr;
  sc_core::sc_time call_cost_, pcie_latency_;   // host_call_ns, pcie_latency_ns
  std::uint64_t posted_issued_ = 0, posted_delivered_ = 0;
  std::array<sc_core::sc_time, 2> pcie_free_{};  // per LinkDir
  std::deque<Posted> posted_;
  sc_core::sc_time last_posted_at_ = sc_core::SC_ZERO_TIME;
  sc_core::sc_time dma_posted_at_ = sc_core::SC_ZERO_TIME;  // arrival of the latest posted DMA write
  sc_core::sc_event posted_ev_, posted_drained_ev_, serviced_ev_;
  std::uint64_t serviced_count_ = 0;  // interrupts serviced so far
  std::deque<std::function<void()>> deferred_;
  bool deferred_running_ = false;
  sc_core::sc_event deferred_ev_, deferred_done_ev_;
  std::exception_ptr deferred_error_;
  struct Ring {
    std::uint64_t base = 0;
    std::uint32_t tail = 0;        // next slot to fill
    std::uint32_t known_head = 0;  // last head read from the device
    std::uint32_t submitted = 0;   // tasks submitted (mod 2^32), incl. barriers
    bool last_is_barrier = false;
  };
  std::map<std::uint32_t, Ring> rings_;
  /// Payloads transport() reuses (one each for the calls in progress: a transport may wait).
  std::vector<std::unique_ptr<tlm::tlm_generic_payload>> free_payloads_;
  std::uint32_t next_barrier_id_ = 0xF0000000u;
  Stats stats_;
};

}  // namespace probelab::sim
