#include "chip_model/collective/network.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/clock.h"
#include "chip_model/trace.h"

namespace probelab::chip {

Network::Network(sc_core::sc_module_name name, const ClusterTopology& topo, const PartitionMap* parts,
                 std::uint32_t process, Trace* trace)
    : sc_core::sc_module(name), topo_(topo), parts_(parts), process_(process), trace_(trace),
      receivers_(topo.ranks(), nullptr) {
  SC_HAS_PROCESS(Network);
  links_.reserve(topo.num_links());
  for (std::size_t i = 0; i < topo.num_links(); ++i)
    links_.emplace_back(static_cast<std::uint32_t>(i), topo.link(i));
  lookahead_ps_ = cell_ps(topo);
  SC_METHOD(pump);
  sensitive << wake_;
  dont_initialize();
}

Network::~Network() = default;

std::uint64_t Network::cell_ps(const ClusterTopology& topo) {
  // With an HCCS full mesh a chip's first links (its HCCS links and its NIC) carry only its own
  // messages, which it reserves itself; on an HCCS ring a chip's link also carries messages
  // passing through, so the queued hops must not run ahead of the chip's own sends there.
  if (topo.num_links() == 0 || !topo.hccs_mesh()) return 0;
  std::uint64_t l = topo.link(0).latency_ps;
  for (std::size_t i = 1; i < topo.num_links(); ++i) l = std::min(l, topo.link(i).latency_ps);
  // The longest cell not above l that divides a partition's lookahead: a distributed run's window
  // from a cell boundary then spans whole cells up to the lookahead (windows end on cell boundaries).
  const std::uint64_t x = topo.handoff_latency_ps();
  if (x == 0 || l == 0) return l;
  const std::uint64_t k = (x + l - 1) / l;
  return x % k == 0 ? x / k : l;
}

void Network::attach(std::uint32_t rank, Receiver* r) { receivers_.at(rank) = r; }

void Network::set_down(std::size_t id, std::uint64_t ps) {
  if (down_ps_.empty()) down_ps_.assign(links_.size(), ~std::uint64_t{0});
  down_ps_.at(id) = std::min(down_ps_.at(id), ps);
}

bool Network::lost_on(std::size_t id, const Message& m, std::uint64_t head_ps) {
  if (down_ps_.empty() || head_ps < down_ps_[id]) return false;
  lost_.push_back({id, m.src, m.dst, m.key, head_ps});
  return true;
}

bool Network::owns(std::size_t link) const { return !parts_ || parts_->of_link(topo_, link) == process_; }

std::uint64_t Network::send(Message&& m, std::uint64_t ready_ps, std::uint64_t data_ps) {
  const Route route = topo_.route(m.src, m.dst);
  m.hop = 0;
  m.head_ps = ready_ps;
  m.tail_ps = data_ps;
  Link& first = links_.at(route.front());
  std::optional<Link::Span> closed;
  const Link::Hop h = first.hop(m.head_ps, m.tail_ps, m.wire_bytes, m.tag(), closed);
  traced_hop(route.front(), h, m.wire_bytes, closed);
  if (lost_on(route.front(), m, m.head_ps)) return h.free_ps;  // sent into a dead link
  m.head_ps = h.head_ps;
  m.tail_ps = h.tail_ps;
  m.hop = 1;
  const auto next = route.size() == 1 ? std::nullopt : std::optional<std::size_t>(route[1]);
  onward(std::move(m), next);
  return h.free_ps;
}

void Network::inject(Message m) {
  const Route route = topo_.route(m.src, m.dst);
  if (m.hop == 0 || m.hop >= route.size() || !owns(route[m.hop]))
    throw std::logic_error(fmt::format("{}: message r{} -> r{} hop {} is not owned by partition {}", name(), m.src,
                                       m.dst, m.hop, process_));
  const std::uint64_t at = m.head_ps;
  queue(at, false, std::move(m));
}

void Network::queue(std::uint64_t time, bool deliver, Message&& m) {
  const std::uint64_t now = pumping_ ? pump_now_ps_ : ChipClock::to_ps(sc_core::sc_time_stamp());
  if (time < now)
    throw std::logic_error(fmt::format("{}: message r{} -> r{} due at {} ps, the partition is at {} ps (lookahead "
                                       "violated)",
                                       name(), m.src, m.dst, time, now));
  // The earliest pending notification wins (SystemC keeps the earlier of two); pump() renews it.
  const std::uint64_t wake = std::max(now, cell_start(time));
  if (!pumping_ && wake < wake_ps_) {
    wake_.notify(ChipClock::from_ps(wake - now));
    wake_ps_ = wake;
  }
  Event e{time, m.seq, m.src, 0, m.hop, deliver};
  if (free_.empty()) {
    e.slot = static_cast<std::uint32_t>(slab_.size());
    slab_.push_back(std::move(m));
  } else {
    e.slot = free_.back();
    free_.pop_back();
    slab_[e.slot] = std::move(m);
  }
  push_event(e);
}

void Network::push_event(const Event& e) {
  const std::uint64_t cell = cell_start(e.time);
  if ((batch_next_ < batch_.size() || !late_.empty()) && cell <= batch_cell_) {
    late_.push_back(e);
    std::push_heap(late_.begin(), late_.end(), Later{});
    return;
  }
  if (!push_events_ || push_cell_ != cell) {
    auto it = cells_.find(cell);
    if (it == cells_.end()) {
      if (spare_cells_.empty()) {
        it = cells_.try_emplace(cell).first;
      } else {
        Cells::node_type node = std::move(spare_cells_.back());
        spare_cells_.pop_back();
        node.key() = cell;
        it = cells_.insert(std::move(node)).position;
      }
    }
    push_cell_ = cell;
    push_events_ = &it->second;
  }
  push_events_->push_back(e);
}

bool Network::next_cell() {
  if (cells_.empty()) return false;
  Cells::node_type node = cells_.extract(cells_.begin());
  if (push_events_ && push_cell_ == node.key()) push_events_ = nullptr;
  batch_.clear();
  batch_.swap(node.mapped());
  batch_cell_ = node.key();
  batch_next_ = 0;
  spare_cells_.push_back(std::move(node));
  if (!std::is_sorted(batch_.begin(), batch_.end(), Earlier{})) std::sort(batch_.begin(), batch_.end(), Earlier{});
  return true;
}

void Network::take_hop(Message&& m) {
  const Route route = topo_.route(m.src, m.dst);
  const std::uint32_t id = route.at(m.hop);
  std::optional<Link::Span> closed;
  const Link::Hop h = links_.at(id).hop(m.head_ps, m.tail_ps, m.wire_bytes, m.tag(), closed);
  traced_hop(id, h, m.wire_bytes, closed);
  if (lost_on(id, m, m.head_ps)) return;
  m.head_ps = h.head_ps;
  m.tail_ps = h.tail_ps;
  ++m.hop;
  const auto next = m.hop == route.size() ? std::nullopt : std::optional<std::size_t>(route[m.hop]);
  onward(std::move(m), next);
}

void Network::onward(Message&& m, std::optional<std::size_t> next_link) {
  if (!next_link) {
    const std::uint64_t at = m.tail_ps;
    queue(at, true, std::move(m));  // delivered when its tail arrives
  } else if (owns(*next_link)) {
    const std::uint64_t at = m.head_ps;
    queue(at, false, std::move(m));  // its next hop starts when the head arrives
  } else {
    const std::uint32_t to = parts_->of_link(topo_, *next_link);
    boundary_->forward(std::move(m), to);
  }
}

void Network::pump() {
  const std::uint64_t now = ChipClock::to_ps(sc_core::sc_time_stamp());
  pump_now_ps_ = now;
  // Everything in the current lookahead cell is processed now (above); events at `now` always.
  const std::uint64_t limit = std::min(horizon_ps_, cell_start(now) + lookahead_ps_);
  wake_ps_ = ~std::uint64_t{0};
  // Hops and deliveries may queue further events (a delivery runs the receiver's program on);
  // those are notified once, below.
  pumping_ = true;
  try {
    while (const Event* next = front_event()) {
      if (next->time > now && next->time >= limit) break;
      const Event e = *next;
      pop_event();
      if (!e.deliver) {
        Message m = std::move(slab_[e.slot]);
        free_.push_back(e.slot);
        take_hop(std::move(m));
        continue;
      }
      // Handed over in the slab (growing the slab while the receiver runs moves no message); the
      // slot is free once it returns.
      Message& m = slab_[e.slot];
      Receiver* r = receivers_.at(m.dst);
      if (!r) throw std::logic_error(fmt::format("{}: message for r{}, which is not simulated here", name(), m.dst));
      r->deliver(std::move(m));
      free_.push_back(e.slot);
    }
  } catch (...) {
    pumping_ = false;
    throw;
  }
  pumping_ = false;
  if (const Event* next = front_event()) {
    wake_ps_ = std::max(now, cell_start(next->time));
    wake_.notify(ChipClock::from_ps(wake_ps_ - now));
  }
}

std::optional<std::uint64_t> Network::next_event_ps() const {
  if (batch_next_ < batch_.size() && !late_.empty()) return std::min(batch_[batch_next_].time, late_.front().time);
  if (batch_next_ < batch_.size()) return batch_[batch_next_].time;
  if (!late_.empty()) return late_.front().time;
  if (cells_.empty()) return std::nullopt;
  const std::vector<Event>& first = cells_.begin()->second;
  return std::min_element(first.begin(), first.end(), Earlier{})->time;
}

void Network::traced_hop(std::size_t link, const Link::Hop& h, std::uint64_t bytes,
                         const std::optional<Link::Span>& closed) {
  if (!trace_ || !trace_->enabled()) return;
  if (closed) trace_span(link, *closed);
  // Per transfer, not per span: the counter shows how the bytes of a span spread over time.
  trace_->rate(topo_.trace_pid(link), "link tx bandwidth", "GB/s", h.start_ps, h.free_ps - h.start_ps, bytes);
}

void Network::trace_span(std::size_t link, const Link::Span& s) {
  if (!trace_ || !trace_->enabled()) return;
  trace_->complete(topo_.trace_pid(link), topo_.trace_track(link), "xfer", "link", s.start_ps, s.end_ps - s.start_ps,
                   {{"comm", s.tag >> 32},
                    {"seq", s.tag & 0xffffffffu},
                    {"bytes", s.bytes},
                    {"transfers", s.transfers},
                    {"busy_ps", s.busy_ps},
                    {"queued_ps", s.queued_ps}});
}

void Network::flush_trace() {
  for (std::size_t i = 0; i < links_.size(); ++i)
    if (auto s = links_[i].close_span()) trace_span(i, *s);
}

}  // namespace probelab::chip
