// Graph rewrites of the workload's collectives for the cluster the job runs on.
//
// Hierarchical AllReduce (algorithm: hierarchical), as HCCL and NCCL run it across servers:
//   <op>/intra_rs  ReduceScatter(sum) over the ranks of the server (ring over HCCS)
//   <op>/inter     AllReduce over the ranks with the same chip index in every server (one ring,
//                  tree or direct per chip index, each on its own NIC: a ring of rings), with the
//                  op's reduction (a mean divides by the job's rank count) and order
//   <op>/intra_ag  AllGather over the ranks of the server
// A tensor whose leading dim is not a multiple of the chips per server is flattened and padded
// with zeros first (<op>/flat, <op>/pad) and cut back after (<op>/unpad, <op>/shape). The stages
// are ordinary graph ops: sync probes, the consistency check and injectors see each of them; the
// all-gather's output is compared over every rank (replicas: world), the inter-server result over
// its communicator. A job on one server (or servers of one chip) gets a plain AllReduce.
#pragma once

#include <cstdint>

#include "graph/graph.h"

namespace probelab::sim {

/// Returns `g` with every hierarchical AllReduce lowered for `ranks` chips in servers of
/// `chips_per_server`. Throws graph::GraphError naming the op on a shape it cannot lower.
graph::Graph lower_hierarchical(const graph::Graph& g, std::uint32_t ranks, std::uint32_t chips_per_server);

/// Flattened length of a tensor of `numel` elements padded to a multiple of `parts`.
std::int64_t padded_length(std::int64_t numel, std::int64_t parts);

}  // namespace probelab::sim
