// The links of a cluster of `ranks` chips, as data: which links exist, their bandwidth and
// latency, the route between two chips, the communicators (world, one server, the chips with the
// same index in every server) and which partition of a distributed run owns each link. No SystemC,
// and O(ranks) memory: nothing is stored per pair of chips beyond one server.
//
// Links (one direction each, `gbps` and `latency_ps` from the chip and cluster configs):
//   Hccs        chip -> chip of the same server: a full mesh when the chip's link_count reaches
//               the other chips of its server, else a ring of the server's chips (both ways)
//   NicTx       chip -> the switch layer: its RoCE NIC (NIC and cable latency)
//   SwitchPort  switch (or leaf) -> chip: the egress port towards the chip's NIC, where traffic
//               from many senders to one chip contends (switch latency)
//   LeafUp      fat tree: leaf -> spine, NIC bandwidth of the leaf / oversubscription / spines
//   SpineDown   fat tree: spine -> leaf, same bandwidth
// Routes: same server: HCCS (one hop in a mesh; the shorter way round a ring, ties towards
// increasing chip index); other server: NicTx, [LeafUp, SpineDown when the leaves differ; spine
// = destination chip mod spines], SwitchPort of the destination.
//
// Ownership: a link is owned by one chip (`owner`): HCCS and NIC by the sender, a switch port by
// the chip it leads to, leaf uplinks and spine downlinks towards a leaf by the first chip under
// that leaf. A distributed run processes the hops onto a link in the partition of its owner, so
// partitions only meet on NIC, uplink and spine links, whose latency bounds the lookahead.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "chip_model/chip_config.h"
#include "chip_model/collective/cluster_config.h"
#include "chip_model/trace.h"

namespace probelab::chip {

enum class LinkKind : std::uint8_t { Hccs, NicTx, SwitchPort, LeafUp, SpineDown };
std::string_view link_kind_name(LinkKind k);

struct LinkSpec {
  LinkKind kind = LinkKind::Hccs;
  std::uint32_t from = 0, to = 0;  // chips (Hccs), chip (NicTx from, SwitchPort to), leaf/spine ids
  double gbps = 0;
  std::uint64_t latency_ps = 0;
  std::uint32_t owner = 0;  // chip rank
};

/// Which ranks take part in a collective. Members are first + i * stride, i = 0..size-1, in ring
/// (group position) order.
enum class CommKind : std::uint8_t { World = 0, Server = 1, Peers = 2 };
std::string_view comm_kind_name(CommKind k);
/// "world", "server" or "peers"; throws ConfigError otherwise.
CommKind parse_comm_kind(std::string_view s);

struct CommGroup {
  CommKind kind = CommKind::World;
  std::uint32_t comm_id = 0;  // matching key of the communicator's collectives
  std::uint32_t first = 0, stride = 1, size = 1;
  std::uint32_t member(std::uint32_t pos) const { return first + pos * stride; }
  /// Position of `rank` in the group; size when it is not a member.
  std::uint32_t position_of(std::uint32_t rank) const;
};

/// The link ids of a route, in order, held inline (routing a message allocates nothing). At most
/// kMaxHops: a ring of 64 chips (the most a server holds) is 32 HCCS hops; across servers 4.
class Route {
 public:
  static constexpr std::size_t kMaxHops = 32;
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  std::uint32_t operator[](std::size_t i) const { return ids_[i]; }
  std::uint32_t at(std::size_t i) const {
    if (i >= n_) [[unlikely]] out_of_range(i);
    return ids_[i];
  }
  std::uint32_t front() const { return ids_[0]; }
  const std::uint32_t* begin() const { return ids_.data(); }
  const std::uint32_t* end() const { return ids_.data() + n_; }
  void push_back(std::uint32_t id) {
    if (n_ == kMaxHops) [[unlikely]] too_long();
    ids_[n_++] = id;
  }

 private:
  [[noreturn]] void out_of_range(std::size_t i) const;
  [[noreturn]] static void too_long();

  std::array<std::uint32_t, kMaxHops> ids_;  // the first n_ hold the route
  std::size_t n_ = 0;
};

/// Trace process ids of the switches: kSwitchPid + switch index (leaves first, then spines).
inline constexpr std::uint32_t kSwitchPid = Trace::kSwitchPid;

class ClusterTopology {
 public:
  /// Throws ConfigError when `ranks` do not fit the cluster (ClusterConfig::check_fits).
  ClusterTopology(const ChipConfig& chip, const ClusterConfig& cluster, std::uint32_t ranks);

  std::uint32_t ranks() const { return ranks_; }
  std::uint32_t chips_per_server() const { return cps_; }
  std::uint32_t servers() const { return servers_; }
  std::uint32_t server_of(std::uint32_t rank) const { return rank / cps_; }
  std::uint32_t local_of(std::uint32_t rank) const { return rank % cps_; }
  /// Chips of server `s` that the job uses.
  std::uint32_t chips_in_server(std::uint32_t s) const;
  bool hccs_mesh() const { return mesh_; }
  const ClusterConfig& cluster() const { return cluster_; }

  std::size_t num_links() const { return links_.size(); }
  /// The smallest latency of a link that hands a message to another server's side (NIC, leaf
  /// uplink, spine downlink: where a partition's lookahead comes from); 0 with one server.
  std::uint64_t handoff_latency_ps() const;
  const LinkSpec& link(std::size_t id) const { return links_.at(id); }
  /// Link ids from chip `src` to chip `dst`, in order (src != dst). Throws std::out_of_range.
  Route route(std::uint32_t src, std::uint32_t dst) const;
  /// Trace process id and track of a link ("hccs->r5" on chip 3, "nic.tx", "port->r5" on the switch).
  std::uint32_t trace_pid(std::size_t id) const;
  std::string trace_track(std::size_t id) const;
  /// A name of link `id` unique in the cluster: "r3 hccs->r5", "r3 nic.tx", "switch port->r5",
  /// "leaf1 up->spine0" (the owner's trace process name and the track).
  std::string link_name(std::size_t id) const;
  /// Trace process names of the switches (pid, name), for the timeline.
  std::vector<std::pair<std::uint32_t, std::string>> switch_names() const;

  /// The group of `kind` that `rank` belongs to.
  CommGroup group(CommKind kind, std::uint32_t rank) const;

 private:
  void add(LinkKind k, std::uint32_t from, std::uint32_t to, double gbps, std::uint64_t lat, std::uint32_t owner);
  std::uint32_t leaf_of(std::uint32_t rank) const { return server_of(rank) / cluster_.servers_per_leaf; }

  ClusterConfig cluster_;
  std::uint32_t ranks_, cps_, servers_, leaves_ = 0;
  bool mesh_ = true;
  std::size_t nic_base_ = 0, port_base_ = 0, up_base_ = 0, down_base_ = 0;
  std::vector<LinkSpec> links_;
};

/// Which process of a distributed run simulates each chip. Whole servers only.
struct PartitionMap {
  std::uint32_t processes = 1;
  std::vector<std::uint32_t> of_rank;  // process of each rank

  /// Servers split into `processes` contiguous blocks as even as possible. Throws ClusterFitError
  /// when there are more processes than chips or than servers.
  static PartitionMap even(const ClusterTopology& t, std::uint32_t processes);
  /// An explicit per-rank map. Throws ClusterFitError (naming `where`) when its length is not the
  /// rank count, a value is >= processes, a process gets no chip, or a server is split.
  static PartitionMap explicit_map(const ClusterTopology& t, std::vector<std::uint32_t> map, std::uint32_t processes,
                                   std::string_view where);
  std::uint32_t of_link(const ClusterTopology& t, std::size_t link) const { return of_rank.at(t.link(link).owner); }
  /// Conservative lookahead: the smallest latency of a link between two partitions.
  std::uint64_t lookahead_ps(const ClusterTopology& t) const;
};

}  // namespace probelab::chip
