// Stream processor and task scheduler: spec::kNumStreams command queues whose descriptor rings
// live in HBM.
//
// Per stream (registers at spec::stream_reg(s, ...)): the host programs Ring (HBM address) and
// RingEntries, writes descriptors into the ring, then writes the new Tail (doorbell). The
// stream's SC_THREAD fetches descriptors from Head to Tail (64 B each, read through the HBM
// model), advancing Head as it fetches, and executes them strictly in order, one at a time:
//   Kernel      -> cores granted by the CoreScheduler, then CoreExecutor::execute
//   Capture     -> one core's vector unit: stats / hash / full copy (debug_tasks.h) into the
//                  capture unit; with kTaskFlagAsync the capture DMA engine (capture_dma.h)
//                  copies the full tensor while the stream goes on
//   Breakpoint  -> one core's vector unit: stats + predicate; if it holds, the stream halts after
//                  the task (Halted status, HaltTask = task id, kIrqBreakpoint) until the host
//                  writes Resume
//   EventRecord -> increments event `event_id` (a counting semaphore shared by all streams)
//   EventWait   -> waits until event `event_id` has a record, then consumes one
//   Barrier     -> waits for the stream's asynchronous captures (so does any task flagged
//                  kTaskFlagWaitCaptures, before it starts)
//   Collective  -> CollectiveHandler::run, then kIrqCollective
//   FloatStatusGet   -> writes the device's float status (spec/float_status.h) into the 64-byte
//                       buffer at args_addr (HBM model, client Stream)
//   FloatStatusReset -> clears the device's float status (a reset by this stream)
// After a Kernel or Collective task, FaultHooks::on_float_status may reset the status (another
// client) or raise bits on this chip alone.
// After each task: kTaskFlagStatusRecord makes a StepStatus capture record (float status bits
// raised and exception reports suppressed since the previous one); Completed += 1; kTaskFlagNotify raises kIrqStreamDone. Every task also costs
// `task_dispatch_ns`. An unknown task kind or a failing task throws std::runtime_error (which
// ends sc_start with the error). Streams run concurrently; each has its own quantum keeper.
// Writing RingEntries resets Head and Tail to 0 (program it while the stream is idle); Tail
// values are taken modulo RingEntries.
#pragma once

#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <systemc>
#include <tlm_utils/tlm_quantumkeeper.h>

#include "chip_model/core_interface.h"
#include "chip_model/spec/registers.h"

namespace probelab::chip {

class CaptureDma;
class CollectiveHandler;
class CoreScheduler;

class StreamEngine : public sc_core::sc_module {
 public:
  StreamEngine(sc_core::sc_module_name name, const ChipServices& services, CoreScheduler& sched);
  ~StreamEngine() override;

  void set_core_executor(CoreExecutor* exec) { executor_ = exec; }
  void set_collective_handler(CollectiveHandler* h) { collectives_ = h; }

  /// MMIO of the stream block; other offsets: 0 / ignored. A doorbell or resume written at
  /// absolute time `now` (the initiator's local time) wakes the stream at that time.
  std::uint32_t read_reg(std::uint32_t offset) const;
  void write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now);

  /// Notified when any stream completes a task or halts.
  const sc_core::sc_event& progress_event() const { return progress_; }
  /// What a task threw (a kernel's data-dependent error, e.g. an index out of range): the stream
  /// stops and the kernel with it (sc_stop); the platform rethrows it once sc_start() returns.
  std::exception_ptr error() const { return error_; }

  struct StreamState {
    std::uint64_t ring = 0;
    std::uint32_t entries = 0;
    std::uint32_t head = 0, tail = 0;
    std::uint32_t completed = 0;
    bool halted = false, busy = false;
    std::uint32_t halt_task = 0;
  };
  const StreamState& stream(std::uint32_t s) const { return streams_.at(s); }
  /// True when every stream is idle (ring empty, nothing executing) or halted.
  bool all_idle() const;
  /// Records currently available on event `id`.
  std::uint64_t event_count(std::uint32_t id) const;

  /// One executed task (every kind): dispatch begins at fetch_cycle, execution runs
  /// [start_cycle, end_cycle) (an asynchronous capture: until it was queued).
  struct TaskRecord {
    spec::TaskKind kind;
    std::uint32_t op_id = 0, task_id = 0, step = 0, stream = 0;
    std::uint64_t fetch_cycle = 0, start_cycle = 0, end_cycle = 0;
    std::uint64_t dur_ps = 0;  // end - start, exact
  };
  /// Called with each task's record as the task completes (in completion order per stream,
  /// streams interleaved as they completed); the engine keeps none.
  void set_task_sink(std::function<void(const TaskRecord&)> sink) { task_sink_ = std::move(sink); }

 private:
  void stream_thread(std::uint32_t s);
  void run_task(std::uint32_t s, const spec::TaskDescriptor& task, tlm_utils::tlm_quantumkeeper& qk);
  void wait_captures(std::uint32_t s, tlm_utils::tlm_quantumkeeper& qk);
  void status_record(std::uint32_t s, const spec::TaskDescriptor& task, tlm_utils::tlm_quantumkeeper& qk);
  /// FaultHooks::on_float_status after a Kernel or Collective task.
  void float_status_fault(std::uint32_t s, const spec::TaskDescriptor& task, tlm_utils::tlm_quantumkeeper& qk);
  /// Reports the task's dispatch, collective and event-wait cycles to the PMU.
  void count_task(std::uint32_t s, const spec::TaskDescriptor& task, const sc_core::sc_time& fetch, const sc_core::sc_time& start,
                  const sc_core::sc_time& end);
  void trace_task(std::uint32_t s, const spec::TaskDescriptor& task, const sc_core::sc_time& start,
                  const sc_core::sc_time& end) const;

  const ChipServices& svc_;
  CoreScheduler& sched_;
  CoreExecutor* executor_ = nullptr;
  CollectiveHandler* collectives_ = nullptr;
  std::unique_ptr<CaptureDma> capture_dma_;
  std::array<StreamState, spec::kNumStreams> streams_{};
  std::array<sc_core::sc_event, spec::kNumStreams> doorbell_;
  std::array<sc_core::sc_event, spec::kNumStreams> resume_;
  std::map<std::uint32_t, std::uint64_t> events_;
  sc_core::sc_event event_recorded_;
  sc_core::sc_event progress_;
  std::exception_ptr error_;
  std::function<void(const TaskRecord&)> task_sink_;
};

}  // namespace probelab::chip
