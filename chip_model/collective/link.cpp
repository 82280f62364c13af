#include "chip_model/collective/link.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/clock.h"

namespace probelab::chip {

void Link::set_bandwidth_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw std::invalid_argument(fmt::format("link {}: bandwidth fraction must be in (0, 1], got {}", id_, fraction));
  spec_.gbps = nominal_gbps_ * fraction;
}

std::uint64_t Link::serialize_ps(std::uint64_t bytes) const { return transfer_ps(bytes, spec_.gbps); }

Link::Hop Link::hop(std::uint64_t head_ps, std::uint64_t tail_in_ps, std::uint64_t bytes, std::uint64_t tag,
                    std::optional<Span>& closed) {
  Hop h;
  h.start_ps = std::max(head_ps, busy_until_ps_);
  const std::uint64_t ser = serialize_ps(bytes);
  h.free_ps = h.start_ps + ser;
  h.head_ps = h.start_ps + spec_.latency_ps;
  h.tail_ps = std::max(h.free_ps, tail_in_ps) + spec_.latency_ps;
  busy_until_ps_ = h.free_ps;
  stats_.bytes += bytes;
  stats_.transfers += 1;
  stats_.busy_ps += ser;
  stats_.wait_ps += h.start_ps - head_ps;
  if (span_ && span_->tag != tag) closed = close_span();
  if (!span_) span_ = Span{tag, h.start_ps, h.free_ps, 0, 0, 0, 0};
  span_->start_ps = std::min(span_->start_ps, h.start_ps);
  span_->end_ps = std::max(span_->end_ps, h.free_ps);
  span_->bytes += bytes;
  span_->busy_ps += ser;
  span_->queued_ps += h.start_ps - head_ps;
  span_->transfers += 1;
  return h;
}

std::optional<Link::Span> Link::close_span() {
  std::optional<Span> s = span_;
  span_.reset();
  return s;
}

}  // namespace probelab::chip
