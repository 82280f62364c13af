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
};

enum TaskFlags : std::uint16_t {
  kTaskFlagNotify = 1u << 0,  // raise kIrqStreamDone on completion
  kTaskFlagCheckExceptions = 1u << 1,  // detection circuits armed for this task (default on)
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
  std::uint8_t reserved[24] = {};
};
static_assert(sizeof(TaskDescriptor) == 64);
static_assert(std::is_trivially_copyable_v<TaskDescriptor>);

}  // namespace probelab::spec
