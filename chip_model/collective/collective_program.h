// The part of a collective one rank performs: its sends, its receives and what it does with each
// received block, in order. Pure data, no SystemC, O(steps of the algorithm) per rank: nothing
// here describes the other ranks. The reduction order is explicit in it: every addition names
// its operands (the received partial first, or this rank's own partial first) and the rank that
// performs it; collective_plan.h assembles the programs of a group into the whole plan.
//
// Buffers of a rank: its staged input (data dtype), numbered slots holding partial sums (the
// rank's accumulation dtype; an empty slot stands for the rank's own input over the same range,
// a leaf), and its output (data dtype). Element ranges index the input for Input and Slot
// operands and the output for Output operands.
//
// Steps:
//   Send     `count` elements from Input / Slot / Output starting at `begin` to group position
//            `peer` (a slot holding a partial sum travels in the accumulation dtype, anything else
//            in the data dtype); `tag` identifies the message between the two ranks, `round` is the
//            step of the schedule it belongs to (collective_plan.h)
//   Recv     the message `tag` from `peer`, then: Store it in the output at `dst`;
//            AddRecvFirst: slot := received + own input[begin, begin+count);
//            AddOwnFirst:  slot := slot (or own input when empty) + received
//   Finalize slot -> data dtype (divided by the divisor for ReduceOp::Mean), into the output at
//            `dst`, or in place (`in_place`: the slot then holds final values for later sends);
//            an empty slot copies the input's bits unchanged
//   Copy     input[begin, begin+count) -> output[dst, ...), bits unchanged
//   FoldAll  Direct: receives `tag` from every other position, then folds the contributions over
//            [begin, begin+count) left to right in the program's `fold_order` (group positions,
//            this rank's own included; empty: arrival order, this rank's own first, then by
//            landing time, ties by position) and finalizes into the output at `dst`
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chip_model/spec/collective_args.h"

namespace probelab::chip {

enum class Operand : std::uint8_t { Input, Slot, Output };
enum class Combine : std::uint8_t { Store, AddRecvFirst, AddOwnFirst };

struct ProgStep {
  enum class Kind : std::uint8_t { Send, Recv, Finalize, Copy, FoldAll };
  Kind kind = Kind::Send;
  std::uint32_t peer = 0;   // group position (Send, Recv)
  std::uint32_t tag = 0;    // message id between the two ranks (Send, Recv, FoldAll)
  std::uint32_t round = 0;  // schedule step (Send, Recv, FoldAll)
  Operand from = Operand::Input;
  Combine combine = Combine::Store;
  bool in_place = false;    // Finalize
  std::uint32_t slot = 0;
  std::uint64_t begin = 0, count = 0, dst = 0;
  bool operator==(const ProgStep&) const = default;
};

struct ProgramRequest {
  spec::CollectiveOp op = spec::CollectiveOp::AllReduce;
  spec::CollectiveAlgo algo = spec::CollectiveAlgo::Ring;
  std::uint32_t size = 1;       // group size N
  std::uint32_t position = 0;   // this rank's group position
  std::uint32_t root_pos = 0;   // tree root / broadcast root, as a group position
  std::uint64_t count = 0;      // as in CollectiveArgs
  /// Direct reductions: this rank's order of the N contributions (group positions, a
  /// permutation); empty: arrival order.
  std::vector<std::uint32_t> direct_order;
};

struct RankProgram {
  std::uint32_t position = 0, size = 1;
  std::vector<ProgStep> steps;
  /// The order of a FoldAll step (Direct: one per program).
  std::vector<std::uint32_t> fold_order;
  /// Rounds of the schedule (the largest round + 1 over the group; the same on every rank).
  std::uint32_t rounds = 0;
};

/// Builds rank `req.position`'s program. Throws std::invalid_argument for a position or root
/// outside the group, count 0, or a direct order that is not a permutation.
RankProgram build_program(const ProgramRequest& req);

/// Rank `req.position`'s program one step at a time: the steps of build_program(req), in order.
/// A ring's 2(N-1) to 4(N-1) steps are computed when reached (O(1) state, nothing materialised:
/// a rank of a large ring spends no program memory or setup per collective); tree and direct
/// programs (O(log N) steps, one FoldAll) are built whole. Throws std::invalid_argument as
/// build_program does.
class ProgramCursor {
 public:
  explicit ProgramCursor(ProgramRequest req);
  /// The current step; nullptr once the program is done. Stays valid until next().
  const ProgStep* step() const { return done_ ? nullptr : &cur_; }
  /// Moves to the following step.
  void next();
  /// The order of a FoldAll step (as RankProgram::fold_order).
  const std::vector<std::uint32_t>& fold_order() const { return prog_.fold_order; }

 private:
  /// Ring: candidate `k` of the program into cur_; false when that step is empty (skipped).
  bool ring_candidate(std::uint64_t k);
  /// Ring AllReduce with fewer elements than ranks (empty chunks): the candidate before the next
  /// one after `k` that may be non-empty (`k` when that is the next one).
  std::uint64_t ring_skip(std::uint64_t k) const;
  /// Moves to the first non-empty step at or after the current one.
  void settle();

  ProgramRequest req_;
  bool lazy_ = false;
  RankProgram prog_;                // tree, direct: the whole program
  std::uint64_t k_ = 0, end_ = 0;  // the current step (ring: candidate) and how many there are
  std::uint32_t next_ = 0, prev_ = 0;  // ring neighbours (group positions)
  bool blocks_ = false;                // ring: whole blocks of `count` (ReduceScatter, AllGather)
  std::uint64_t chunk_q_ = 0, chunk_r_ = 0;  // ring: count / N and count % N
  ProgStep cur_;
  bool done_ = false;
};

/// Ranges of `count` split into `n` nearly equal chunks, the first count % n one larger: chunk c
/// starts at begin(c) and holds size(c) elements (ring AllReduce and Broadcast chunks).
struct Chunking {
  std::uint64_t count = 0;
  std::uint32_t n = 1;
  std::uint64_t size(std::uint32_t c) const { return count / n + (c < count % n ? 1 : 0); }
  std::uint64_t begin(std::uint32_t c) const { return c * (count / n) + std::min<std::uint64_t>(c, count % n); }
};

}  // namespace probelab::chip
