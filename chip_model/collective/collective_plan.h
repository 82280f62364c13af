// The reduction plan of a collective over its whole group: which additions happen, in which
// order, on which rank, and which transfers move data between ranks in which step. Pure data, no
// SystemC, deterministic. Assembled from the ranks' programs (collective_program.h, the source of
// truth that the chips' engines execute) by evaluating them symbolically, so the plan describes
// exactly what the engines do. It is O(N^2) for ring and direct: for tests, descriptions and the
// reference evaluation (collective_math.h), never on the simulation's path.
//
// Positions are indices into the group (0..N-1); `group[pos]` is the chip rank. Every output
// chunk of every rank names a ReductionExpr: a small expression tree over the contributions of
// the group (leaves) and additions rounded to the accumulation dtype. Ranks whose chunks name the
// same expression hold identical bits, because the expression is evaluated once and its result
// copied (ring and tree). Under Direct each rank has its own expression (its own order).
//
// Algorithms (N = group size, K = ceil(log2 N), S = per-rank buffer):
//  Ring AllReduce     chunks c = 0..N-1 of about S/N. Reduce-scatter: in step s (0..N-2) position p
//                     sends its partial of chunk (p-1-s) mod N to p+1, which adds its own
//                     contribution: chunk c is summed in position order c+1, c+2, ..., c (mod N)
//                     and ends on position c, which rounds it to the data dtype. All-gather: in
//                     step N-1+s position p forwards chunk (p-s) mod N to p+1. 2(N-1) steps.
//  Ring ReduceScatter the reduce-scatter half, chunk c = output block c. N-1 steps.
//  Ring AllGather     the all-gather half, chunk c = input of position c. N-1 steps.
//  Ring Broadcast     the root's buffer in N chunks pipelined along root, root+1, ...: 2(N-1) steps.
//  Tree AllReduce     binomial tree on v = (p - root) mod N: in reduce step k (0..K-1) v with
//                     v mod 2^(k+1) == 2^k sends its partial to v - 2^k, which computes
//                     own + received. The root rounds; broadcast down the same tree, K steps.
//                     For N = 8: ((v0+v1)+(v2+v3))+((v4+v5)+(v6+v7)).
//  Tree ReduceScatter tree reduce of the whole input, then the root sends block i to position i.
//  Tree AllGather     binomial gather of the blocks to the root, then binomial broadcast.
//  Tree Broadcast     binomial broadcast from the root, K steps.
//  Direct             one step: every position sends what each peer needs to each peer (N-1
//                     transfers each; Broadcast: the root only); each rank folds the N
//                     contributions left to right in its own order: ((o0 + o1) + o2) + ...
//
// Wire sizes: transfers of partial sums carry the sender's accumulation dtype, all others (a
// rank's own contribution, final values) the data dtype.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chip_model/collective/collective_program.h"
#include "chip_model/spec/collective_args.h"
#include "graph/dtype.h"

namespace probelab::chip {

struct PlanTerm {
  enum class Kind : std::uint8_t {
    Leaf,  // contribution of group position `position`, converted to the accumulation dtype
    Add,   // terms[lhs] + terms[rhs] in the accumulation dtype of `position`, which computes it
  };
  Kind kind = Kind::Leaf;
  std::uint32_t position = 0;
  std::uint32_t lhs = 0;
  std::uint32_t rhs = 0;
  bool operator==(const PlanTerm&) const = default;
};

/// An expression tree in topological order; the last term is the result, which `final_at` converts
/// to the data dtype (after dividing by N for ReduceOp::Mean, in its accumulation dtype). An
/// expression of a single leaf is a copy: its bits pass unchanged (no conversion, no division).
struct ReductionExpr {
  std::vector<PlanTerm> terms;
  std::uint32_t final_at = 0;
  /// Leaves in evaluation order (the reduction order), as group positions.
  std::vector<std::uint32_t> leaf_order() const;
  /// "((r0+r1)+r2)" with chip ranks from `group`.
  std::string to_string(const std::vector<std::uint32_t>& group) const;
  bool operator==(const ReductionExpr&) const = default;
};

/// `count` output elements of one rank starting at `dst_begin`, computed from elements
/// [src_begin, src_begin + count) of the contributors' inputs by exprs[expr].
struct OutputChunk {
  std::uint64_t src_begin = 0;
  std::uint64_t dst_begin = 0;
  std::uint64_t count = 0;
  std::uint32_t expr = 0;
};

struct RankPlan {
  std::vector<OutputChunk> chunks;  // disjoint, cover the rank's output
  std::vector<std::uint32_t> order; // Direct reductions: the positions in the order this rank adds them
};

struct Transfer {
  std::uint32_t src = 0;     // group positions
  std::uint32_t dst = 0;
  std::uint64_t elems = 0;
  bool partial = false;      // carries partial sums (accumulation dtype on the wire)
};

struct PlanStep {
  std::vector<Transfer> transfers;
};

struct CollectivePlan {
  spec::CollectiveOp op = spec::CollectiveOp::AllReduce;
  spec::CollectiveAlgo algo = spec::CollectiveAlgo::Ring;
  spec::ReduceOp reduction = spec::ReduceOp::Sum;
  graph::DType data_dtype = graph::DType::F32;
  graph::DType acc_dtype = graph::DType::F32;   // the collective's accumulation dtype
  std::vector<graph::DType> acc_dtypes;    // per position: what that rank's adder accumulates in
                                           // (acc_dtype unless overridden for that rank)
  std::uint64_t count = 0;                 // as in CollectiveArgs
  std::vector<std::uint32_t> group;        // chip rank of each position
  std::uint32_t root_pos = 0;
  std::uint32_t divisor = 0;               // ReduceOp::Mean divides by this (0: the group size)
  std::vector<ReductionExpr> exprs;
  std::vector<RankPlan> ranks;             // by position
  std::vector<PlanStep> steps;             // transfer schedule, in order

  std::uint32_t size() const { return static_cast<std::uint32_t>(group.size()); }
  bool reduces() const;
  std::uint64_t input_count() const;   // per rank
  std::uint64_t output_count() const;  // per rank
  /// Bytes of a transfer on the wire (partial sums travel in the sender's accumulation dtype).
  std::uint64_t wire_bytes(const Transfer& t) const;
  /// Position of a chip rank in the group; throws std::invalid_argument if absent.
  std::uint32_t position_of(std::uint32_t chip_rank) const;
  /// Multi-line human-readable description: algorithm, steps and every distinct expression.
  std::string describe() const;
};

struct PlanRequest {
  spec::CollectiveOp op = spec::CollectiveOp::AllReduce;
  spec::CollectiveAlgo algo = spec::CollectiveAlgo::Ring;
  spec::ReduceOp reduction = spec::ReduceOp::Sum;
  graph::DType data_dtype = graph::DType::F32;
  graph::DType acc_dtype = graph::DType::F32;
  /// Per position: accumulation dtype of that rank's adder (e.g. FP16 communication buffer on
  /// one rank). Empty, or one entry per position.
  std::vector<graph::DType> rank_acc_dtypes;
  std::uint64_t count = 0;
  std::vector<std::uint32_t> group;        // chip ranks; ring order
  std::uint32_t root = 0;                  // chip rank
  std::uint32_t divisor = 0;               // ReduceOp::Mean divisor (0: the group size)
  /// Direct only: per position, the positions in the order that rank adds them (a permutation of
  /// 0..N-1). Missing or empty entries mean group order.
  std::vector<std::vector<std::uint32_t>> direct_orders;
};

/// Builds the plan. Throws std::invalid_argument naming the offending field for bad requests
/// (empty or duplicate group, root not in group, count 0, unsupported dtypes, bad orders).
CollectivePlan build_plan(const PlanRequest& req);

/// Checks a request and returns "" or the reason it is invalid.
std::string validate_plan_request(const PlanRequest& req);

/// The program request of group position `pos` for a plan request (direct order of that
/// position from req.direct_orders, if any).
ProgramRequest program_request(const PlanRequest& req, std::uint32_t pos);

}  // namespace probelab::chip
