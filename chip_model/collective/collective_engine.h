// The collective engine of one chip: runs this chip's part of Collective tasks (the
// CollectiveHandler the stream engine calls) by executing its rank program
// (collective_program.h) with messages over the cluster network (network.h). It knows nothing of
// the other ranks beyond its communicator; its state is its own buffers and the messages that
// arrived for it, so a chip costs the same whatever the job's size.
//
// run(ctx), on the stream's thread:
//  1. reads the CollectiveArgs block (spec/collective_args.h) from HBM (timed) and resolves the
//     group from the communicator and this chip's rank;
//  2. calls FaultHooks::on_collective (if the hooks want kFaultCollective) — the injector's
//     CollectiveOverride may force the algorithm (must then be forced on every rank of the group),
//     the accumulation dtype of this rank's adder, this rank's reduction order (Direct; chip ranks
//     of the job, restricted to the group's members; replaces order_mode) and a seeded arrival
//     jitter on this rank's incoming transfers;
//  3. stages its input from HBM (timed; Broadcast: the root only), as HCCL copies user buffers
//     into its communication buffer;
//  4. runs its program (collective_execution.h): each send reads its block from HBM and hands the
//     message to the network at this rank's current time; each receive lands its message in HBM
//     (an addition also reads the local operand) and moves this rank's time to the landing. The
//     program runs on the stream's thread until a message is missing; the thread then syncs and
//     waits once, and the network's deliveries run the rest of the program (no SystemC wait per
//     message: a ring all-reduce sends 2(N-1) messages per rank);
//  5. writes its output to HBM (timed) from the time its transfers were done, reports the flags
//     of the additions it performed (and NaNs in its input) to the detection circuit, records a
//     trace span, and returns with ctx.qk at the completion time.
// A message whose header disagrees with this rank's view of the collective (op, algorithm, count,
// dtype, reduction, root, group size), bad arguments or a group that does not match `num_ranks`
// throw std::runtime_error naming the task, the ranks and the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <systemc>

#include "chip_model/collective/collective_execution.h"
#include "chip_model/collective/collective_record.h"
#include "chip_model/collective/mailbox.h"
#include "chip_model/collective/message.h"
#include "chip_model/collective/network.h"
#include "chip_model/collective_handler.h"

namespace probelab::chip {

class CollectiveFabric;

/// A collective a rank is blocked in: it waits for a message that has not come (a peer is at
/// another collective, elsewhere, or done). What a job hang report names per rank.
struct BlockedCollective {
  std::uint32_t rank = 0;
  std::uint32_t comm = 0, seq = 0;                 // the communicator and this rank's call number on it
  std::uint32_t task_id = 0, op_id = 0, step = 0;  // the task that runs it
  std::string collective;                          // this rank's view: "allgather ring count 16 ..."
  std::uint32_t waits_for = 0;                     // the rank whose message is missing
  std::uint64_t since_ps = 0;                      // when this rank arrived at the collective
  std::string conflict;  // the message that came from `waits_for` is of this other collective ("": none came)
};

class CollectiveEngine : public sc_core::sc_module,
                         public CollectiveHandler,
                         public Network::Receiver,
                         private MessageSource {
 public:
  CollectiveEngine(sc_core::sc_module_name name, std::uint32_t rank, CollectiveFabric& fabric);

  std::uint32_t rank() const { return rank_; }
  void run(TaskContext& ctx) override;
  void deliver(Message&& m) override;

  /// Collectives this chip completed.
  std::uint64_t completed() const { return completed_; }
  /// Records of the completed collectives (kept when the fabric keeps records).
  const std::vector<CollectiveRecord>& records() const { return records_; }
  /// "r5 waits for r4 in comm 0 #3 (message 2)" while blocked on a message; empty otherwise.
  std::string waiting() const;
  /// The collectives this chip is blocked in (at most one per stream), by stream order of arrival.
  std::vector<BlockedCollective> blocked() const;

 private:
  Message* take(const MessageKey& key) override { return mailbox_.take(key); }
  /// Continues a parked execution after its message was handed over; parks it again or wakes
  /// the threads waiting for their collectives.
  void resume(CollectiveExecution& ex);

  std::uint32_t rank_;
  CollectiveFabric& fabric_;
  sc_core::sc_event finished_;                        // a parked execution finished
  Mailbox mailbox_;                                   // arrived before they were asked for
  std::vector<CollectiveExecution*> parked_;          // each waits for its awaited() message
  std::map<std::uint32_t, std::uint32_t> next_seq_;  // per communicator
  std::uint64_t send_seq_ = 0;
  std::uint64_t completed_ = 0;
  std::vector<CollectiveRecord> records_;
};

}  // namespace probelab::chip
