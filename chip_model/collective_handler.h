// Interface through which a chip's stream engine runs Collective tasks. The multi-chip
// collectives implement it and are attached with Chip::set_collective_handler(); a chip without
// a handler fails a Collective task with an error.
#pragma once

#include "chip_model/core_interface.h"

namespace probelab::chip {

class CollectiveHandler {
 public:
  virtual ~CollectiveHandler() = default;
  /// Runs this chip's part (rank ctx.chip.rank) of the collective in ctx.task (kind Collective,
  /// arguments at ctx.task.args_addr). Called from the stream's SC_THREAD; same timing contract
  /// as CoreExecutor::execute (advance ctx.qk, may sync and wait for peers). Returns when the
  /// collective is complete on this chip; the stream engine then raises kIrqCollective and
  /// continues with the next task. Throws std::runtime_error on bad arguments.
  virtual void run(TaskContext& ctx) = 0;
};

}  // namespace probelab::chip
