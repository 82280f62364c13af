// The cluster network of one simulation partition: the links of the topology and the hop-by-hop
// movement of collective messages over them.
//
// A sender's engine calls send() from its thread at its local time: the first link (the sender's
// HCCS link or NIC, always owned by the sender) is reserved at once. Every further hop is an event
// at the time the head reaches that link, processed in (time, sender, sequence) order, so that
// contention on a shared switch port or uplink is resolved the same way whatever else the kernel
// runs; after the last link the message is delivered to the receiver at the time its tail arrived
// (Receiver::deliver, called from the network's process).
//
// Distributed runs: a hop onto a link owned by another partition is handed to the Boundary
// instead (at least one link latency before it is due: the lookahead); the partition that owns it
// receives it through inject() before its kernel reaches that time. With one partition every hop
// is local. Same messages, same order, same times either way.
//
// Lookahead: a sender's engine can only add an event at least the smallest link latency after
// its own time (the first link is its own and reserved at once; the next event is when the head
// leaves it), and with an HCCS full mesh no queued hop uses a first link (on an HCCS ring, where
// chips forward each other's messages, there is no lookahead). So simulated time is cut into
// cells [kL, (k+1)L), L at most that latency (cell_ps()), and the network processes every event
// of cell k at time kL, in (time, sender, sequence) order: an event of cell k exists by kL (it
// was created at least L before its time, by a send or by an event of an earlier cell), and what
// cell k's events create falls in a later cell. Shared links see the same order of transfers,
// with one kernel activation per cell instead of one per distinct arrival time. A delivery
// processed ahead of its time runs the receiver's program on from that time (the receiver's clock
// is explicit, collective_execution.h); the receiver's thread resumes at the arrival. The time an
// event is processed at depends on its own time alone, not on which other events share the
// network: a partition that holds a part of the chips processes each of its events when the
// whole job in one process would (the receiver's HBM sees the same order of accesses), provided
// its windows end on cell boundaries (set_horizon()).
//
// Trace: one span per link and collective (link.h), on the link owner's timeline.
#pragma once

#include <algorithm>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <systemc>

#include "chip_model/collective/cluster_topology.h"
#include "chip_model/collective/link.h"
#include "chip_model/collective/message.h"

namespace probelab::chip {

class Trace;

class Network : public sc_core::sc_module {
 public:
  class Receiver {
   public:
    virtual ~Receiver() = default;
    /// Takes `m` over: it stays where it is (the network's storage, which a send does not move)
    /// until deliver() returns, to be used in place or moved out; the network reuses it after.
    virtual void deliver(Message&& m) = 0;
  };
  class Boundary {
   public:
    virtual ~Boundary() = default;
    /// `m` must take its next hop (m.hop, due at m.head_ps) in partition `process`.
    virtual void forward(Message m, std::uint32_t process) = 0;
  };

  /// `parts` (nullptr: one partition) and `process` say which links this partition owns.
  Network(sc_core::sc_module_name name, const ClusterTopology& topo, const PartitionMap* parts = nullptr,
          std::uint32_t process = 0, Trace* trace = nullptr);
  ~Network() override;

  const ClusterTopology& topology() const { return topo_; }
  void attach(std::uint32_t rank, Receiver* r);
  void set_boundary(Boundary* b) { boundary_ = b; }

  /// From the sender's engine: `m` (src, dst, key, payload, wire_bytes set) with its head ready at
  /// `ready_ps` and its last byte read from memory at `data_ps`. Returns when the sender's first
  /// link is free again.
  std::uint64_t send(Message&& m, std::uint64_t ready_ps, std::uint64_t data_ps);
  /// A message from another partition whose next hop (m.hop at m.head_ps) is owned here.
  void inject(Message m);

  /// Distributed runs: events at or after `ps` wait for the next window (messages from other
  /// partitions arrive between windows); a multiple of lookahead_ps() (a cell boundary), else
  /// a cell is cut and the run differs from one process. Default: no horizon.
  void set_horizon(std::uint64_t ps) { horizon_ps_ = ps; }
  /// How far ahead of its time the network processes an event: the length of a cell (above,
  /// cell_ps()), 0 without lookahead.
  std::uint64_t lookahead_ps() const { return lookahead_ps_; }
  /// The cell length of a network on `topo`: at most its smallest link latency (0 on an HCCS
  /// ring), and a divisor of the latency of the links between servers when one exists.
  static std::uint64_t cell_ps(const ClusterTopology& topo);
  /// Start of the cell that holds `t` (t itself without lookahead).
  std::uint64_t cell_start(std::uint64_t t) const { return lookahead_ps_ == 0 ? t : t - t % lookahead_ps_; }
  /// Time of the earliest queued hop or delivery; nullopt when nothing is queued.
  std::optional<std::uint64_t> next_event_ps() const;
  const Link& link(std::size_t id) const { return links_.at(id); }
  /// Runs link `id` at `fraction` (0, 1] of its nominal bandwidth from now on (performance fault).
  void degrade(std::size_t id, double fraction) { links_.at(id).set_bandwidth_fraction(fraction); }
  /// Link `id` is down from `ps` on (a hardware fault): a message whose head enters it then is
  /// lost, recorded in lost(), never delivered; the ranks that wait for it hang.
  void set_down(std::size_t id, std::uint64_t ps);
  /// A message lost on a link that was down (this partition's links), in the order it was sent.
  struct Lost {
    std::size_t link = 0;
    std::uint32_t src = 0, dst = 0;
    MessageKey key;
    std::uint64_t at_ps = 0;  // when its head reached the link
  };
  const std::vector<Lost>& lost() const { return lost_; }
  /// True when this partition processes the hops onto link `id` (and so holds its statistics).
  bool owns(std::size_t link) const;
  std::size_t num_links() const { return links_.size(); }
  /// Closes every link's timeline span (end of the run).
  void flush_trace();

 private:
  /// A queued hop or delivery; the message waits in `slab_`. Processed in (time, sender,
  /// sequence, hop) order, a total order, so the order does not depend on how events are stored.
  struct Event {
    std::uint64_t time = 0, seq = 0;
    std::uint32_t src = 0, slot = 0;
    std::uint16_t hop = 0;
    bool deliver = false;
  };
  struct Earlier {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time < b.time;
      if (a.src != b.src) return a.src < b.src;
      if (a.seq != b.seq) return a.seq < b.seq;
      return a.hop < b.hop;
    }
  };
  /// Queued events by cell (cell_start() of their time), unsorted: every event of a cell exists
  /// before the cell is processed (above), so each cell is sorted once when it becomes the batch.
  using Cells = std::map<std::uint64_t, std::vector<Event>>;
  /// Adds `e`: to the batch in order when its cell is not after the batch's, else to its cell.
  void push_event(const Event& e);
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return Earlier{}(b, a); }
  };
  /// The next event in order (nullptr: none queued): the earlier of the batch's next and the
  /// first late event.
  const Event* front_event() {
    const bool in_batch = batch_next_ < batch_.size();
    if (!in_batch && late_.empty()) {
      front_late_ = false;
      return next_cell() ? &batch_[batch_next_] : nullptr;
    }
    front_late_ = !in_batch || (!late_.empty() && Earlier{}(late_.front(), batch_[batch_next_]));
    return front_late_ ? &late_.front() : &batch_[batch_next_];
  }
  /// Takes the first queued cell as the batch, sorted (the batch and the late events are used
  /// up); false when none.
  bool next_cell();
  /// Removes the event front_event() gave.
  void pop_event() {
    if (!front_late_) {
      ++batch_next_;
      return;
    }
    std::pop_heap(late_.begin(), late_.end(), Later{});
    late_.pop_back();
    front_late_ = false;
  }
  void pump();
  void take_hop(Message&& m);
  /// After a hop: delivery (no next link), the next hop here, or a relay to the link's partition.
  void onward(Message&& m, std::optional<std::size_t> next_link);
  void queue(std::uint64_t time, bool deliver, Message&& m);
  void trace_span(std::size_t link, const Link::Span& s);
  void traced_hop(std::size_t link, const Link::Hop& h, std::uint64_t bytes, const std::optional<Link::Span>& closed);

  const ClusterTopology& topo_;
  const PartitionMap* parts_;
  std::uint32_t process_;
  Trace* trace_;
  Boundary* boundary_ = nullptr;
  std::vector<Link> links_;  // by id, contiguous (every hop touches one)
  std::vector<std::uint64_t> down_ps_;  // by link id: when it went down (empty: every link up)
  std::vector<Lost> lost_;
  /// True (and the message recorded as lost) when link `id` is down at `head_ps`.
  bool lost_on(std::size_t id, const Message& m, std::uint64_t head_ps);
  std::vector<Receiver*> receivers_;  // by rank (nullptr: not in this partition)
  // The batch: the events of cell batch_cell_ (and any queued later at or before it) in order,
  // [batch_next_, end) still to process; every event in cells_ comes after all of them.
  std::vector<Event> batch_;
  std::size_t batch_next_ = 0;
  std::uint64_t batch_cell_ = 0;
  // Events queued into the batch's cell while it is processed (a hop's delivery whose tail
  // arrives within the cell): a heap by Later, merged with the batch as events are taken (an
  // insertion into the sorted batch would move every event after it).
  std::vector<Event> late_;
  bool front_late_ = false;  // front_event() gave late_.front()
  Cells cells_;
  std::vector<Cells::node_type> spare_cells_;  // used-up cells, their storage reused
  std::uint64_t push_cell_ = 0;                // the cell pushed to last and its events in cells_
  std::vector<Event>* push_events_ = nullptr;  // (nullptr: none)
  std::deque<Message> slab_;           // messages of the queued events (a message never moves)
  std::vector<std::uint32_t> free_;    // unused slots of slab_
  sc_core::sc_event wake_;
  std::uint64_t wake_ps_ = ~std::uint64_t{0};  // when wake_ is due (none: max)
  std::uint64_t lookahead_ps_ = 0;
  std::uint64_t horizon_ps_ = ~std::uint64_t{0};
  bool pumping_ = false;
  std::uint64_t pump_now_ps_ = 0;  // the kernel's time while pumping_
};

}  // namespace probelab::chip
