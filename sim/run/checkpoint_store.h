// Step checkpoints of a run on disk (the scenario's `checkpoints: {every: N}`): what the executor
// read back from HBM at the start of step K — every initializer of the executed graph (weights,
// optimizer state, master weights, constants). Together with the step index (data feeds, per-step
// op arguments and injections are functions of the seed and the step) this is the whole state a
// resumed run needs to repeat steps K.. bit for bit (`probelab replay`, sim/run/replay.h).
//
// Layout: <run>/checkpoints/rank<r>/step<K>/<tensor>.npy (names as sanitize_name) and
//         <run>/checkpoints/rank<r>/step<K>/checkpoint.json {step, rank, bytes, tensors: [{name, file}]}
//         (written last, atomically: a step directory with a checkpoint.json is complete).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "graph/tensor.h"
#include "sim/scenario/scenario.h"

namespace probelab::sim {

void write_checkpoint(const std::filesystem::path& root, std::uint32_t rank, std::uint32_t step,
                      const std::map<std::string, graph::Tensor>& state);

/// Reads checkpoint `step` of `rank`; throws ScenarioError naming the directory and the steps that
/// exist when it is missing or incomplete.
std::map<std::string, graph::Tensor> read_checkpoint(const std::filesystem::path& root, std::uint32_t rank,
                                                     std::uint32_t step);

/// Throws what read_checkpoint throws for a missing or incomplete checkpoint, reading no tensor.
void require_checkpoint(const std::filesystem::path& root, std::uint32_t rank, std::uint32_t step);

/// The scenario a run's checkpoints belong to, as resolved (after --set and --seed):
/// <root>/scenario.yaml plus <root>/run.json {file, seed} (the file anchors relative model paths).
void write_checkpoint_scenario(const std::filesystem::path& root, const Scenario& s);
/// Loads it back with `sets` applied on top; throws ScenarioError when the run has no checkpoints.
Scenario read_checkpoint_scenario(const std::filesystem::path& root, const LoadOptions& opts);

/// Steps with a complete checkpoint of `rank`, ascending.
std::vector<std::uint32_t> checkpoint_steps(const std::filesystem::path& root, std::uint32_t rank);

}  // namespace probelab::sim
