// What the stream engine hands to the units that execute tasks: the AI cores (CoreExecutor,
// Kernel tasks) and the collectives (CollectiveHandler, collective_handler.h).
//
// Timing contract: execute()/run() are called from the SC_THREAD of the task's stream, with that
// stream's quantum keeper in ctx.qk (local time = the task's start after dispatch). They charge
// time by advancing ctx.qk (e.g. Hbm::read(..., ctx.qk, ...), qk.inc(...)), may qk.sync() and
// wait() on events, and return when the task is complete at ctx.qk.get_current_time(). Time is
// charged per tile/block/transaction, never per element or per cycle.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <systemc>
#include <tlm_utils/tlm_quantumkeeper.h>

#include "chip_model/chip_config.h"
#include "chip_model/clock.h"
#include "chip_model/detection_circuit.h"
#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/spec/task.h"

namespace probelab::chip {

class Hbm;
class L2Cache;
class CaptureUnit;
class CaptureDma;
class InterruptController;
class Trace;
class PerfMonitor;
namespace kernels {
class PreparedOpPool;
}

/// Mode registers of a chip, owned by the Chip (kRegFpMode, kRegStep).
struct ChipModes {
  std::uint32_t fp_mode = 0;  // spec::FpModeBits
  std::uint32_t step = 0;
};

/// The shared units of one chip. All pointers are non-null except `faults` (nullptr = no faults).
struct ChipServices {
  const ChipConfig* config = nullptr;
  ChipClock clock;
  std::uint32_t rank = 0;
  Hbm* hbm = nullptr;
  L2Cache* l2 = nullptr;      // the shared L2 (ChipConfig::l2_model == "shared"), else null
  DetectionCircuit* detection = nullptr;
  CaptureUnit* capture = nullptr;
  InterruptController* irq = nullptr;
  Trace* trace = nullptr;     // always set; test trace->enabled() before recording
  FaultHooks* faults = nullptr;
  const ChipModes* modes = nullptr;
  PerfMonitor* pmu = nullptr;  // nullptr: no PMU (unit tests of single modules)
  const PerfFaults* perf = nullptr;  // the chip's performance faults (set before the simulation runs); nullptr: none
  kernels::PreparedOpPool* ops = nullptr;  // prepared ops shared with the other chips; nullptr: the AI core's own
};

/// One task being executed.
struct TaskContext {
  const spec::TaskDescriptor& task;
  std::uint32_t stream;
  std::span<const std::uint32_t> cores;  // cores granted to this task, ascending (Kernel tasks)
  std::uint32_t fp_mode;                 // kRegFpMode when the task was dispatched
  std::uint32_t step;                    // task.step (the host keeps it equal to kRegStep)
  tlm_utils::tlm_quantumkeeper& qk;
  const ChipServices& chip;
  CaptureDma* capture_dma = nullptr;     // the stream's capture DMA engine (kernel output dumps)

  sc_core::sc_time now() const { return qk.get_current_time(); }
  std::uint64_t cycle() const { return chip.clock.cycle_at(now()); }
  bool checks_armed() const { return (task.flags & spec::kTaskFlagCheckExceptions) != 0; }
  bool saturation() const { return (fp_mode & spec::kFpModeSaturation) != 0; }
  bool flush_denormals() const { return (fp_mode & spec::kFpModeFlushDenormals) != 0; }

  /// Fault site of this task on `core` at the current local time.
  FaultSite site(std::uint32_t core) const {
    return FaultSite{chip.rank, step, task.op_id, task.task_id, core, stream, cycle()};
  }
  /// A detection event with the ids of this task filled in (caller adds flags and hits).
  DetectionEvent detection_event(std::uint32_t core) const {
    DetectionEvent ev;
    ev.op_id = task.op_id;
    ev.task_id = task.task_id;
    ev.core = core;
    ev.stream = stream;
    ev.step = step;
    ev.armed = checks_armed();
    return ev;
  }
  /// Trace track name of a core pipe: "core3.cube".
  static std::string core_track(std::uint32_t core, const char* pipe) {
    return "core" + std::to_string(core) + "." + pipe;
  }
};

/// Executes Kernel tasks (the AI cores). Implemented by the AI core model.
class CoreExecutor {
 public:
  virtual ~CoreExecutor() = default;
  /// Runs `ctx.task` (kind Kernel, kernel id ctx.task.kernel, arguments at ctx.task.args_addr)
  /// on the cores ctx.cores, distributing its tiles over them. Reads operands and writes results
  /// in HBM through the timed Hbm API, reports flags to the detection circuit, calls the fault
  /// hooks at their sites. Throws std::runtime_error for an unknown kernel or bad arguments.
  virtual void execute(TaskContext& ctx) = 0;
};

/// Builds the executor of one chip during elaboration (it may create SystemC modules; `name`
/// is the hierarchical name to use for them). sim/ passes the AI core model's factory to Chip.
using CoreFactory =
    std::function<std::unique_ptr<CoreExecutor>(const char* name, const ChipServices& services)>;

}  // namespace probelab::chip
