// Executes a CollectivePlan on real values with the numerics layer. Pure C++, no SystemC,
// deterministic: the same plan and inputs give the same bits and flags.
//
// Semantics of one ReductionExpr evaluated over a range of elements:
//  - a Leaf is the contributor's input elements in the data dtype;
//  - an Add on position p first converts each operand to p's accumulation dtype (FP32 <- FP16/BF16
//    is exact; narrowing rounds to nearest even, with flags), then adds elementwise in that dtype:
//    FP16/BF16 accumulation rounds after every addition, FP32 accumulation keeps FP32 partials;
//  - the result is divided by N in its dtype for ReduceOp::Mean, then converted to the data dtype
//    on position `final_at` (with FP32 accumulation this is the one rounding at the end);
//  - a single-Leaf expression (gathers, broadcasts, groups of one) copies bits unchanged.
// Flags of every conversion and addition go to the position that performs it, with the element
// index in the reduced input buffer (= the output index for AllReduce) of the first offender.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "chip_model/collective/collective_plan.h"
#include "numerics/bulk.h"
#include "numerics/mode.h"

namespace probelab::chip {

struct CollectiveOutcome {
  std::vector<std::vector<std::byte>> outputs;  // per position: output_count() elements, data dtype
  std::vector<num::BulkReport> reports;         // per position: flags raised by work done there
  num::Flags flags() const;                     // union over positions
};

/// `inputs[pos]`: that position's input, input_count() elements of the data dtype (bytes, any
/// alignment). `modes`: one per position, or a single mode for all. Throws std::invalid_argument
/// on size mismatches.
CollectiveOutcome execute_plan(const CollectivePlan& plan,
                               const std::vector<std::span<const std::byte>>& inputs,
                               const std::vector<num::Mode>& modes = {num::Mode{}});

}  // namespace probelab::chip
