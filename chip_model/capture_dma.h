// Capture DMA engine: runs asynchronous full-tensor Capture tasks (kTaskFlagAsync) next to the
// compute stream, so copying a tensor into the capture buffers does not hold the stream or a core.
//
// Contract: the stream engine enqueue()s the task at its local time and goes on with the next
// task. The engine runs jobs one at a time in enqueue order (debug_tasks.h run_capture_dma): it
// reads the tensor through the HBM model when it gets to the job, so a later task that
// overwrites the tensor must wait — the stream engine holds every Barrier and every task flagged
// kTaskFlagWaitCaptures until outstanding(stream) is 0 (done_event() tells when it changes).
// Under the stall overrun policy a full capture buffer stalls this engine, not the stream.
#pragma once

#include <array>
#include <cstdint>
#include <deque>

#include <systemc>

#include "chip_model/core_interface.h"
#include "chip_model/spec/kernel_args.h"
#include "chip_model/spec/registers.h"
#include "chip_model/spec/task.h"

namespace probelab::chip {

class CaptureDma : public sc_core::sc_module {
 public:
  CaptureDma(sc_core::sc_module_name name, const ChipServices& services);

  /// Queues `task` of `stream`, issued at absolute time `at` (the stream's local time).
  void enqueue(std::uint32_t stream, const spec::TaskDescriptor& task, const sc_core::sc_time& at);
  /// Queues a full dump of output `index` (`ref`) of kernel task `task` (TaskDescriptor
  /// dump_outputs), issued by the kernel at its completion time `at`.
  void enqueue_dump(std::uint32_t stream, const spec::TaskDescriptor& task, const spec::TensorRef& ref,
                    std::uint16_t index, const sc_core::sc_time& at);
  /// Jobs of `stream` queued or running.
  std::uint32_t outstanding(std::uint32_t stream) const { return outstanding_.at(stream); }
  /// Notified whenever a job completes.
  const sc_core::sc_event& done_event() const { return done_; }

 private:
  struct Job {
    std::uint32_t stream;
    spec::TaskDescriptor task;
    sc_core::sc_time at;
    bool dump = false;  // a kernel's output dump (ref, index) rather than a Capture task
    spec::TensorRef ref{};
    std::uint16_t index = 0;
  };
  void push(Job job);
  void engine();

  const ChipServices& svc_;
  std::deque<Job> queue_;
  std::array<std::uint32_t, spec::kNumStreams> outstanding_{};
  sc_core::sc_event queued_, done_;
};

}  // namespace probelab::chip
