#include "chip_model/chip.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/spec/registers.h"

namespace probelab::chip {

Chip::Chip(sc_core::sc_module_name name, const ChipConfig& cfg, Options opts)
    : sc_module(name), host_socket("host_socket"), cfg_(cfg), opts_(std::move(opts)), hbm_port_("hbm_port") {
  cfg_.validate();
  if (sc_core::sc_get_time_resolution() != sc_core::sc_time(1, sc_core::SC_PS))
    throw std::runtime_error("Chip: the SystemC time resolution must be 1 ps");
  modes_.fp_mode = cfg_.fp_mode_bits();
  services_.config = &cfg_;
  services_.clock = ChipClock(cfg_.clock_mhz);
  services_.rank = opts_.rank;
  services_.trace = opts_.trace ? opts_.trace : &own_trace_;
  services_.faults = opts_.faults;
  services_.modes = &modes_;
  services_.pmu = &pmu_;
  services_.ops = opts_.ops;
  Trace* trace = services_.trace;
  const std::uint32_t rank = opts_.rank;

  hbm_ = std::make_unique<Hbm>("hbm", cfg_, rank, trace);
  irq_ = std::make_unique<InterruptController>("irq", cfg_, rank, trace);
  detection_ = std::make_unique<DetectionCircuit>("detection", cfg_, *irq_, rank, trace);
  capture_ = std::make_unique<CaptureUnit>("capture", cfg_, *hbm_, *irq_, rank, trace);
  scheduler_ = std::make_unique<CoreScheduler>("scheduler", cfg_.num_cores);
  hbm_port_.bind(hbm_->socket);
  services_.hbm = hbm_.get();
  if (cfg_.l2_model == "shared") {
    l2_ = std::make_unique<L2Cache>(cfg_.l2_bytes);
    services_.l2 = l2_.get();
    // Every initiator but the cores' tile pipeline is kept coherent with the L2 by the HBM model;
    // such an L2 hit moves at one port's rate.
    const double mhz_ghz = cfg_.clock_mhz / 1000.0;
    hbm_->attach_l2(l2_.get(), cfg_.l2_read_bytes_per_cycle * mhz_ghz, cfg_.l2_write_bytes_per_cycle * mhz_ghz,
                    cfg_.capture_l2 == "allocate");
  }
  services_.irq = irq_.get();
  services_.detection = detection_.get();
  services_.capture = capture_.get();
  set_fault_hooks(opts_.faults);
  if (opts_.make_cores) cores_ = opts_.make_cores("cores", services_);
  streams_ = std::make_unique<StreamEngine>("streams", services_, *scheduler_);
  streams_->set_core_executor(cores_.get());

  host_socket.register_b_transport(this, &Chip::b_transport);
  host_socket.register_transport_dbg(this, &Chip::transport_dbg);
  SC_THREAD(hbm_fault_thread);
}

Chip::~Chip() = default;

std::exception_ptr Chip::error() const { return streams_->error(); }

void Chip::set_fault_hooks(FaultHooks* hooks) {
  services_.faults = hooks;
  irq_->set_fault_hooks(hooks);
  capture_->set_fault_hooks(hooks);
}

const PerfFaults& Chip::perf_faults() {
  if (!perf_faults_known_) {
    perf_faults_known_ = true;
    if (fault_wanted(services_.faults, kFaultPerf)) services_.faults->on_perf_faults(rank(), perf_faults_);
    if (!(perf_faults_.compute_slowdown >= 1.0))
      throw std::invalid_argument(fmt::format("{}: compute slowdown must be >= 1, got {}", name(),
                                              perf_faults_.compute_slowdown));
    for (const auto& [core, f] : perf_faults_.core_slowdown)
      if (core >= config().num_cores || !(f >= 1.0))
        throw std::invalid_argument(fmt::format("{}: a throttled core {} (x{}): needs a core below {} and a factor >= 1",
                                                name(), core, f, config().num_cores));
  }
  return perf_faults_;
}

void Chip::start_of_simulation() {
  if (trace().enabled()) trace().set_process_name(rank(), fmt::format("chip{}", rank()));
  for (const auto& [channel, fraction] : perf_faults().hbm_channel_fraction) hbm_->set_channel_fraction(channel, fraction);
  services_.perf = &perf_faults_;
  if (fault_wanted(services_.faults, kFaultHbmWord)) {
    hbm_faults_ = services_.faults->hbm_fault_schedule(rank());
    std::stable_sort(hbm_faults_.begin(), hbm_faults_.end(),
                     [](const HbmFaultPoint& a, const HbmFaultPoint& b) { return a.cycle < b.cycle; });
  }
}

void Chip::hbm_fault_thread() {
  for (const HbmFaultPoint& f : hbm_faults_) {
    const sc_core::sc_time at = clock().time_of_cycle(f.cycle);
    if (at > sc_core::sc_time_stamp()) sc_core::wait(at - sc_core::sc_time_stamp());
    if (f.addr % 8 != 0 || f.addr + 8 > hbm_->size())
      throw std::runtime_error(fmt::format("{}: HBM fault address 0x{:x} is not an 8-aligned word of HBM", name(),
                                           f.addr));
    std::uint64_t word = 0;
    hbm_->debug_read(f.addr, std::as_writable_bytes(std::span(&word, 1)));
    FaultSite site;
    site.rank = rank();
    site.step = modes_.step;
    site.cycle = cycle_now();
    services_.faults->on_hbm_word(site, f.addr, word);
    hbm_->debug_write(f.addr, std::as_bytes(std::span(&word, 1)));
  }
}

std::uint32_t Chip::read_global(std::uint32_t offset, const sc_core::sc_time& now) {
  using namespace spec;
  switch (offset) {
    case kRegChipId: return rank();
    case kRegVersion: return kContractVersion;
    case kRegNumCores: return cfg_.num_cores;
    case kRegClockMhz: return cfg_.clock_mhz;
    case kRegCycleLo: {
      const std::uint64_t c = clock().cycle_at(now);
      cycle_hi_latch_ = static_cast<std::uint32_t>(c >> 32);
      return static_cast<std::uint32_t>(c);
    }
    case kRegCycleHi: return cycle_hi_latch_;
    case kRegFpMode: return modes_.fp_mode;
    case kRegStep: return modes_.step;
    default: return 0;
  }
}

std::uint32_t Chip::read_reg(std::uint32_t offset, const sc_core::sc_time& now) {
  std::uint32_t v = 0;
  if (offset < 0x100)
    v = read_global(offset, now);
  else if (DetectionCircuit::owns(offset))
    v = detection_->read_reg(offset);
  else if (offset < 0x400)
    v = irq_->read_reg(offset);
  else if (offset < 0x500)
    v = capture_->read_reg(offset);
  else if (PerfMonitor::owns(offset))
    v = pmu_.read_reg(offset, ChipClock::to_ps(now), clock().cycle_at(now), capture_->counters().stall_cycles);
  else if (offset >= spec::kRegStreamBase)
    v = streams_->read_reg(offset);
  if (fault_wanted(services_.faults, kFaultRegisterRead)) {
    FaultSite site;
    site.rank = rank();
    site.step = modes_.step;
    site.cycle = clock().cycle_at(now);
    services_.faults->on_register_read(site, offset, v);
  }
  return v;
}

void Chip::write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now) {
  using namespace spec;
  if (offset < 0x100) {
    if (offset == kRegFpMode) {
      modes_.fp_mode = value & (kFpModeSaturation | kFpModeFlushDenormals);
      if (!cfg_.supports_inf_nan) modes_.fp_mode |= kFpModeSaturation;  // saturation-only chip: the bit is hardwired
    }
    if (offset == kRegStep) modes_.step = value;
  } else if (DetectionCircuit::owns(offset)) {
    detection_->write_reg(offset, value, now);
  } else if (offset < 0x400) {
    irq_->write_reg(offset, value, now);
  } else if (offset < 0x500) {
    capture_->write_reg(offset, value, now);
  } else if (PerfMonitor::owns(offset)) {
    pmu_.write_reg(offset, value, ChipClock::to_ps(now), capture_->counters().stall_cycles);
  } else if (offset >= kRegStreamBase) {
    streams_->write_reg(offset, value, now);
  }
}

void Chip::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const std::uint64_t addr = trans.get_address();
  if (addr >= kHbmBusBase) {
    trans.set_address(addr - kHbmBusBase);
    hbm_port_->b_transport(trans, delay);
    trans.set_address(addr);
    return;
  }
  if (addr >= spec::kMmioSize) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  const unsigned len = trans.get_data_length();
  // Reads may burst over consecutive registers (spec::kMmioMaxBurstBytes); writes are 32-bit.
  const bool burst_ok = trans.is_read() && len % 4 == 0 && len <= spec::kMmioMaxBurstBytes && addr + len <= spec::kMmioSize;
  if ((len != 4 && !burst_ok) || len == 0 || addr % 4 != 0 || trans.get_byte_enable_ptr() != nullptr) {
    trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
    return;
  }
  delay += sc_core::sc_time(static_cast<double>(cfg_.mmio_latency_ns), sc_core::SC_NS);
  const sc_core::sc_time now = sc_core::sc_time_stamp() + delay;
  std::uint32_t v = 0;
  if (trans.is_read()) {
    for (unsigned i = 0; i < len; i += 4) {
      v = read_reg(static_cast<std::uint32_t>(addr + i), now);
      std::memcpy(trans.get_data_ptr() + i, &v, 4);
    }
  } else if (trans.is_write()) {
    std::memcpy(&v, trans.get_data_ptr(), 4);
    write_reg(static_cast<std::uint32_t>(addr), v, now);
  } else {
    trans.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
    return;
  }
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

unsigned int Chip::transport_dbg(tlm::tlm_generic_payload& trans) {
  const std::uint64_t addr = trans.get_address();
  if (addr >= kHbmBusBase) {
    trans.set_address(addr - kHbmBusBase);
    const unsigned int n = hbm_port_->transport_dbg(trans);
    trans.set_address(addr);
    return n;
  }
  if (addr >= spec::kMmioSize || trans.get_data_length() != 4 || addr % 4 != 0) return 0;
  std::uint32_t v = 0;
  if (trans.is_read()) {
    v = read_reg(static_cast<std::uint32_t>(addr), sc_core::sc_time_stamp());
    std::memcpy(trans.get_data_ptr(), &v, 4);
  } else if (trans.is_write()) {
    std::memcpy(&v, trans.get_data_ptr(), 4);
    write_reg(static_cast<std::uint32_t>(addr), v, sc_core::sc_time_stamp());
  }
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  return 4;
}

}  // namespace probelab::chip
