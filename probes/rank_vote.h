// A host decision every rank of a job must take together, as frameworks agree on one (a stop
// flag all-reduced before the next step, found_inf before the optimizer step): each rank's
// flag is written to the device and summed over the world by an AllReduce task, then read
// back. Through Device only.
#pragma once

#include <cstdint>
#include <functional>

#include "probes/device.h"

namespace probelab::probes {

class RankVote {
 public:
  /// `next_task_id` hands out task ids unique on the device (the graph engine's counter).
  RankVote(Device& dev, std::uint32_t stream, std::function<std::uint32_t()> next_task_id);

  /// The sum of every rank's `mine` at `step`: every rank of the world must call it the same
  /// number of times (the AllReduce waits for all); synchronises the stream.
  float sum(float mine, std::uint32_t step);
  /// Whether any rank voted yes (sum of 1s and 0s above 0).
  bool any(bool mine, std::uint32_t step) { return sum(mine ? 1.0f : 0.0f, step) > 0.0f; }

 private:
  Device& dev_;
  std::uint32_t stream_;
  std::function<std::uint32_t()> next_id_;
  std::uint64_t flag_ = 0;       // [0, 64): this rank's flag (F32 x 16); [64, 128): the sums
  std::uint64_t args_ = 0;       // the AllReduce's argument block
  std::uint32_t args_size_ = 0;
};

}  // namespace probelab::probes
