// One direction of an inter-chip link (HCCS-like): a serial pipe with a bandwidth and a latency.
//
// Timing model (reservation, served in the order requests are made, each no earlier than its
// own ready time, like the HBM model): a transfer of B bytes whose head is ready at t starts at
// max(t, busy_until), occupies the link for B / bandwidth (rounded up to ps), and its last byte
// arrives `latency` after it leaves. Two transfers on one link at the same time therefore take
// twice as long; transfers on different links do not interact. Multi-hop routes (ring topology)
// are cut-through: the head enters hop i+1 one latency after it entered hop i (see route_time()).
// Defaults come from ChipConfig (link_bandwidth_gbps, link_latency_ns).
#pragma once

#include <cstdint>
#include <span>

#include <systemc>

namespace probelab::chip {

class Trace;

class Link : public sc_core::sc_module {
 public:
  Link(sc_core::sc_module_name name, std::uint32_t src, std::uint32_t dst, double bandwidth_gbps,
       std::uint64_t latency_ps, Trace* trace = nullptr);

  std::uint32_t src() const { return src_; }
  std::uint32_t dst() const { return dst_; }
  double bandwidth_gbps() const { return gbps_; }
  std::uint64_t latency_ps() const { return latency_ps_; }
  /// A degraded link (performance fault): from now on it runs at `fraction` (0, 1] of the
  /// bandwidth it was built with. Throws std::invalid_argument.
  void set_bandwidth_fraction(double fraction);
  /// Serialisation time of `bytes` on this link, in ps.
  std::uint64_t serialize_ps(std::uint64_t bytes) const;

  /// Reserves the link for `bytes` whose head is ready at absolute `ready_ps`; returns the start
  /// time (>= ready_ps). The link is busy until start + serialize_ps(bytes).
  std::uint64_t reserve(std::uint64_t ready_ps, std::uint64_t bytes);

  struct Stats {
    std::uint64_t bytes = 0, transfers = 0, busy_ps = 0, wait_ps = 0;  // wait: queued behind others
  };
  const Stats& stats() const { return stats_; }
  std::uint64_t busy_until_ps() const { return busy_until_ps_; }

 private:
  std::uint32_t src_, dst_;
  double gbps_, nominal_gbps_;
  std::uint64_t latency_ps_;
  Trace* trace_;
  std::uint64_t busy_until_ps_ = 0;
  Stats stats_;
};

/// Times of one transfer over a route of links (cut-through).
struct RouteTiming {
  std::uint64_t start_ps = 0;        // head entered the first link
  std::uint64_t arrival_ps = 0;      // last byte arrived at the destination
  std::uint64_t head_arrival_ps = 0; // first byte arrived at the destination
};

/// Reserves every link of `route` (in order) for `bytes` ready at `ready_ps`.
RouteTiming route_time(std::span<Link* const> route, std::uint64_t ready_ps, std::uint64_t bytes);

}  // namespace probelab::chip
