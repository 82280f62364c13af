#include "chip_model/stream_engine.h"

#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/collective_handler.h"
#include "chip_model/perf_monitor.h"
#include "chip_model/capture_dma.h"
#include "chip_model/capture_unit.h"
#include "chip_model/core_scheduler.h"
#include "chip_model/debug_tasks.h"
#include "chip_model/detection_circuit.h"
#include "chip_model/hbm.h"
#include "chip_model/interrupt_controller.h"
#include "chip_model/spec/float_status.h"
#include "chip_model/spec/irq.h"
#include "chip_model/trace.h"

namespace probelab::chip {
namespace {

const char* kind_name(spec::TaskKind k) {
  switch (k) {
    case spec::TaskKind::Kernel: return "kernel";
    case spec::TaskKind::Capture: return "capture";
    case spec::TaskKind::Breakpoint: return "breakpoint";
    case spec::TaskKind::EventRecord: return "event_record";
    case spec::TaskKind::EventWait: return "event_wait";
    case spec::TaskKind::Collective: return "collective";
    case spec::TaskKind::Barrier: return "barrier";
    case spec::TaskKind::FloatStatusGet: return "float_status_get";
    case spec::TaskKind::FloatStatusReset: return "float_status_reset";
  }
  return "unknown";
}

}  // namespace

StreamEngine::StreamEngine(sc_core::sc_module_name name, const ChipServices& services, CoreScheduler& sched)
    : sc_module(name), svc_(services), sched_(sched), capture_dma_(std::make_unique<CaptureDma>("capture_dma", services)) {
  for (std::uint32_t s = 0; s < spec::kNumStreams; ++s) {
    sc_core::sc_spawn_options opts;
    sc_core::sc_spawn([this, s] { stream_thread(s); }, sc_core::sc_gen_unique_name("stream"), &opts);
  }
}

StreamEngine::~StreamEngine() = default;

void StreamEngine::wait_captures(std::uint32_t s, tlm_utils::tlm_quantumkeeper& qk) {
  if (capture_dma_->outstanding(s) == 0) return;
  qk.sync();
  while (capture_dma_->outstanding(s) > 0) sc_core::wait(capture_dma_->done_event());
  qk.reset();
}

std::uint64_t StreamEngine::event_count(std::uint32_t id) const {
  const auto it = events_.find(id);
  return it == events_.end() ? 0 : it->second;
}

bool StreamEngine::all_idle() const {
  for (std::uint32_t s = 0; s < spec::kNumStreams; ++s) {
    const StreamState& st = streams_[s];
    if (!st.halted && (st.busy || st.head != st.tail || capture_dma_->outstanding(s) > 0)) return false;
  }
  return true;
}

std::uint32_t StreamEngine::read_reg(std::uint32_t offset) const {
  if (offset < spec::kRegStreamBase || offset >= spec::kRegStreamBase + spec::kNumStreams * spec::kStreamStride)
    return 0;
  const std::uint32_t s = (offset - spec::kRegStreamBase) / spec::kStreamStride;
  const StreamState& st = streams_[s];
  switch ((offset - spec::kRegStreamBase) % spec::kStreamStride) {
    case spec::kStreamRingLo: return static_cast<std::uint32_t>(st.ring);
    case spec::kStreamRingHi: return static_cast<std::uint32_t>(st.ring >> 32);
    case spec::kStreamRingEntries: return st.entries;
    case spec::kStreamTail: return st.tail;
    case spec::kStreamHead: return st.head;
    case spec::kStreamStatus: {
      std::uint32_t v = 0;
      if (!st.busy && st.head == st.tail && !st.halted) v |= spec::kStreamIdle;
      if (st.halted) v |= spec::kStreamHalted;
      return v;
    }
    case spec::kStreamCompleted: return st.completed;
    case spec::kStreamHaltTask: return st.halt_task;
    default: return 0;
  }
}

void StreamEngine::write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now) {
  if (offset < spec::kRegStreamBase || offset >= spec::kRegStreamBase + spec::kNumStreams * spec::kStreamStride)
    return;
  const std::uint32_t s = (offset - spec::kRegStreamBase) / spec::kStreamStride;
  StreamState& st = streams_[s];
  const sc_core::sc_time delay = now > sc_core::sc_time_stamp() ? now - sc_core::sc_time_stamp() : sc_core::SC_ZERO_TIME;
  switch ((offset - spec::kRegStreamBase) % spec::kStreamStride) {
    case spec::kStreamRingLo: st.ring = (st.ring & 0xFFFFFFFF00000000ull) | value; break;
    case spec::kStreamRingHi: st.ring = (st.ring & 0xFFFFFFFFull) | (std::uint64_t{value} << 32); break;
    case spec::kStreamRingEntries:
      st.entries = value;
      st.head = st.tail = 0;
      break;
    case spec::kStreamTail:
      st.tail = st.entries ? value % st.entries : 0;
      doorbell_[s].notify(delay);
      break;
    case spec::kStreamResume:
      if ((value & 1u) && st.halted) {
        st.halted = false;
        resume_[s].notify(delay);
      }
      break;
    default: break;
  }
}

void StreamEngine::stream_thread(std::uint32_t s) {
  tlm_utils::tlm_quantumkeeper qk;
  qk.set_global_quantum(sc_core::sc_time(static_cast<double>(svc_.config->quantum_ns), sc_core::SC_NS));
  qk.reset();
  StreamState& st = streams_[s];
  for (;;) {
    while (st.head == st.tail) {
      // Catch up with the local time first, then re-check: a doorbell rung while syncing counts.
      if (qk.get_local_time() != sc_core::SC_ZERO_TIME) {
        qk.sync();
        continue;
      }
      sc_core::wait(doorbell_[s]);
    }
    // Fetch the descriptor at head (64 B through the HBM model), then execute it.
    spec::TaskDescriptor task;
    std::span<std::byte> raw(reinterpret_cast<std::byte*>(&task), sizeof task);
    const std::uint64_t addr = st.ring + std::uint64_t{st.head} * sizeof(spec::TaskDescriptor);
    st.busy = true;
    const sc_core::sc_time fetch = qk.get_current_time();
    svc_.hbm->read(addr, raw, qk, HbmClient::Stream);
    st.head = (st.head + 1) % st.entries;
    qk.inc(sc_core::sc_time(static_cast<double>(svc_.config->task_dispatch_ns), sc_core::SC_NS));
    if (svc_.perf && svc_.perf->launch_delay_ps) qk.inc(ChipClock::from_ps(svc_.perf->launch_delay_ps));
    const sc_core::sc_time start = qk.get_current_time();
    try {
      run_task(s, task, qk);
    } catch (...) {  // e.g. a kernel's data-dependent error: the run stops, the host rethrows it
      if (!error_) error_ = std::current_exception();
      sc_core::sc_stop();
      return;
    }
    if ((task.kind == spec::TaskKind::Kernel || task.kind == spec::TaskKind::Collective) &&
        fault_wanted(svc_.faults, kFaultFloatStatus))
      float_status_fault(s, task, qk);
    if (task.flags & spec::kTaskFlagStatusRecord) status_record(s, task, qk);
    const sc_core::sc_time end = qk.get_current_time();
    count_task(s, task, fetch, start, end);
    trace_task(s, task, start, end);
    ++st.completed;
    st.busy = false;
    if (task.flags & spec::kTaskFlagNotify) svc_.irq->raise(spec::kIrqStreamDone, end);
    if (st.halted) {
      svc_.irq->raise(spec::kIrqBreakpoint, end);
      qk.sync();
      progress_.notify(sc_core::SC_ZERO_TIME);
      while (st.halted) sc_core::wait(resume_[s]);
      qk.reset();
    } else {
      // Completion becomes visible to the host at the task's end time.
      qk.sync();
      progress_.notify(sc_core::SC_ZERO_TIME);
    }
  }
}

void StreamEngine::run_task(std::uint32_t s, const spec::TaskDescriptor& task, tlm_utils::tlm_quantumkeeper& qk) {
  const ChipModes& modes = *svc_.modes;
  auto make_ctx = [&](std::span<const std::uint32_t> cores) {
    return TaskContext{task, s, cores, modes.fp_mode, task.step, qk, svc_, capture_dma_.get()};
  };
  if (task.kind == spec::TaskKind::Barrier || (task.flags & spec::kTaskFlagWaitCaptures)) wait_captures(s, qk);
  if (task.kind == spec::TaskKind::Capture && (task.flags & spec::kTaskFlagAsync)) {
    capture_dma_->enqueue(s, task, qk.get_current_time());
    return;
  }
  switch (task.kind) {
    case spec::TaskKind::Kernel: {
      if (!executor_)
        throw std::runtime_error(fmt::format("{}: kernel task {} but the chip has no core executor", name(),
                                             task.task_id));
      const auto cores = sched_.acquire(task.core_mask, false, qk);
      TaskContext ctx = make_ctx(cores);
      executor_->execute(ctx);
      qk.sync();
      sched_.release(cores);
      break;
    }
    case spec::TaskKind::Capture:
    case spec::TaskKind::Breakpoint: {
      const auto cores = sched_.acquire(task.core_mask, true, qk);
      TaskContext ctx = make_ctx(cores);
      bool halt = false;
      if (task.kind == spec::TaskKind::Capture)
        run_capture_task(ctx);
      else
        halt = run_breakpoint_task(ctx);
      qk.sync();
      sched_.release(cores);
      if (halt) {
        streams_[s].halted = true;
        streams_[s].halt_task = task.task_id;
      }
      break;
    }
    case spec::TaskKind::EventRecord:
      qk.sync();  // the record becomes visible at the stream's time
      ++events_[task.event_id];
      event_recorded_.notify(sc_core::SC_ZERO_TIME);
      break;
    case spec::TaskKind::EventWait:
      qk.sync();
      while (event_count(task.event_id) == 0) sc_core::wait(event_recorded_);
      qk.reset();
      --events_[task.event_id];
      break;
    case spec::TaskKind::Barrier: break;
    case spec::TaskKind::FloatStatusGet: {
      // Every earlier task of this stream has completed; the status is the device's (all streams).
      if (task.args_size != sizeof(spec::FloatStatusBuffer))
        throw std::runtime_error(fmt::format("{}: float status task {} needs a {}-byte buffer, got {} bytes", name(),
                                             task.task_id, sizeof(spec::FloatStatusBuffer), task.args_size));
      qk.sync();
      const spec::FloatStatusBuffer b = svc_.detection->status_buffer(svc_.clock.cycle_at(qk.get_current_time()));
      svc_.hbm->write(task.args_addr, std::as_bytes(std::span(&b, 1)), qk, HbmClient::Stream);
      break;
    }
    case spec::TaskKind::FloatStatusReset:
      qk.sync();
      svc_.detection->reset_status(svc_.clock.cycle_at(qk.get_current_time()), s);
      break;
    case spec::TaskKind::Collective: {
      if (!collectives_)
        throw std::runtime_error(fmt::format("{}: collective task {} but no collective handler is attached", name(),
                                             task.task_id));
      TaskContext ctx = make_ctx({});
      collectives_->run(ctx);
      svc_.irq->raise(spec::kIrqCollective, qk.get_current_time());
      break;
    }
    default:
      throw std::runtime_error(fmt::format("{}: task {} has unknown kind {}", name(), task.task_id,
                                           static_cast<unsigned>(task.kind)));
  }
}

void StreamEngine::float_status_fault(std::uint32_t s, const spec::TaskDescriptor& task,
                                      tlm_utils::tlm_quantumkeeper& qk) {
  const std::uint64_t cycle = svc_.clock.cycle_at(qk.get_current_time());
  const FaultSite site{svc_.rank, task.step, task.op_id, task.task_id, 0, s, cycle};
  FloatStatusFault f;
  svc_.faults->on_float_status(site, svc_.detection->float_status(), f);
  if (f.raise) svc_.detection->raise_status(f.raise);
  if (f.reset) svc_.detection->reset_status(cycle, spec::kResetByOther);
}

void StreamEngine::status_record(std::uint32_t s, const spec::TaskDescriptor& task, tlm_utils::tlm_quantumkeeper& qk) {
  const spec::StepStatus st = svc_.detection->take_step_status();
  spec::CaptureRecordHeader h;
  h.op_id = task.op_id;
  h.task_id = task.task_id;
  h.step = task.step;
  h.payload = spec::CapturePayload::StepStatus;
  const FaultSite site{svc_.rank, task.step, task.op_id, task.task_id, 0, s, svc_.clock.cycle_at(qk.get_current_time())};
  svc_.capture->produce(h, std::as_bytes(std::span(&st, 1)), qk, site);
}

void StreamEngine::count_task(std::uint32_t s, const spec::TaskDescriptor& task, const sc_core::sc_time& fetch,
                              const sc_core::sc_time& start, const sc_core::sc_time& end) {
  if (task_sink_)
    task_sink_({task.kind, task.op_id, task.task_id, task.step, s, svc_.clock.cycle_at(fetch), svc_.clock.cycle_at(start),
                svc_.clock.cycle_at(end), ChipClock::to_ps(end - start)});
  if (!svc_.pmu) return;
  const std::uint64_t end_ps = ChipClock::to_ps(end), now_ps = ChipClock::to_ps(sc_core::sc_time_stamp());
  svc_.pmu->add(ChipClock::to_ps(start), spec::kPmuDispatch, svc_.clock.ps_to_cycles(ChipClock::to_ps(start - fetch)),
                now_ps);
  const std::uint64_t dur = svc_.clock.ps_to_cycles(ChipClock::to_ps(end - start));
  if (task.kind == spec::TaskKind::Collective) {
    PerfMonitor::Counters d{};
    d[spec::kPmuCollectiveOps] = 1;
    d[spec::kPmuCollectiveCycles] = dur;
    svc_.pmu->add(end_ps, d, now_ps);
  } else if (task.kind == spec::TaskKind::EventWait) {
    svc_.pmu->add(end_ps, spec::kPmuEventWait, dur, now_ps);
  }
}

void StreamEngine::trace_task(std::uint32_t s, const spec::TaskDescriptor& task, const sc_core::sc_time& start,
                              const sc_core::sc_time& end) const {
  if (!svc_.trace->enabled()) return;
  svc_.trace->complete(svc_.rank, fmt::format("stream{}", s), kind_name(task.kind), "task", ChipClock::to_ps(start),
                       ChipClock::to_ps(end - start),
                       {{"task_id", std::uint64_t{task.task_id}}, {"op_id", std::uint64_t{task.op_id}}});
}

}  // namespace probelab::chip
