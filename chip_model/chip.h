// Top module of one simulated chip: HBM, interrupt controller, detection circuit, capture unit,
// core scheduler, stream engine and the AI cores (built by Options::make_cores).
//
// Host-facing surface (what sim/'s SimDevice and host model use):
//  - `host_socket`: one TLM-2.0 target socket, the chip's PCIe endpoint. Bus address map:
//        [0, spec::kMmioSize)                    BAR0: 32-bit registers of spec/registers.h
//        [kHbmBusBase, kHbmBusBase + hbm_bytes)  HBM (DMA target; any length, read/write)
//    MMIO: 4-byte aligned single-register reads/writes only (else TLM_GENERIC_ERROR_RESPONSE);
//    each costs `mmio_latency_ns` of chip-side time, added to the delay. HBM accesses go through
//    the HBM bandwidth model (client HostDma). The PCIe link cost itself (pcie_bandwidth_gbps,
//    pcie_latency_ns) is the initiator's to charge. Unmapped addresses ->
//    TLM_ADDRESS_ERROR_RESPONSE. transport_dbg reads/writes registers and HBM in zero time.
//  - Interrupts: set_irq_callback() (called in SC_METHOD context at delivery, argument = pending
//    lines) and/or wait on irq_event(). Both happen `irq_latency_ns` after the device raised.
//  - Global registers: kRegChipId = rank, kRegVersion, kRegNumCores, kRegClockMhz, kRegCycleLo/Hi
//    (reading Lo latches Hi; cycle = device cycles since time zero at the access time), kRegFpMode
//    (reset from the config), kRegStep.
//  - PMU (spec::kRegPmuBase): the counters of perf_monitor.h; the AI cores and the stream
//    engine report into it.
//  - progress_event(): notified when any stream completes a task or halts (for host waits that
//    want no polling).
#pragma once

#include <cstdint>
#include <memory>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include "chip_model/capture_unit.h"
#include "chip_model/chip_config.h"
#include "chip_model/collective_handler.h"
#include "chip_model/core_interface.h"
#include "chip_model/core_scheduler.h"
#include "chip_model/detection_circuit.h"
#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/hbm.h"
#include "chip_model/interrupt_controller.h"
#include "chip_model/l2_cache.h"
#include "chip_model/perf_monitor.h"
#include "chip_model/stream_engine.h"
#include "chip_model/trace.h"

namespace probelab::chip {

struct ChipOptions {
  std::uint32_t rank = 0;
  FaultHooks* faults = nullptr;  // non-owning; nullptr = no faults
  Trace* trace = nullptr;        // non-owning; nullptr = a private disabled trace
  CoreFactory make_cores;        // empty: Kernel tasks fail with an error
  kernels::PreparedOpPool* ops = nullptr;  // non-owning; shared by the chips of a simulation (nullptr: none)
};

class Chip : public sc_core::sc_module {
 public:
  static constexpr std::uint64_t kHbmBusBase = 0x1'0000'0000ull;
  static constexpr std::uint32_t kContractVersion = 0x00010000;
  using Options = ChipOptions;

  tlm_utils::simple_target_socket_optional<Chip> host_socket;  // may stay unbound (tests)

  /// `cfg` is validated and copied.
  Chip(sc_core::sc_module_name name, const ChipConfig& cfg, Options opts = {});
  ~Chip() override;
  SC_HAS_PROCESS(Chip);

  std::uint32_t rank() const { return services_.rank; }
  const ChipConfig& config() const { return cfg_; }
  const ChipClock& clock() const { return services_.clock; }
  const ChipServices& services() const { return services_; }
  std::uint64_t cycle_now() const { return services_.clock.cycle_at(sc_core::sc_time_stamp()); }

  // ---- host side ----
  void set_irq_callback(InterruptController::HostCallback cb) { irq_->set_host_callback(std::move(cb)); }
  const sc_core::sc_event& irq_event() const { return irq_->host_event(); }
  const sc_core::sc_event& progress_event() const { return streams_->progress_event(); }
  /// What a task threw on this chip (StreamEngine::error()), or null.
  std::exception_ptr error() const;

  /// Register access as the bus does it, at absolute time `now` (tests and sim glue; no
  /// latency is charged here).
  std::uint32_t read_reg(std::uint32_t offset, const sc_core::sc_time& now);
  void write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now);

  // ---- wiring ----
  void set_collective_handler(CollectiveHandler* h) { streams_->set_collective_handler(h); }
  void set_fault_hooks(FaultHooks* hooks);  // before sc_start

  // ---- parts (for tests, injectors, collectives and the report) ----
  Hbm& hbm() { return *hbm_; }
  InterruptController& irq() { return *irq_; }
  DetectionCircuit& detection() { return *detection_; }
  CaptureUnit& capture() { return *capture_; }
  StreamEngine& streams() { return *streams_; }
  CoreScheduler& scheduler() { return *scheduler_; }
  Trace& trace() { return *services_.trace; }
  PerfMonitor& pmu() { return pmu_; }
  /// The chip's performance faults (FaultHooks::on_perf_faults, asked on first use once the
  /// hooks are set; a healthy chip without hooks).
  const PerfFaults& perf_faults();

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned int transport_dbg(tlm::tlm_generic_payload& trans);
  std::uint32_t read_global(std::uint32_t offset, const sc_core::sc_time& now);
  void start_of_simulation() override;
  void hbm_fault_thread();

  ChipConfig cfg_;
  Options opts_;
  tlm_utils::simple_initiator_socket<Chip> hbm_port_;  // host_socket -> HBM window
  Trace own_trace_;
  ChipModes modes_;
  ChipServices services_;
  PerfMonitor pmu_;
  PerfFaults perf_faults_;
  bool perf_faults_known_ = false;
  std::uint32_t cycle_hi_latch_ = 0;
  std::unique_ptr<Hbm> hbm_;
  std::unique_ptr<L2Cache> l2_;
  std::unique_ptr<InterruptController> irq_;
  std::unique_ptr<DetectionCircuit> detection_;
  std::unique_ptr<CaptureUnit> capture_;
  std::unique_ptr<CoreScheduler> scheduler_;
  std::unique_ptr<CoreExecutor> cores_;
  std::unique_ptr<StreamEngine> streams_;
  std::vector<HbmFaultPoint> hbm_faults_;
};

}  // namespace probelab::chip
