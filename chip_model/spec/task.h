// Task descriptors: what the host writes into a stream's ring in HBM (64 bytes each, little
// endian). Operands and attributes of a kernel live in an argument block in HBM, as CANN kernels
// take a tiling/args pointer; its encoding is in kernel_args.h.
#pragma once

#include <cstdint>
#include <type_traits>

namespace probelab::spec {

enum class TaskKind : std::uint16_t {
  Kernel = 1,        // run a device kernel (Cube or Vector) on the args block
  Capture = 2,       // debug capture of a tensor into the capture unit (args: CaptureArgs)
  Breakpoint = 3,    // evaluate a condition on statistics and halt the stream if it holds
  EventRecord = 4,   // signal event `event_id` when everything before it on the stream completed
  EventWait = 5,     // wait until event `event_id` was recorded
  Collective = 6,    // a collective over the chips of the job (args: CollectiveArgs)
  Barrier = 7,       // completes when all earlier tasks on the stream completed
  FloatStatusGet = 8,    // write the device's float status into a 64-byte buffer (float_status.h)
  FloatStatusReset = 9,  // clear the device's float status (float_status.h)
};

enum TaskFlags : std::uint16_t {
  kTaskFlagNotify = 1u << 0,  // raise kIrqStreamDone on completion
  kTaskFlagCheckExceptions = 1u << 1,  // detection circuits armed for this task (default on)
  /// After the task completes, the stream engine writes a StepStatus capture record
  /// (capture_record.h) with the float status bits raised since the previous such record (the
  /// register kRegFloatStatus is left alone): a step-end marker that gives the host per-step
  /// float status without a register round trip.
  kTaskFlagStatusRecord = 1u << 2,
  /// Capture tasks with a FullTensor payload: handed to the capture DMA engine (capture_dma.h);
  /// the stream goes on once the job is queued (dispatch cost only).
  kTaskFlagAsync = 1u << 3,
  /// The task waits until the stream's asynchronous captures are done before it starts (set on
  /// tasks that overwrite a tensor an earlier capture may still be reading; Barrier always waits).
  kTaskFlagWaitCaptures = 1u << 4,
};

struct TaskDescriptor {
  std::uint32_t task_id = 0;    // host-assigned, unique per chip and run
  std::uint32_t op_id = 0;      // id of the graph op (in the executed snapshot); probes map it back
  TaskKind kind = TaskKind::Kernel;
  std::uint16_t flags = kTaskFlagCheckExceptions;
  std::uint32_t kernel = 0;     // KernelId for Kernel tasks
  std::uint64_t args_addr = 0;  // HBM address of the argument block
  std::uint32_t args_size = 0;  // bytes
  std::uint32_t event_id = 0;   // EventRecord / EventWait
  std::uint32_t step = 0;       // training step, stamped on latches and captures
  std::uint32_t core_mask = 0;  // 0: scheduler chooses
  /// Kernel tasks: in-kernel statistics. Bit i of stats_outputs: the kernel computes the
  /// statistics (capture_math.h) of output i on the Vector unit while each output tile is in the
  /// UB before its store, merges the per-core partials and emits one Statistics capture record;
  /// bit i of stats_inputs: the same for input i as loaded. No separate Capture task is needed.
  std::uint16_t stats_outputs = 0;
  std::uint16_t stats_inputs = 0;
  /// Kernel tasks: bit i -> when the kernel completes, it queues a full-tensor capture of output
  /// i on the capture DMA engine (as a kTaskFlagAsync Capture task would, without its dispatch).
  std::uint16_t dump_outputs = 0;
  std::uint8_t reserved[18] = {};
};
static_assert(sizeof(TaskDescriptor) == 64);

/// Calls f(i) for every set bit i of a 16-bit tensor mask (stats_*, dump_outputs), lowest first.
template <class F>
void for_each_bit(std::uint16_t mask, F f) {
  for (std::uint16_t i = 0; i < 16; ++i)
    if (mask & (1u << i)) f(i);
}
static_assert(std::is_trivially_copyable_v<TaskDescriptor>);

}  // namespace probelab::spec
