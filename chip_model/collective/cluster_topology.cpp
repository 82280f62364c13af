#include "chip_model/collective/cluster_topology.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace probelab::chip {

std::string_view link_kind_name(LinkKind k) {
  switch (k) {
    case LinkKind::Hccs: return "hccs";
    case LinkKind::NicTx: return "nic";
    case LinkKind::SwitchPort: return "switch_port";
    case LinkKind::LeafUp: return "leaf_up";
    case LinkKind::SpineDown: return "spine_down";
  }
  return "?";
}

std::string_view comm_kind_name(CommKind k) {
  switch (k) {
    case CommKind::World: return "world";
    case CommKind::Server: return "server";
    case CommKind::Peers: return "peers";
  }
  return "?";
}

CommKind parse_comm_kind(std::string_view s) {
  if (s == "world") return CommKind::World;
  if (s == "server") return CommKind::Server;
  if (s == "peers") return CommKind::Peers;
  throw ConfigError(fmt::format("comm: unknown communicator '{}' (expected world, server or peers)", s));
}

std::uint32_t CommGroup::position_of(std::uint32_t rank) const {
  if (rank < first || (rank - first) % stride != 0) return size;
  const std::uint32_t p = (rank - first) / stride;
  return p < size ? p : size;
}

ClusterTopology::ClusterTopology(const ChipConfig& chip, const ClusterConfig& cluster, std::uint32_t ranks)
    : cluster_(cluster), ranks_(ranks), cps_(cluster.chips_per_server) {
  if (ranks == 0) throw ConfigError("ranks: must be >= 1");
  if (cps_ == 0) throw ConfigError("cluster parameter 'chips_per_server': must be >= 1");
  cluster.check_fits(ranks);
  if (!(chip.link_bandwidth_gbps > 0)) throw ConfigError("chip parameter 'link_bandwidth_gbps': must be > 0");
  servers_ = (ranks + cps_ - 1) / cps_;
  const std::uint32_t in_server = std::min(ranks, cps_);
  mesh_ = chip.link_count + 1 >= in_server;
  const std::uint64_t hccs_lat = std::uint64_t{chip.link_latency_ns} * 1000;
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const std::uint32_t base = server_of(r) * cps_, m = chips_in_server(server_of(r)), i = local_of(r);
    if (m < 2) continue;
    if (mesh_) {
      for (std::uint32_t j = 0; j < m; ++j)
        if (j != i) add(LinkKind::Hccs, r, base + j, chip.link_bandwidth_gbps, hccs_lat, r);
    } else {
      add(LinkKind::Hccs, r, base + (i + 1) % m, chip.link_bandwidth_gbps, hccs_lat, r);
      add(LinkKind::Hccs, r, base + (i + m - 1) % m, chip.link_bandwidth_gbps, hccs_lat, r);
    }
  }
  if (servers_ < 2) return;
  const std::uint64_t nic_lat = std::uint64_t{cluster.nic_latency_ns} * 1000;
  const std::uint64_t sw_lat = std::uint64_t{cluster.switch_latency_ns} * 1000;
  nic_base_ = links_.size();
  for (std::uint32_t r = 0; r < ranks; ++r) add(LinkKind::NicTx, r, cluster.fat_tree() ? leaf_of(r) : 0, cluster.nic_bandwidth_gbps, nic_lat, r);
  port_base_ = links_.size();
  for (std::uint32_t r = 0; r < ranks; ++r) add(LinkKind::SwitchPort, cluster.fat_tree() ? leaf_of(r) : 0, r, cluster.nic_bandwidth_gbps, sw_lat, r);
  if (!cluster.fat_tree()) return;
  leaves_ = (servers_ + cluster.servers_per_leaf - 1) / cluster.servers_per_leaf;
  if (leaves_ < 2) return;
  const double up = cluster.nic_bandwidth_gbps * cps_ * cluster.servers_per_leaf / cluster.oversubscription / cluster.spines;
  auto first_rank = [&](std::uint32_t leaf) { return leaf * cluster.servers_per_leaf * cps_; };
  up_base_ = links_.size();
  for (std::uint32_t l = 0; l < leaves_; ++l)
    for (std::uint32_t s = 0; s < cluster.spines; ++s) add(LinkKind::LeafUp, l, s, up, sw_lat, first_rank(l));
  down_base_ = links_.size();
  for (std::uint32_t s = 0; s < cluster.spines; ++s)
    for (std::uint32_t l = 0; l < leaves_; ++l) add(LinkKind::SpineDown, s, l, up, sw_lat, first_rank(l));
}

void ClusterTopology::add(LinkKind k, std::uint32_t from, std::uint32_t to, double gbps, std::uint64_t lat,
                          std::uint32_t owner) {
  links_.push_back({k, from, to, gbps, lat, owner});
}

std::uint32_t ClusterTopology::chips_in_server(std::uint32_t s) const {
  return std::min(cps_, ranks_ - std::min(ranks_, s * cps_));
}

void Route::out_of_range(std::size_t i) const {
  throw std::out_of_range(fmt::format("route: hop {} of {}", i, n_));
}

void Route::too_long() { throw std::length_error(fmt::format("route: more than {} hops", kMaxHops)); }

Route ClusterTopology::route(std::uint32_t src, std::uint32_t dst) const {
  if (src >= ranks_ || dst >= ranks_ || src == dst)
    throw std::out_of_range(fmt::format("cluster: no route from r{} to r{}", src, dst));
  Route r;
  if (server_of(src) == server_of(dst)) {
    const std::uint32_t m = chips_in_server(server_of(src)), base = server_of(src) * cps_;
    // HCCS links of chip x start at index hccs(x): the chips before it own (m-1) (mesh) or 2 (ring) links each.
    auto hccs = [&](std::uint32_t x) { return static_cast<std::uint32_t>(x * (mesh_ ? m - 1 : 2)); };
    const std::uint32_t i = local_of(src), j = local_of(dst);
    if (mesh_) {
      r.push_back(hccs(src) + (j < i ? j : j - 1));
      return r;
    }
    const std::uint32_t up = (j + m - i) % m;
    const bool forward = up <= m - up;
    for (std::uint32_t at = i; at != j; at = forward ? (at + 1) % m : (at + m - 1) % m)
      r.push_back(hccs(base + at) + (forward ? 0 : 1));
    return r;
  }
  r.push_back(static_cast<std::uint32_t>(nic_base_ + src));
  if (leaves_ >= 2 && leaf_of(src) != leaf_of(dst)) {
    const std::uint32_t spine = dst % cluster_.spines;
    r.push_back(static_cast<std::uint32_t>(up_base_ + leaf_of(src) * cluster_.spines + spine));
    r.push_back(static_cast<std::uint32_t>(down_base_ + spine * leaves_ + leaf_of(dst)));
  }
  r.push_back(static_cast<std::uint32_t>(port_base_ + dst));
  return r;
}

std::uint32_t ClusterTopology::trace_pid(std::size_t id) const {
  const LinkSpec& l = link(id);
  switch (l.kind) {
    case LinkKind::Hccs:
    case LinkKind::NicTx: return l.from;
    case LinkKind::SwitchPort:
    case LinkKind::LeafUp: return kSwitchPid + l.from;
    case LinkKind::SpineDown: return kSwitchPid + leaves_ + l.from;
  }
  return 0;
}

std::string ClusterTopology::trace_track(std::size_t id) const {
  const LinkSpec& l = link(id);
  switch (l.kind) {
    case LinkKind::Hccs: return fmt::format("hccs->r{}", l.to);
    case LinkKind::NicTx: return "nic.tx";
    case LinkKind::SwitchPort: return fmt::format("port->r{}", l.to);
    case LinkKind::LeafUp: return fmt::format("up->spine{}", l.to);
    case LinkKind::SpineDown: return fmt::format("down->leaf{}", l.to);
  }
  return "?";
}

std::string ClusterTopology::link_name(std::size_t id) const {
  const LinkSpec& l = link(id);
  if (l.kind == LinkKind::Hccs || l.kind == LinkKind::NicTx) return fmt::format("r{} {}", l.from, trace_track(id));
  const std::uint32_t pid = trace_pid(id);
  for (const auto& [spid, name] : switch_names())
    if (spid == pid) return fmt::format("{} {}", name, trace_track(id));
  return fmt::format("switch {}", trace_track(id));
}

std::vector<std::pair<std::uint32_t, std::string>> ClusterTopology::switch_names() const {
  std::vector<std::pair<std::uint32_t, std::string>> out;
  if (servers_ < 2) return out;
  if (!cluster_.fat_tree()) return {{kSwitchPid, "switch"}};
  const std::uint32_t leaves = std::max<std::uint32_t>(leaves_, 1);
  for (std::uint32_t l = 0; l < leaves; ++l) out.emplace_back(kSwitchPid + l, fmt::format("leaf{}", l));
  if (leaves_ >= 2)
    for (std::uint32_t s = 0; s < cluster_.spines; ++s) out.emplace_back(kSwitchPid + leaves_ + s, fmt::format("spine{}", s));
  return out;
}

CommGroup ClusterTopology::group(CommKind kind, std::uint32_t rank) const {
  if (rank >= ranks_) throw std::out_of_range(fmt::format("cluster: rank {} outside the job of {} chips", rank, ranks_));
  CommGroup g;
  g.kind = kind;
  switch (kind) {
    case CommKind::World:
      g.size = ranks_;
      break;
    case CommKind::Server:
      g.comm_id = 0x1000000u | server_of(rank);
      g.first = server_of(rank) * cps_;
      g.size = chips_in_server(server_of(rank));
      break;
    case CommKind::Peers:
      g.comm_id = 0x2000000u | local_of(rank);
      g.first = local_of(rank);
      g.stride = cps_;
      g.size = (ranks_ - g.first + cps_ - 1) / cps_;
      break;
  }
  return g;
}

namespace {

std::string job_text(const ClusterTopology& t) {
  return fmt::format("{} rank(s) on {} server(s) of {} chips", t.ranks(), t.servers(), t.chips_per_server());
}

}  // namespace

PartitionMap PartitionMap::even(const ClusterTopology& t, std::uint32_t processes) {
  if (processes == 0) throw ClusterFitError("partition", "at least one process", "0");
  if (processes > t.ranks())
    throw ClusterFitError("partition", fmt::format("at least {} chips for {} processes (one process per chip at most)", processes, processes),
                         job_text(t));
  if (processes > t.servers())
    throw ClusterFitError("partition",
                         fmt::format("at least {} servers for {} processes (a server's chips are simulated by one "
                                     "process)",
                                     processes, processes),
                         job_text(t));
  PartitionMap m;
  m.processes = processes;
  m.of_rank.resize(t.ranks());
  for (std::uint32_t r = 0; r < t.ranks(); ++r)
    m.of_rank[r] = static_cast<std::uint32_t>(std::uint64_t{t.server_of(r)} * processes / t.servers());
  return m;
}

PartitionMap PartitionMap::explicit_map(const ClusterTopology& t, std::vector<std::uint32_t> map,
                                        std::uint32_t processes, std::string_view where) {
  const std::string w = where.empty() ? "partition" : std::string(where);
  if (map.size() != t.ranks())
    throw ClusterFitError(w, fmt::format("{} entries (one process index per rank)", t.ranks()),
                         fmt::format("{} entries", map.size()));
  if (processes > t.ranks())
    throw ClusterFitError(w, fmt::format("at most {} processes (one process per chip at most)", t.ranks()),
                         fmt::format("{} processes", processes));
  std::vector<std::uint32_t> chips(processes, 0);
  for (std::uint32_t r = 0; r < t.ranks(); ++r) {
    if (map[r] >= processes)
      throw ClusterFitError(w, fmt::format("process indices 0..{}", processes - 1),
                           fmt::format("process {} for rank {}", map[r], r));
    ++chips[map[r]];
    const std::uint32_t first = t.server_of(r) * t.chips_per_server();
    if (map[r] != map[first])
      throw ClusterFitError(w, "whole servers on each process (a server's chips are simulated by one process)",
                           fmt::format("server {} split: rank {} on process {}, rank {} on process {}", t.server_of(r),
                                       first, map[first], r, map[r]));
  }
  for (std::uint32_t p = 0; p < processes; ++p)
    if (chips[p] == 0)
      throw ClusterFitError(w, fmt::format("a server on each process 0..{}", processes - 1),
                           fmt::format("process {} with no chip", p));
  PartitionMap m;
  m.processes = processes;
  m.of_rank = std::move(map);
  return m;
}

std::uint64_t ClusterTopology::handoff_latency_ps() const {
  // A hop onto link i+1 is handed to the owner of link i+1 one latency of link i after it was
  // reserved; only NIC, leaf-uplink and spine-downlink hops lead to another owner.
  std::uint64_t m = 0;
  for (const LinkSpec& l : links_)
    if (l.kind != LinkKind::Hccs && l.kind != LinkKind::SwitchPort) m = m == 0 ? l.latency_ps : std::min(m, l.latency_ps);
  return m;
}

std::uint64_t PartitionMap::lookahead_ps(const ClusterTopology& t) const {
  const std::uint64_t m = t.handoff_latency_ps();
  return processes < 2 || m == 0 ? std::numeric_limits<std::uint64_t>::max() : m;
}

}  // namespace probelab::chip
