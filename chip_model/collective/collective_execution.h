// One rank's execution of its collective program (collective_program.h) on real values, with the
// timing of every transfer. Plain C++ (no SystemC waits): the execution is a resumable state
// machine. advance() runs program steps until a receive needs a message that has not arrived
// (it returns false and awaited() names it) or the program is done (true); the engine hands the
// awaited message over with give() when the network delivers it and calls advance() again, from
// whatever process delivered it. So a collective costs its owner's thread one wait however many
// messages it exchanges, and a message costs no SystemC context switch.
//
// Timing is explicit: the execution keeps this rank's local time; a send reads its block from HBM
// and hands the message to the network at that time; a receive lands the message in HBM (an
// addition also reads the local operand) from when its head arrived, and moves the local time to
// the landing (plus the seeded arrival jitter of an injector). Nothing depends on when the
// simulation kernel runs the code, so the times are those of a thread that waited for each message.
//
// A message whose header disagrees with this rank's view of the collective, or whose element
// count is not the expected one, throws std::runtime_error naming the ranks and the field.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "chip_model/collective/cluster_topology.h"
#include "chip_model/collective/collective_program.h"
#include "chip_model/collective/collective_values.h"
#include "chip_model/collective/message.h"
#include "chip_model/spec/collective_args.h"
#include "numerics/bulk.h"
#include "numerics/mode.h"

namespace probelab::chip {

class Hbm;
class Network;

/// Where an execution finds messages that arrived before it asked for them.
class MessageSource {
 public:
  virtual ~MessageSource() = default;
  /// The message `key`, no longer the source's, or nullptr when it has not arrived. It stays
  /// valid, to be used in place or moved from, until the source receives another message.
  virtual Message* take(const MessageKey& key) = 0;
};

class CollectiveExecution {
 public:
  struct Setup {
    Hbm* hbm = nullptr;
    Network* net = nullptr;
    MessageSource* source = nullptr;
    std::uint32_t rank = 0;  // this chip
    spec::CollectiveArgs args;
    CommGroup group;
    std::uint32_t position = 0;
    std::uint32_t comm = 0, seq = 0;
    CollectiveHeader header;
    graph::DType data = graph::DType::F32, acc = graph::DType::F32;
    std::uint32_t divisor = 1;
    num::Mode mode;
    Payload input;
    std::uint64_t out_count = 0;
    std::uint64_t arrival_ps = 0;
    std::uint64_t jitter_ps = 0, jitter_seed = 0;
    std::uint64_t* send_seq = nullptr;  // the engine's per-sender message counter
    std::uint32_t task_id = 0, op_id = 0, step = 0;  // the task that runs it (for a hang's report)
  };

  CollectiveExecution(Setup s, ProgramCursor prog);

  /// Runs steps until one needs a message that has not arrived (false) or the program is done
  /// (true). A message of another collective (the sender's program went apart from this rank's:
  /// it skipped or reordered a collective) is never consumed: the execution waits for ever, as
  /// a real rank would until its timeout, and conflict() describes the sender's collective.
  /// Throws std::runtime_error for a message of this collective run another way (an algorithm
  /// forced on some ranks only) or of the wrong size.
  bool advance();
  /// The sender's view of a message that belongs to another collective ("" when none came).
  const std::string& conflict() const { return conflict_; }
  const Setup& setup() const { return s_; }
  /// This rank's view of the collective: "allreduce ring count 16 dtype float16 sum ...".
  std::string describe() const;
  /// The message the execution waits for, and the rank that sends it (after advance() == false).
  const MessageKey& awaited() const { return awaited_; }
  std::uint32_t awaited_rank() const { return awaited_rank_; }
  /// Hands over the awaited message, delivered at its tail's arrival: the next advance()
  /// consumes it (uses it in place or moves from it), and `m` must live until then.
  void give(Message& m) {
    resumed_ps_ = std::max(resumed_ps_, m.tail_ps);
    given_ = &m;
  }
  /// When the last handed-over message was delivered: the time a thread that waited for each
  /// message would have resumed at (0: none handed over).
  std::uint64_t resumed_ps() const { return resumed_ps_; }
  bool finished() const { return finished_; }
  /// Ends the execution with an error (a throw from advance() on another process's stack).
  void fail(std::exception_ptr e) {
    error_ = std::move(e);
    finished_ = true;
  }
  const std::exception_ptr& error() const { return error_; }

  std::vector<std::byte>& output() { return out_; }
  const num::BulkReport& report() const { return rep_; }
  std::uint64_t done_ps() const { return std::max(t_, send_free_); }
  std::uint64_t recv_wait_ps() const { return recv_wait_; }
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  std::uint64_t messages_sent() const { return messages_; }
  const std::vector<std::uint32_t>& order() const { return order_; }

 private:
  /// A numbered buffer of partial sums (or finalized values). Slots are few at a time (ring: two,
  /// tree: one) and their storage is reused once dropped: no allocation per message.
  struct Slot {
    std::uint32_t id = 0;
    bool live = false;
    bool final = false;  // finalized in place: data dtype values of [begin, begin + size)
    std::uint64_t begin = 0;
    Value v;
  };
  Slot* find_slot(std::uint32_t id);
  /// The live slot `id`, or a new one (reusing a dropped slot's storage).
  Slot& slot(std::uint32_t id);

  std::uint64_t hbm_time(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start, bool write);
  Value own(std::uint64_t begin, std::uint64_t count) const;
  /// `count` input elements from `begin` into `v` (its storage reused).
  void own_into(Value& v, std::uint64_t begin, std::uint64_t count) const;
  /// The next seeded arrival jitter (0 without an injector's jitter: no generator is made).
  std::uint64_t jitter() {
    if (s_.jitter_ps == 0) return 0;
    if (!rng_) rng_ = std::make_unique<std::mt19937_64>(s_.jitter_seed);
    return (*rng_)() % (s_.jitter_ps + 1);
  }
  /// The message `st.tag` from group position `from_pos`, checked: the one handed over, or one
  /// from the source (used in place); nullptr (and awaited() set) when it has not arrived.
  Message* next_message(const ProgStep& st, std::uint32_t from_pos);
  /// Throws for a message of this call that disagrees with this rank's view; false for a message
  /// of another call (conflict_ set).
  bool check(const Message& m, const ProgStep& st);
  void send(const ProgStep& st);
  std::uint64_t land(const Message& m, std::uint64_t dst, std::uint64_t begin, bool adds);
  void advance_to(std::uint64_t landed);
  Value payload_value(const Message& m) const;
  Value add(Value a, Value b, std::uint64_t begin);
  /// a := a + b in this rank's accumulation dtype (both converted first), flags at `begin`.
  void add_into(Value& a, Value& b, std::uint64_t begin);
  void recv(const ProgStep& st, const Message& m);
  Value finish(Value acc, std::uint64_t begin);
  void finalize(const ProgStep& st);
  void fold_all(const ProgStep& st);

  Setup s_;
  ProgramCursor prog_;
  bool finished_ = false;
  std::exception_ptr error_;
  std::size_t es_;
  std::vector<std::byte> out_;
  std::vector<Slot> slots_;
  Value in_, own_, res_;  // scratch: a received block, this rank's block, a finalized block
  num::BulkReport rep_;
  std::uint64_t t_ = 0, send_free_ = 0, recv_wait_ = 0, bytes_sent_ = 0, messages_ = 0;
  std::unique_ptr<std::mt19937_64> rng_;  // made by the first jitter(): 2.5 KB, seeded in 312 steps
  std::vector<std::uint32_t> order_;
  Message* given_ = nullptr;  // the message handed over by give(), until consumed
  std::uint64_t resumed_ps_ = 0;
  MessageKey awaited_;
  std::uint32_t awaited_rank_ = 0;
  std::string conflict_;
  std::vector<Message> fold_msgs_;  // FoldAll: the contributions received so far, by position
  std::uint32_t fold_next_ = 0;     // FoldAll: the next position to receive from
};

}  // namespace probelab::chip
