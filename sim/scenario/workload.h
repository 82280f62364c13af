// From a scenario and a loaded model to the graphs a run executes.
//
//   reference  the model in FP32, plus the loss in training: what the CPU reference computes
//   original   the device graph: the dtype policy applied (sim/scenario/scenario.h, PrecisionPolicy), and in
//              training the backward ops (graph/autodiff.h), one gradient AllReduce per parameter
//              when ranks > 1 (named "<param>/gradient/allreduce", writing
//              "<param>/gradient/reduced"; with training.allreduce.bucket_mb > 0 one per bucket of
//              gradients, sim/scenario/gradient_buckets.h; hierarchical ones lowered into their stages,
//              sim/scenario/collective_lowering.h), and the optimizer ops
//   zero1      training.sharding: zero1 (ZeRO stage 1) instead: per parameter P of N elements,
//              "P/gradient/reducescatter" (ReduceScatter, mean) of the flattened gradient padded
//              to a multiple of the ranks gives each rank its shard "P/shard/gradient"; the
//              optimizer updates that rank's shard "P/shard" of the parameter (its state is a
//              shard too), "P/allgather" (AllGather) collects the updated shards and
//              "P/unshard" (Slice/Reshape) writes "P/updated"; `shards` says which block of P
//              each rank's "P/shard" starts from
//   tensor     parallel.tensor: each selected MatMul Y = A @ W with a weight W [K, N] becomes
//              column-parallel over the R ranks (Megatron-style): rank r holds "W/tp", columns
//              [r N/R, (r+1) N/R) of W, computes "Y/tp" = A @ W/tp, and "<op>/tp_gather" (an
//              AllGather between two Transposes) rebuilds Y on every rank. Every rank gets the
//              same data. Training as Megatron does it: the gather's gradient is each rank's
//              block of dY (its grad_reduction is mean: every rank's dY is the same), so a
//              shard's gradient is its block of the single device's; the input gradient of a
//              split MatMul, a part on each rank, is summed by "<op>/grad/a/tp_reduce" (AllReduce),
//              so every op before the split and every replicated weight's gradient get the
//              single device's values, the same on every rank, and no gradient all-reduce
//   master     precision.master_weights: fp32 with a 16-bit compute dtype (mixed precision with FP32
//              master weights): per parameter P (or ZeRO-1 / tensor-parallel shard P) an FP32
//              State initializer "P/master" holding the FP32 value P was rounded from (each rank's
//              block for a shard); "P/gradient/fp32" (Cast) converts P's gradient to FP32 and, when
//              the loss is the output of a forward Scale op (static loss scaling, e.g.
//              mlp_loss_scaled), "P/gradient/unscaled" (Scale 1/scale) divides the scale out in
//              FP32 — the learning rate is then the unscaled one; the optimizer op
//              "P/master/update" updates "P/master" (its state "P/master/velocity",
//              "P/master/adam_m", "P/master/adam_v" is FP32 too) and "P/update" (Cast) writes
//              "P/updated", in place of P, in the compute dtype. Every one of these is an op of the
//              device graph (flags, probes, injections, checkpoints see them); a ZeRO-1 job keeps
//              only the master shards and all-gathers the FP16 "P/shard/updated"
//   snapshots  original / optimized / fused (graph/snapshot.h); the executor runs `fused`
//
// The loss of a training scenario is added to the model's first output: cross_entropy adds an
// int32 input "labels" ([N] or [N, d...]) and op "loss" (SoftmaxCrossEntropyLoss, mean); mse adds
// an input "target" shaped like the prediction and op "loss" (MSELoss, mean); `model` uses the
// model's first output, which must be a scalar float tensor, as the loss.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/init.h"
#include "chip_model/collective/cluster_config.h"
#include "graph/snapshot.h"
#include "sim/scenario/scenario.h"

namespace probelab::sim {

/// An initializer whose value differs per rank: block `rank` of initializer `source` (or of
/// `value` when set), split into `parts` along `axis` (-1: flattened and zero-padded to a
/// multiple of `parts`), in the dtype of the sharded tensor.
struct ShardSpec {
  std::string source;
  std::int64_t axis = -1;
  std::int64_t parts = 1;
  std::shared_ptr<const graph::Tensor> value;
};

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
  /// Initializers whose value is each rank's block of another (ZeRO and tensor-parallel shards).
  std::map<std::string, ShardSpec> shards;
  /// Tensor parallelism: every rank is fed the same data (rank 0's).
  bool replicated_data = false;
  /// Initializers whose finite FP32 values beyond the compute dtype's range saturated to its
  /// largest finite value when the precision policy converted them: name -> element count.
  std::vector<std::pair<std::string, std::uint64_t>> saturated_constants;
};

/// Throws ScenarioError (a batch that does not fit the model, a model without outputs, a
/// policy that needs an op the registry lacks) or graph::GraphError.
Workload build_workload(const Scenario& s, const graph::Graph& model,
                        const std::map<std::string, graph::InitSpec>& input_inits = {},
                        const chip::ClusterConfig& cluster = {});

/// The value of rank `rank`'s copy of sharded initializer `tensor` of `g` (Workload::shards).
graph::Tensor shard_value(const graph::Graph& g, const std::string& tensor, const ShardSpec& spec, std::uint32_t rank);

}  // namespace probelab::sim
