// Whether a resumed run's checkpoint fits the scenario it resumes (`probelab replay --set ...`
// may change the model, the dims or the optimizer): every checkpointed tensor must be an
// initializer of the executed graph with the same shape, and a non-float tensor the same dtype.
#pragma once

#include "sim/scenario/prepared_run.h"

namespace probelab::sim {

/// Nothing for a run without `scenario.resume`. Otherwise reads the checkpoint of every rank into
/// `run.resume_values` (the simulation starts from them) and throws ScenarioError (bad input)
/// naming the checkpoint directory, the tensor and what differs.
void check_resume_fits(PreparedRun& run);

}  // namespace probelab::sim
