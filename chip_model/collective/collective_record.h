// What one rank's part of a completed collective looked like: when it arrived, when its transfers
// were done and its output written, the flags its additions raised, the order it added the
// contributions in (Direct), and whether an injector's override applied. One record per rank and
// collective, O(1) except the Direct order; kept by the engines when the fabric is asked to (tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chip_model/spec/collective_args.h"
#include "graph/dtype.h"
#include "numerics/flags.h"

namespace probelab::chip {

struct CollectiveRecord {
  std::uint32_t comm_id = 0;
  std::uint32_t seq = 0;                 // index of this collective on its communicator
  spec::CollectiveOp op = spec::CollectiveOp::AllReduce;
  spec::CollectiveAlgo algo = spec::CollectiveAlgo::Ring;
  std::uint32_t rank = 0, position = 0, group_size = 1;
  std::uint32_t task_id = 0;
  graph::DType acc_dtype = graph::DType::F32;  // this rank's adder
  std::uint64_t arrival_ps = 0;          // joined (args and input read)
  std::uint64_t done_ps = 0;             // its transfers were done
  std::uint64_t finish_ps = 0;           // its output was written (the task completed)
  std::uint64_t recv_wait_ps = 0;        // time spent waiting for peers' data beyond its own readiness
  std::uint64_t bytes_sent = 0, messages_sent = 0;
  std::vector<std::uint32_t> order;      // Direct reductions: group positions in the order added
  num::Flags flags;                      // raised by work done on this rank
  bool overridden = false;               // an injector's CollectiveOverride applied
  std::uint64_t jitter_seed = 0;         // arrival jitter seed (0: none)

  std::string describe() const;
};

}  // namespace probelab::chip
