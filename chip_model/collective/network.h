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
// Trace: one span per link and collective (link.h), on the link owner's timeline.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <queue>
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
    virtual void deliver(Message m) = 0;
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
  std::uint64_t send(Message m, std::uint64_t ready_ps, std::uint64_t data_ps);
  /// A message from another partition whose next hop (m.hop at m.head_ps) is owned here.
  void inject(Message m);

  /// Time of the earliest queued hop or delivery; nullopt when nothing is queued.
  std::optional<std::uint64_t> next_event_ps() const;
  const Link& link(std::size_t id) const { return *links_.at(id); }
  /// Runs link `id` at `fraction` (0, 1] of its nominal bandwidth from now on (performance fault).
  void degrade(std::size_t id, double fraction) { links_.at(id)->set_bandwidth_fraction(fraction); }
  /// True when this partition processes the hops onto link `id` (and so holds its statistics).
  bool owns(std::size_t link) const;
  std::size_t num_links() const { return links_.size(); }
  /// Closes every link's timeline span (end of the run).
  void flush_trace();

 private:
  struct Event {
    std::uint64_t time = 0;
    bool deliver = false;
    Message msg;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const;
  };
  void pump();
  void take_hop(Message m);
  /// After a hop: delivery (no next link), the next hop here, or a relay to the link's partition.
  void onward(Message m, std::optional<std::size_t> next_link);
  void queue(Event e);
  void trace_span(std::size_t link, const Link::Span& s);
  void traced_hop(std::size_t link, const Link::Hop& h, std::uint64_t bytes, const std::optional<Link::Span>& closed);

  const ClusterTopology& topo_;
  const PartitionMap* parts_;
  std::uint32_t process_;
  Trace* trace_;
  Boundary* boundary_ = nullptr;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<Receiver*> receivers_;  // by rank (nullptr: not in this partition)
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  sc_core::sc_event wake_;
};

}  // namespace probelab::chip
