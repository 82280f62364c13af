// Graph op types of data-parallel collectives (AllReduce, ReduceScatter, AllGather, Broadcast)
// as the host executor compiles them into TaskKind::Collective tasks. Registered in
// graph::OpRegistry by ensure_collective_ops_registered() unless a type of that name exists.
//
// Attributes (all optional):
//   reduction  "sum" | "mean"            (AllReduce, ReduceScatter; default "mean")
//   algorithm  "ring" | "tree" | "direct"  (default "ring")
//   accumulation "fp32" | "fp16"        accumulator of the reduction (default "fp32")
//   order      "arrival" | "group"       Direct only: order each rank adds contributions
//   comm       int                       communicator id (default 0: every rank of the job)
//   root       int                       Broadcast root (default 0)
// The ops have no CPU reference kernel: on one rank's data they are not defined (the result
// depends on every rank), so reference comparisons skip them and cross-rank checks cover them.
// Shapes: AllReduce/Broadcast keep the input desc; ReduceScatter/AllGather need the `ranks`
// attribute (group size) and divide/multiply the leading dimension.
#pragma once

#include <string>
#include <vector>

namespace probelab::sim {

void ensure_collective_ops_registered();

/// Attribute values accepted by the collective ops.
const std::vector<std::string>& collective_algorithms();

}  // namespace probelab::sim
