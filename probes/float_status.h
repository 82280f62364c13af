// The float-overflow status read the way a CANN integration reads it (aclrtResetOverflowStatus /
// aclrtGetOverflowStatus, chip_model/spec/float_status.h): a reset task on the stream before the
// work, a status task writing the 64-byte record into a device buffer after it, a stream
// synchronisation, then a DMA copy of the record to the host. Through Device only.
//
// The status is the device's, not the stream's: any reset in between — another runtime in the
// process, a library that clears it after its own check — erases an overflow before it is read.
// Two options address the known pitfalls:
//  - guard: a status task right before the client's own reset records the device's reset and
//    overflow-event counters (which no reset clears); at the read, more resets than the client's
//    own mean another client reset the status, and a grown event counter means an overflow
//    happened in the interval although the status no longer shows it: found_inf is then true
//    and `recovered` says why.
//  - all_reduce: the host's found_inf (as 1.0f) is written to the device and summed over the
//    data-parallel ranks by an AllReduce task (as frameworks all-reduce found_inf), so every rank
//    takes the same skip / loss-scale decision; without it each rank decides on its own status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "chip_model/spec/float_status.h"
#include "probes/device.h"
#include "probes/rank_vote.h"

namespace probelab::probes {

struct FloatStatusOptions {
  std::uint32_t stream = 0;
  bool guard = false;
  bool all_reduce = false;
};

/// One read of the status (and of the decision drawn from it).
struct FloatStatusRead {
  spec::FloatStatusBuffer local;   // the record this rank's status task wrote
  std::uint32_t foreign_resets = 0;  // guard: resets by other clients since the client's own reset
  std::uint32_t events = 0;          // guard: overflow events in the interval (counter delta)
  bool local_overflow = false;       // local.overflow, or (guard) an overflow the status lost
  bool recovered = false;            // guard: found from the event counter, not the status
  bool reduced = false;              // the flag was all-reduced over the ranks
  float ranks_overflowing = 0;       // all_reduce: sum of the ranks' flags
  bool found_inf = false;            // the decision: local_overflow, or ranks_overflowing > 0
};

class FloatStatusClient {
 public:
  /// `next_task_id` hands out task ids unique on the device (the graph engine's counter).
  FloatStatusClient(Device& dev, FloatStatusOptions opt, std::function<std::uint32_t()> next_task_id);

  /// aclrtResetOverflowStatus on the stream (asynchronous; with guard, preceded by a status task
  /// that records the counters).
  void reset(std::uint32_t step);
  /// aclrtGetOverflowStatus into the device buffer (+ the all-reduce), synchronises the stream,
  /// copies the record back. Returns false in `ok` when the stream halted (then found_inf is
  /// decided from what was read).
  FloatStatusRead get(std::uint32_t step);

  const FloatStatusOptions& options() const { return opt_; }

 private:
  void submit(spec::TaskKind kind, std::uint32_t step, std::uint64_t args, std::uint32_t size);

  Device& dev_;
  FloatStatusOptions opt_;
  std::function<std::uint32_t()> next_id_;
  std::uint64_t buf_ = 0;         // [0, 64): record at the client's reset (guard); [64, 128): record at the read
  std::unique_ptr<RankVote> vote_;  // all_reduce: the ranks' flags summed
  std::uint32_t resets_issued_ = 0;
};

}  // namespace probelab::probes
