// Capture DMA engine: runs asynchronous full-tensor Capture tasks (kTaskFlagAsync) next to the
// compute stream, so copying a tensor into the capture buffers does not hold the stream or a core.
//
// Contract: the stream engine enqueue()s the task at its local time and goes on with the next
// task. The engine runs jobs one at a time in enqueue order (debug_tasks.h run_capture_dma): it
// reads the tensor through the HBM model when it gets to the job, so a later task that
// overwrites the tensor must wait — the stream engine holds every Barrier and every task flagged
// kTaskFlagWaitCaptures until outstanding(stream) is 0 (done_event() tells when it changes).
// Under the stall overrun policy a full capture buffer stalls this engine, not the stream.
//
// Same-instant order: the engine wakes at the times the stream engine hands it (a job's issue
// time is the stream's own time), so it often resumes at the very instant a stream thread does.
// The kernel resumes processes woken at one instant in an order of its own (SystemC's timer queue
// breaks ties between equal times by its heap's shape, which every event of the kernel shapes, so
// the order changes with the chips a process simulates). The engine therefore resumes, from its
// time catch-ups (its quantum keeper's sync) and from waiting for a job, through a relay method:
// after every other process woken at that instant (time and delta), so its reads reach the HBM
// model and its records the capture unit after theirs, whichever chips share the kernel.
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
  class Keeper;  // the engine's quantum keeper: sync() resumes through the relay
  void push(Job job);
  void engine();
  /// Resumes the engine after `delay` (SC_ZERO_TIME: the next delta), after the other processes
  /// woken at that instant: wake_ runs relay(), which notifies turn_ at once.
  void resume_after(const sc_core::sc_time& delay);
  void relay() { turn_.notify(); }

  const ChipServices& svc_;
  std::deque<Job> queue_;
  std::array<std::uint32_t, spec::kNumStreams> outstanding_{};
  bool idle_ = false;  // waiting for a job (a push resumes it)
  sc_core::sc_event wake_, turn_, done_;
};

}  // namespace probelab::chip
