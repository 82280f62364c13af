// The host CPU of one rank, as SystemC processes: a main thread that runs the host program (the
// graph executor and the probe runtime it drives), an ISR thread that services the chip's
// interrupts through SimDevice::service_interrupt, a thread running the driver's deferred work
// (SimDevice::defer), and the posted-write process of the PCIe model. The host reaches the chip only through its TLM initiator socket (bound to
// chip::Chip::host_socket) and the chip's interrupt delivery.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include "chip_model/chip.h"
#include "sim/platform/sim_device.h"

namespace probelab::sim {

class HostModel : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<HostModel> socket;

  /// Binds `socket` to chip.host_socket and hooks the chip's interrupt delivery.
  HostModel(sc_core::sc_module_name name, chip::Chip& chip, chip::Trace* trace, HostCosts costs = {});

  SimDevice& device() { return *dev_; }
  std::uint32_t rank() const { return rank_; }

  /// The host program, run once in the main thread from time zero. An exception it throws is
  /// kept (error()) and stops the simulation.
  void set_program(std::function<void()> program) { program_ = std::move(program); }
  bool finished() const { return finished_; }
  std::exception_ptr error() const { return error_; }
  /// Simulated time at which the program returned.
  sc_core::sc_time finish_time() const { return finish_time_; }
  /// Called (in the main thread) when the program has returned or failed.
  void set_on_finish(std::function<void()> f) { on_finish_ = std::move(f); }

 private:
  void main_thread();
  void isr_thread();
  void posted_thread();
  void deferred_thread();

  std::uint32_t rank_;
  std::unique_ptr<SimDevice> dev_;
  std::function<void()> program_;
  std::function<void()> on_finish_;
  std::uint32_t pending_irq_ = 0;
  sc_core::sc_event irq_ev_;
  bool finished_ = false;
  std::exception_ptr error_;
  sc_core::sc_time finish_time_;
};

}  // namespace probelab::sim
