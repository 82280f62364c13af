// Argument block of TaskKind::Collective tasks (fixed layout, little endian, in HBM).
//
// Every chip taking part in a collective gets its own task with its own CollectiveArgs; the
// blocks of one collective agree on everything except `input`/`output` addresses and
// `order_addr` (this chip's own reduction order). The group is a communicator of the cluster
// (`comm_kind`): every chip of the job, the chips of this chip's server, or the chips with this
// chip's index in every server (chip_model/collective/cluster_topology.h); group position order
// is rank order. Collectives are matched across chips by (communicator, comm_id, issue index):
// the k-th collective a chip issues on a communicator meets the k-th collective every other
// member issues on it.
//
// Counts follow NCCL/HCCL:
//   AllReduce      input `count` elements,           output `count` elements
//   ReduceScatter  input `count * N` elements,       output `count` elements (this rank's block)
//   AllGather      input `count` elements,           output `count * N` elements (group order)
//   Broadcast      input `count` elements (root only; others' input is ignored), output `count`
// where N is the group size. Block i of ReduceScatter/AllGather belongs to group position i.
//
// Reduction order is explicit data. Ring and tree fix the order of additions by their structure
// (documented in chip_model/collective/collective_plan.h) and give every rank identical bits. Direct lets
// every rank add the N contributions itself, in the order chosen by `order_mode`.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "chip_model/spec/kernel_args.h"  // TensorRef

namespace probelab::spec {

enum class CollectiveOp : std::uint8_t { AllReduce = 0, ReduceScatter = 1, AllGather = 2, Broadcast = 3 };

/// Sum adds; Mean adds, then divides the sum by N once, in the accumulation dtype.
enum class ReduceOp : std::uint8_t { Sum = 0, Mean = 1 };

/// Ring: reduce-scatter then all-gather around the group order, 2(N-1) steps of count/N.
/// Tree: binary-tree reduce to the root, then broadcast down the same tree, 2*ceil(log2 N) levels.
/// Direct: every rank sends its contribution to every other rank (N-1 transfers each) and every
/// rank reduces all N contributions itself.
enum class CollectiveAlgo : std::uint8_t { Ring = 0, Tree = 1, Direct = 2 };

/// How a rank orders the contributions it reduces under the Direct algorithm (ignored otherwise).
/// Arrival: the order in which contributions arrived, from the link timing model (own contribution
///          first, it is already local); ties broken by group position.
/// GroupOrder: group position order 0..N-1.
/// Explicit: the N uint32 chip ranks at HBM `order_addr`, a permutation of the group's ranks.
enum class OrderMode : std::uint8_t { Arrival = 0, GroupOrder = 1, Explicit = 2 };

/// The communicator of a collective (chip::CommKind): every chip of the job, the chips of this
/// chip's server, the chips with this chip's index in every server.
enum class CommKindCode : std::uint8_t { World = 0, Server = 1, Peers = 2 };

struct CollectiveArgs {
  TensorRef input;             // dtype F16, BF16 or F32 (graph::DType); ND layout
  TensorRef output;            // same dtype as input
  std::uint64_t count = 0;     // elements, see the table above
  std::uint8_t op = 0;         // CollectiveOp
  std::uint8_t reduction = 0;  // ReduceOp (AllReduce, ReduceScatter)
  std::uint8_t algorithm = 0;  // CollectiveAlgo
  std::uint8_t acc_dtype = 0;  // graph::DType of the accumulator: F32 (0, default) or F16.
                               // F16 rounds after every addition; F32 rounds to the data dtype once,
                               // after the last addition (a communication buffer in the data dtype
                               // between steps is modelled by choosing F16 accumulation).
  std::uint8_t order_mode = 0; // OrderMode (Direct only)
  std::uint8_t comm_kind = 0;  // CommKindCode
  std::uint8_t pad0[2] = {};
  std::uint32_t comm_id = 0;   // instance of the communicator (several may coexist); 0 by default
  std::uint32_t root = 0;      // group position of the root (Broadcast; tree root), < group size
  std::uint32_t num_ranks = 0; // expected group size N (checked against the cluster); 0: any
  std::uint32_t divisor = 0;   // ReduceOp::Mean divides by this; 0: the group size
  std::uint64_t order_addr = 0;  // OrderMode::Explicit: HBM address of N uint32 chip ranks
};
static_assert(std::is_trivially_copyable_v<CollectiveArgs>);
static_assert(sizeof(CollectiveArgs) == 2 * sizeof(TensorRef) + 40);

inline std::string_view collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::AllReduce: return "allreduce";
    case CollectiveOp::ReduceScatter: return "reducescatter";
    case CollectiveOp::AllGather: return "allgather";
    case CollectiveOp::Broadcast: return "broadcast";
  }
  return "?";
}

inline std::string_view collective_algo_name(CollectiveAlgo a) {
  switch (a) {
    case CollectiveAlgo::Ring: return "ring";
    case CollectiveAlgo::Tree: return "tree";
    case CollectiveAlgo::Direct: return "direct";
  }
  return "?";
}

inline std::string_view order_mode_name(OrderMode m) {
  switch (m) {
    case OrderMode::Arrival: return "arrival";
    case OrderMode::GroupOrder: return "group";
    case OrderMode::Explicit: return "explicit";
  }
  return "?";
}

/// Elements read from `input` on one rank, for group size n.
inline std::uint64_t collective_input_count(const CollectiveArgs& a, std::uint32_t n) {
  return static_cast<CollectiveOp>(a.op) == CollectiveOp::ReduceScatter ? a.count * n : a.count;
}

/// Elements written to `output` on one rank, for group size n.
inline std::uint64_t collective_output_count(const CollectiveArgs& a, std::uint32_t n) {
  return static_cast<CollectiveOp>(a.op) == CollectiveOp::AllGather ? a.count * n : a.count;
}

}  // namespace probelab::spec
