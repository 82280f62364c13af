// A job hang: the simulation stopped making progress while ranks were blocked inside collectives,
// because their programs went apart (a rank skipped or reordered a collective, e.g. a dynamic
// loss scaler whose skip decision is not all-reduced) or a peer finished or waits elsewhere. A
// real cluster shows this as a hang until the driver's or the collective library's timeout; the
// simulation notices it at the first host's synchronize timeout (HostCosts::sync_timeout_ns) or
// when nothing is left to simulate, and names what every rank was blocked in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chip_model/collective/collective_engine.h"

namespace probelab::sim {

/// How one host program ended (or did not).
struct HostEnd {
  std::uint32_t rank = 0;
  bool finished = false;    // its program returned or failed
  bool timed_out = false;   // it failed with the driver's synchronize timeout (SyncTimeout)
  bool failed = false;      // it failed otherwise
  std::uint64_t end_ps = 0; // when it returned or failed
  std::string error;        // the failure's message
};

/// A message lost on a dead link (chip::Network::set_down): what its receiver waits for.
struct LostMessage {
  std::string link;  // the topology's name of the link
  std::uint32_t src = 0, dst = 0, comm = 0, seq = 0;
  std::uint64_t at_ps = 0;
};

struct JobHang {
  std::uint64_t time_ps = 0;                    // the first timeout, else the last progress
  std::string noticed_by;                       // the first timeout's message ("" : no event was left)
  std::vector<std::uint32_t> waiting;           // ranks whose programs did not complete
  std::vector<chip::BlockedCollective> blocked; // what the ranks are blocked in, by rank
  std::vector<LostMessage> lost;                // messages lost on dead links, in the order sent
};

/// A hang when some ranks are blocked in collectives and nothing else failed (no chip error, no
/// host failure other than a timeout); nullopt otherwise.
std::optional<JobHang> find_hang(const std::vector<HostEnd>& hosts, std::vector<chip::BlockedCollective> blocked,
                                 bool chip_failed);

}  // namespace probelab::sim
