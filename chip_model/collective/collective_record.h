// What one completed collective looked like: the plan that was executed (every addition and its
// order), when each rank arrived and finished, the orders the ranks saw, the flags each raised
// and which injector overrides applied. Kept by the fabric for the report and for tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chip_model/collective/collective_plan.h"
#include "numerics/flags.h"

namespace probelab::chip {

struct CollectiveRecord {
  std::uint32_t comm_id = 0;
  std::uint32_t seq = 0;                 // index of this collective on its communicator
  CollectivePlan plan;                   // as executed (Direct: with the orders used)
  // Per position (group order):
  std::vector<std::uint32_t> task_id;
  std::vector<std::uint64_t> arrival_ps;     // the rank joined (args and input read)
  std::vector<std::uint64_t> done_ps;        // its transfers were done
  std::vector<std::uint64_t> finish_ps;      // its output was written (the task completed)
  std::vector<std::vector<std::uint32_t>> arrival_order;  // contributions as they landed (positions)
  std::vector<num::Flags> flags;             // numerics flags raised by work done on that rank
  std::vector<std::uint8_t> overridden;      // 1: an injector's CollectiveOverride applied
  std::uint64_t jitter_seed = 0;             // seed used for arrival jitter (0: none)

  /// The plan's description plus per-rank times (ns) and flags.
  std::string describe() const;
};

}  // namespace probelab::chip
