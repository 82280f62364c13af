#include "sim/platform/host_model.h"

namespace probelab::sim {

HostModel::HostModel(sc_core::sc_module_name name, chip::Chip& chip, chip::Trace* trace, HostCosts costs)
    : sc_core::sc_module(name), socket("socket"), rank_(chip.rank()) {
  socket.bind(chip.host_socket);
  dev_ = std::make_unique<SimDevice>(
      rank_, chip.config(),
      [this](tlm::tlm_generic_payload& t, sc_core::sc_time& d) { socket->b_transport(t, d); }, trace, costs);
  chip.set_irq_callback([this](std::uint32_t lines) {
    pending_irq_ |= lines;
    irq_ev_.notify(sc_core::SC_ZERO_TIME);
  });
  if (trace && trace->enabled()) trace->set_process_name(chip::Trace::kHostPid + rank_, "host" + std::to_string(rank_));
  SC_HAS_PROCESS(HostModel);
  SC_THREAD(main_thread);
  SC_THREAD(isr_thread);
  SC_THREAD(posted_thread);
  SC_THREAD(deferred_thread);
}

void HostModel::main_thread() {
  try {
    if (program_) program_();
  } catch (...) {
    error_ = std::current_exception();
  }
  dev_->sync();
  finished_ = true;
  finish_time_ = sc_core::sc_time_stamp();
  if (on_finish_) on_finish_();
}

void HostModel::isr_thread() {
  for (;;) {
    while (pending_irq_ == 0) sc_core::wait(irq_ev_);
    const std::uint32_t lines = pending_irq_;
    pending_irq_ = 0;
    try {
      dev_->service_interrupt(lines);
    } catch (...) {
      if (!error_) error_ = std::current_exception();
      sc_core::sc_stop();
      return;
    }
  }
}

void HostModel::posted_thread() { dev_->posted_write_loop(); }

void HostModel::deferred_thread() { dev_->deferred_loop(); }

}  // namespace probelab::sim
