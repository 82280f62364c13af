#include "chip_model/collective/link.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "chip_model/clock.h"
#include "chip_model/trace.h"

namespace probelab::chip {

Link::Link(sc_core::sc_module_name name, std::uint32_t src, std::uint32_t dst, double bandwidth_gbps,
           std::uint64_t latency_ps, Trace* trace)
    : sc_core::sc_module(name), src_(src), dst_(dst), gbps_(bandwidth_gbps), nominal_gbps_(bandwidth_gbps),
      latency_ps_(latency_ps),
      trace_(trace) {
  if (!(bandwidth_gbps > 0))
    throw std::invalid_argument(fmt::format("{}: link bandwidth must be > 0 GB/s, got {}", this->name(), bandwidth_gbps));
}

void Link::set_bandwidth_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw std::invalid_argument(fmt::format("{}: link bandwidth fraction must be in (0, 1], got {}", name(), fraction));
  gbps_ = nominal_gbps_ * fraction;
}

std::uint64_t Link::serialize_ps(std::uint64_t bytes) const { return transfer_ps(bytes, gbps_); }

std::uint64_t Link::reserve(std::uint64_t ready_ps, std::uint64_t bytes) {
  const std::uint64_t start = std::max(ready_ps, busy_until_ps_);
  const std::uint64_t ser = serialize_ps(bytes);
  busy_until_ps_ = start + ser;
  stats_.bytes += bytes;
  stats_.transfers += 1;
  stats_.busy_ps += ser;
  stats_.wait_ps += start - ready_ps;
  if (trace_ && trace_->enabled())
  {
    trace_->complete(src_, fmt::format("link->r{}", dst_), "xfer", "link", start, ser,
                     {{"bytes", bytes}, {"queued_ps", start - ready_ps}});
    trace_->rate(src_, "link tx bandwidth", "GB/s", start, ser, bytes);  // all of the chip's links
  }
  return start;
}

RouteTiming route_time(std::span<Link* const> route, std::uint64_t ready_ps, std::uint64_t bytes) {
  if (route.empty()) throw std::invalid_argument("route_time: empty route");
  RouteTiming t;
  std::uint64_t head = ready_ps, tail = 0;
  for (std::size_t i = 0; i < route.size(); ++i) {
    const std::uint64_t start = route[i]->reserve(head, bytes);
    if (i == 0) t.start_ps = start;
    // The tail cannot leave this hop before it arrived from the previous one.
    tail = std::max(start + route[i]->serialize_ps(bytes), tail) + route[i]->latency_ps();
    head = start + route[i]->latency_ps();
  }
  t.head_arrival_ps = head;
  t.arrival_ps = tail;
  return t;
}

}  // namespace probelab::chip
