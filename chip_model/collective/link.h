// One direction of a link of the cluster (HCCS, a NIC, a switch port, a fat-tree uplink): a serial
// pipe with a bandwidth and a latency, and its accounting. Plain C++ (no SystemC).
//
// Timing model (reservation, served in the order requests are made, each no earlier than its
// own ready time): a transfer of B bytes whose head is ready at t starts at max(t, busy_until),
// occupies the link for B / bandwidth (rounded up to ps), its head reaches the far end `latency`
// after it started and its tail `latency` after it left (never before the tail reached this link:
// cut-through, see hop()). Two transfers on one link at the same time therefore take twice as long.
//
// Accounting: bytes, transfers, busy and queueing time per link (Stats), and for the timeline one
// span per run of consecutive transfers with the same tag (the collective they belong to), so the
// trace holds O(links x collectives) link events however many chunks a collective sends.
#pragma once

#include <cstdint>
#include <optional>

#include "chip_model/collective/cluster_topology.h"

namespace probelab::chip {

class Link {
 public:
  Link(std::uint32_t id, const LinkSpec& spec) : id_(id), spec_(spec), nominal_gbps_(spec.gbps) {}

  std::uint32_t id() const { return id_; }
  const LinkSpec& spec() const { return spec_; }
  double bandwidth_gbps() const { return spec_.gbps; }
  /// The bandwidth the topology gave the link (bandwidth_gbps() less when degraded).
  double nominal_gbps() const { return nominal_gbps_; }
  /// A degraded link (performance fault): from now on it runs at `fraction` (0, 1] of its nominal
  /// bandwidth. Throws std::invalid_argument.
  void set_bandwidth_fraction(double fraction);
  std::uint64_t latency_ps() const { return spec_.latency_ps; }
  /// Serialisation time of `bytes` on this link, in ps.
  std::uint64_t serialize_ps(std::uint64_t bytes) const;

  /// Times of one transfer over this link.
  struct Hop {
    std::uint64_t start_ps = 0;     // head entered the link
    std::uint64_t head_ps = 0;      // head reached the far end
    std::uint64_t tail_ps = 0;      // last byte reached the far end
    std::uint64_t free_ps = 0;      // the link is free again (start + serialisation)
  };
  /// A span of the timeline: consecutive transfers of one tag.
  struct Span {
    std::uint64_t tag = 0, start_ps = 0, end_ps = 0, bytes = 0, busy_ps = 0, queued_ps = 0, transfers = 0;
  };

  /// Reserves the link for `bytes` whose head is ready at `head_ps` and whose tail is available
  /// at `tail_in_ps` (the previous hop's tail, or when the sender's memory read is done).
  /// Returns the hop times; `closed` receives the span of the previous tag when `tag` differs.
  Hop hop(std::uint64_t head_ps, std::uint64_t tail_in_ps, std::uint64_t bytes, std::uint64_t tag,
          std::optional<Span>& closed);
  /// The span in progress (none when the link was never used); resets it.
  std::optional<Span> close_span();

  struct Stats {
    std::uint64_t bytes = 0, transfers = 0, busy_ps = 0, wait_ps = 0;  // wait: queued behind others
  };
  const Stats& stats() const { return stats_; }
  std::uint64_t busy_until_ps() const { return busy_until_ps_; }

 private:
  std::uint32_t id_;
  LinkSpec spec_;
  double nominal_gbps_;
  std::uint64_t busy_until_ps_ = 0;
  Stats stats_;
  std::optional<Span> span_;
};

}  // namespace probelab::chip
