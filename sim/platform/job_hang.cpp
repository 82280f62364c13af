#include "sim/platform/job_hang.h"

#include <algorithm>
#include <tuple>

namespace probelab::sim {

std::optional<JobHang> find_hang(const std::vector<HostEnd>& hosts, std::vector<chip::BlockedCollective> blocked,
                                 bool chip_failed) {
  if (chip_failed || blocked.empty()) return std::nullopt;
  if (std::any_of(hosts.begin(), hosts.end(), [](const HostEnd& h) { return h.failed; })) return std::nullopt;
  JobHang h;
  const HostEnd* first = nullptr;
  for (const HostEnd& e : hosts) {
    if (!e.finished || e.timed_out) h.waiting.push_back(e.rank);
    if (e.timed_out && (!first || std::tie(e.end_ps, e.rank) < std::tie(first->end_ps, first->rank))) first = &e;
    if (e.finished && !e.timed_out) h.time_ps = std::max(h.time_ps, e.end_ps);
  }
  if (h.waiting.empty()) return std::nullopt;
  for (const auto& b : blocked) h.time_ps = std::max(h.time_ps, b.since_ps);
  if (first) {
    h.time_ps = first->end_ps;
    h.noticed_by = first->error;
  }
  std::stable_sort(blocked.begin(), blocked.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  h.blocked = std::move(blocked);
  return h;
}

}  // namespace probelab::sim
