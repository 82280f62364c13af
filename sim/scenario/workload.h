// From a scenario and a loaded model to the graphs a run executes.
//
//   reference  the model in FP32, plus the loss in training: what the CPU reference computes
//   original   the device graph: the dtype policy applied (sim/scenario/scenario.h, PrecisionPolicy), and in
//              training the backward ops (graph/autodiff.h), one gradient AllReduce per parameter
//              when ranks > 1 (named "<param>/gradient/allreduce", writing
//              "<param>/gradient/reduced"), and the optimizer ops
//   snapshots  original / optimized / fused (graph/snapshot.h); the executor runs `fused`
//
// The loss of a training scenario is added to the model's first output: cross_entropy adds an
// int32 input "labels" ([N] or [N, d...]) and op "loss" (SoftmaxCrossEntropyLoss, mean); mse adds
// an input "target" shaped like the prediction and op "loss" (MSELoss, mean); `model` uses the
// model's first output, which must be a scalar float tensor, as the loss.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/init.h"
#include "graph/snapshot.h"
#include "sim/scenario/scenario.h"

namespace probelab::sim {

struct Workload {
  graph::Graph reference;
  graph::Graph original;
  graph::SnapshotSet snapshots;
  std::string loss;                     // training: the loss tensor
  std::string labels;                   // cross_entropy: the labels input
  std::string target;                   // mse: the target input
  std::int64_t classes = 0;             // cross_entropy: number of classes
  std::vector<std::string> data_inputs; // graph inputs the data generator feeds (name order)
  std::vector<std::string> collectives; // collective op names of the original graph
  /// How each data input is generated: the model file's `init` of the input when it has one
  /// (e.g. randint(0, 10) labels), labels added for the loss get randint(0, classes); float inputs
  /// without one use the scenario's `data` generator.
  std::map<std::string, graph::InitSpec> input_inits;
};

/// Throws ScenarioError (a batch that does not fit the model, a model without outputs, a
/// policy that needs an op the registry lacks) or graph::GraphError.
Workload build_workload(const Scenario& s, const graph::Graph& model,
                        const std::map<std::string, graph::InitSpec>& input_inits = {});

}  // namespace probelab::sim
