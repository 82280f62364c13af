// How one partition of a distributed simulation meets the others: conservative synchronisation
// in windows (the way SST and other parallel discrete-event simulators do it).
//
// Every partition simulates its chips in its own SystemC kernel. Between windows it reports when
// its next event is due, whether its host programs are done, and the messages whose next hop
// belongs to another partition (network.h: handed over at least one lookahead before they are
// due); it gets back the messages for its own links and the end of the next window. The window
// starts at the earliest event of any partition (so idle stretches are skipped) and lasts one
// lookahead — the smallest latency of a link between two partitions — so no message can be due
// inside the window it was sent in. A coordinator (sim/run/partition_run.h) computes windows from
// all reports; the same coordinator decides when the run is over.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "chip_model/collective/message.h"

namespace probelab::sim {

inline constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

struct WindowReport {
  std::uint64_t next_ps = kNever;   // earliest pending event (kernel or network), kNever: none
  bool hosts_done = false;          // every local host program returned
  std::uint64_t finish_ps = 0;      // when the last local host program returned (hosts_done)
  bool failed = false;              // a local host program failed (the kernel stopped), not by a timeout
  bool timed_out = false;           // a local host's synchronize timed out (a hang, job_hang.h)
  std::uint64_t timeout_ps = kNever;  // when the first local one did
  std::string running;              // " host3 host5": local host programs still running
  std::string waiting;              // "; r5 waits for r4 ...": collective waits (deadlock message)
  std::vector<std::pair<std::uint32_t, chip::Message>> outgoing;  // (process, message)
};

struct WindowGrant {
  bool stop = false;                // the run is over (done, failed or deadlocked)
  std::uint64_t until_ps = 0;       // run every event before this time
  std::uint64_t end_ps = 0;         // stop: when the last host program of the job returned; a
                                    // deadlock after a timeout: when the job's first host timed out
  std::string error;                // stop: why the run could not finish ("" when it did or hung)
  bool deadlock = false;            // stop: the job hung (a host timed out, or nothing was pending while one ran)
  std::vector<chip::Message> incoming;
};

class PartitionLink {
 public:
  virtual ~PartitionLink() = default;
  virtual std::uint32_t process() const = 0;
  virtual std::uint32_t processes() const = 0;
  /// Blocks until every partition reported; returns this partition's grant.
  virtual WindowGrant exchange(WindowReport report) = 0;
};

/// The coordinator's rule: the grants for one round of reports (indexed by process), given the
/// lookahead between partitions and the network's cell (chip::Network: its events are processed
/// cell by cell). Messages are routed to their process; the window starts at the earliest
/// `next_ps` or message time and ends at window_end(). Stops when every partition's hosts are done
/// (end = latest finish), when one failed, or when nothing is pending anywhere while a host still
/// runs (a deadlock).
std::vector<WindowGrant> decide_window(std::vector<WindowReport> reports, std::uint64_t lookahead_ps,
                                       std::uint64_t cell_ps);
/// End of a window from `next_ps`: the last cell boundary at or before next + lookahead (which
/// is past next when lookahead >= cell), so that no cell of the network is cut by a window and
/// each event is processed when one process would process it; next + lookahead without cells.
std::uint64_t window_end(std::uint64_t next_ps, std::uint64_t lookahead_ps, std::uint64_t cell_ps);

}  // namespace probelab::sim
