#include "sim/platform/partition_link.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

namespace probelab::sim {

std::uint64_t window_end(std::uint64_t next_ps, std::uint64_t lookahead_ps, std::uint64_t cell_ps) {
  if (next_ps >= kNever - lookahead_ps) return kNever;
  const std::uint64_t end = next_ps + lookahead_ps;
  // On a cell boundary at or before next + lookahead (past next: lookahead >= cell).
  if (cell_ps == 0 || lookahead_ps < cell_ps) return end;
  return end - end % cell_ps;
}

std::vector<WindowGrant> decide_window(std::vector<WindowReport> reports, std::uint64_t lookahead_ps,
                                       std::uint64_t cell_ps) {
  const std::size_t k = reports.size();
  std::vector<WindowGrant> grants(k);
  bool all_done = true, failed = false, timed_out = false;
  std::uint64_t next = kNever, finish = 0, timeout = kNever;
  std::string running, waiting;
  for (auto& r : reports) {
    all_done = all_done && r.hosts_done;
    failed = failed || r.failed;
    timed_out = timed_out || r.timed_out;
    timeout = std::min(timeout, r.timeout_ps);
    next = std::min(next, r.next_ps);
    finish = std::max(finish, r.finish_ps);
    running += r.running;
    waiting += r.waiting;
    for (auto& [to, m] : r.outgoing) {
      next = std::min(next, m.head_ps);
      grants.at(to).incoming.push_back(std::move(m));
    }
  }
  for (auto& g : grants)
    std::sort(g.incoming.begin(), g.incoming.end(), [](const chip::Message& a, const chip::Message& b) {
      return std::tie(a.head_ps, a.src, a.seq) < std::tie(b.head_ps, b.src, b.seq);
    });
  const bool stop = failed || timed_out || all_done || next == kNever;
  for (auto& g : grants) {
    g.stop = stop;
    g.end_ps = finish;
    g.until_ps = window_end(next, lookahead_ps, cell_ps);
    // A hang: every partition reports what its ranks are blocked in, or the error below when none is.
    // (a host that timed out has returned: every host may have, all of them by timeouts)
    g.deadlock = stop && !failed && (timed_out || !all_done);
    if (g.deadlock && timed_out) g.end_ps = timeout;
    if (g.deadlock && !timed_out)
      g.error = fmt::format("simulation ended before every host program finished (still running:{}){}", running, waiting);
  }
  return grants;
}

}  // namespace probelab::sim
