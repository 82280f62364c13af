// Whether a resumed run's checkpoint fits the scenario it resumes (`probelab replay --set ...`
// may change the model, the dims or the optimizer): every checkpointed tensor must be an
// initializer of the executed graph with the same shape, and a non-float tensor the same dtype.
#pragma once

#include "sim/scenario/prepared_run.h"

namespace probelab::sim {

/// Nothing for a run without `scenario.resume`. Otherwise reads the checkpoint of every rank and
/// throws ScenarioError (bad input) naming the checkpoint directory, the tensor and what differs.
void check_resume_fits(const PreparedRun& run);

}  // namespace probelab::sim
