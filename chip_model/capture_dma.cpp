#include "chip_model/capture_dma.h"

#include <tlm_utils/tlm_quantumkeeper.h>

#include "chip_model/debug_tasks.h"

namespace probelab::chip {

class CaptureDma::Keeper final : public tlm_utils::tlm_quantumkeeper {
 public:
  explicit Keeper(CaptureDma& dma) : dma_(dma) {}
  void sync() override {
    dma_.resume_after(get_local_time());
    reset();
  }

 private:
  CaptureDma& dma_;
};

CaptureDma::CaptureDma(sc_core::sc_module_name name, const ChipServices& services)
    : sc_module(name), svc_(services) {
  sc_core::sc_spawn_options relay_opts;
  relay_opts.spawn_method();
  relay_opts.set_sensitivity(&wake_);
  relay_opts.dont_initialize();
  sc_core::sc_spawn([this] { relay(); }, sc_core::sc_gen_unique_name("capture_dma_relay"), &relay_opts);
  sc_core::sc_spawn_options opts;
  sc_core::sc_spawn([this] { engine(); }, sc_core::sc_gen_unique_name("capture_dma"), &opts);
}

void CaptureDma::resume_after(const sc_core::sc_time& delay) {
  // A method runs before the threads of its evaluation phase, and the thread it notifies at once
  // runs after the threads the kernel resumed for that phase, in whatever order it took them.
  wake_.notify(delay);
  sc_core::wait(turn_);
}

void CaptureDma::push(Job job) {
  ++outstanding_.at(job.stream);
  queue_.push_back(std::move(job));
  if (!idle_) return;  // the engine looks at the queue before it waits again
  idle_ = false;
  wake_.notify(sc_core::SC_ZERO_TIME);
}

void CaptureDma::enqueue(std::uint32_t stream, const spec::TaskDescriptor& task, const sc_core::sc_time& at) {
  push({stream, task, at, false, {}, 0});
}

void CaptureDma::enqueue_dump(std::uint32_t stream, const spec::TaskDescriptor& task, const spec::TensorRef& ref,
                              std::uint16_t index, const sc_core::sc_time& at) {
  push({stream, task, at, true, ref, index});
}

void CaptureDma::engine() {
  Keeper qk(*this);
  qk.set_global_quantum(sc_core::sc_time(static_cast<double>(svc_.config->quantum_ns), sc_core::SC_NS));
  qk.reset();
  for (;;) {
    while (queue_.empty()) {
      if (qk.get_local_time() != sc_core::SC_ZERO_TIME) {
        qk.sync();
        continue;
      }
      idle_ = true;
      sc_core::wait(turn_);  // push() ended idle_ and notified wake_
    }
    const Job job = queue_.front();
    queue_.pop_front();
    if (job.at > qk.get_current_time()) qk.set(job.at - sc_core::sc_time_stamp());
    if (job.dump) run_dump_dma(svc_, job.task, job.stream, qk, job.ref, job.index, false);
    else run_capture_dma(svc_, job.task, job.stream, qk);
    qk.sync();  // completion is visible at the job's end time
    --outstanding_.at(job.stream);
    done_.notify(sc_core::SC_ZERO_TIME);
  }
}

}  // namespace probelab::chip
