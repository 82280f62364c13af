// report.json's `loss_scaling` section: what each rank's dynamic loss scaler read from the
// device's float status and decided, step by step, and whether the ranks' parameters still agree
// (a skip on one rank and not on another leaves them apart for good).
//
//   loss_scaling: {scale_op, guard, all_reduce,
//                  steps: [{rank, step, scale, found_inf, skipped, status: [flag names],
//                           local_overflow, recovered, foreign_resets, reduced, next_scale}],
//                  param_digests: ["<16 hex digits>" per rank], ranks_agree: bool,
//                  decisions_agree: bool (every step skipped on all ranks or on none)}
#pragma once

#include <nlohmann/json.hpp>

#include "sim/platform/executor.h"
#include "sim/scenario/scenario.h"

namespace probelab::sim {

/// One rank's part (null without loss scaling): {steps: [...], param_digest}.
nlohmann::json loss_scale_json(const ExecutorResult& er, bool enabled);
/// The section from every rank's part (rank order).
nlohmann::json loss_scaling_section(const nlohmann::json& per_rank, const LossScalingSpec& spec);

}  // namespace probelab::sim
