#include "chip_model/collective/collective_timing.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <tuple>

#include "chip_model/clock.h"
#include "chip_model/hbm.h"

namespace probelab::chip {
namespace {

std::uint64_t hbm_done(Hbm* hbm, std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, bool write) {
  if (hbm == nullptr || bytes == 0) return start_ps;
  return ChipClock::to_ps(hbm->transfer(addr, bytes, ChipClock::from_ps(start_ps), HbmClient::Collective, write));
}

}  // namespace

std::uint64_t mix_seed(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

TimingResult time_schedule(const CollectivePlan& plan, const TimingInput& in, const Router& route) {
  const std::uint32_t n = plan.size();
  auto check = [n](std::size_t size, const char* what) {
    if (size != n) throw std::invalid_argument(std::string("time_schedule: ") + what + " needs one entry per rank");
  };
  check(in.arrival_ps.size(), "arrival_ps");
  check(in.hbm.size(), "hbm");
  check(in.read_addr.size(), "read_addr");
  check(in.write_addr.size(), "write_addr");
  check(in.jitter_ps.size(), "jitter_ps");
  check(in.jitter_seed.size(), "jitter_seed");

  // Jitter of every transfer, drawn in plan order per receiver.
  std::vector<std::mt19937_64> rng;
  for (std::uint32_t p = 0; p < n; ++p) rng.emplace_back(in.jitter_seed[p]);
  std::vector<std::vector<std::uint64_t>> jitter(plan.steps.size());
  for (std::size_t s = 0; s < plan.steps.size(); ++s)
    for (const auto& t : plan.steps[s].transfers) {
      const std::uint64_t j = in.jitter_ps[t.dst];
      jitter[s].push_back(j == 0 ? 0 : rng[t.dst]() % (j + 1));
    }

  TimingResult r;
  r.done_ps = in.arrival_ps;
  r.incoming.resize(n);
  std::vector<std::uint64_t> ready = in.arrival_ps;
  for (std::size_t s = 0; s < plan.steps.size(); ++s) {
    const auto& transfers = plan.steps[s].transfers;
    std::vector<std::tuple<std::uint64_t, std::uint32_t, std::uint32_t, std::size_t>> order;
    for (std::size_t i = 0; i < transfers.size(); ++i) {
      const auto& t = transfers[i];
      order.emplace_back(std::max(ready[t.src], in.arrival_ps[t.dst]), t.src, t.dst, i);
    }
    std::sort(order.begin(), order.end());
    std::vector<std::uint64_t> next = ready;
    std::uint64_t step_end = 0;
    for (const auto& [start, src, dst, i] : order) {
      const auto& t = transfers[i];
      const std::uint64_t bytes = plan.wire_bytes(t);
      const auto links = route(plan.group[src], plan.group[dst]);
      const RouteTiming rt = route_time(links, start, bytes);
      const std::uint64_t path_latency = rt.head_arrival_ps - rt.start_ps;
      const std::uint64_t read = hbm_done(in.hbm[src], in.read_addr[src], bytes, rt.start_ps, false);
      std::uint64_t landed = std::max(rt.arrival_ps, read + path_latency);
      landed = std::max(landed, hbm_done(in.hbm[dst], in.write_addr[dst], bytes, rt.head_arrival_ps, true));
      if (t.partial)
        landed = std::max(landed, hbm_done(in.hbm[dst], in.write_addr[dst], bytes, rt.head_arrival_ps, false));
      landed += jitter[s][i];
      next[dst] = std::max(next[dst], landed);
      r.done_ps[src] = std::max(r.done_ps[src], rt.start_ps + links.front()->serialize_ps(bytes));
      r.incoming[dst].push_back({src, static_cast<std::uint32_t>(s), rt.start_ps, landed});
      step_end = std::max(step_end, landed);
    }
    ready = std::move(next);
    r.step_end_ps.push_back(step_end);
  }
  for (std::uint32_t p = 0; p < n; ++p) {
    r.done_ps[p] = std::max(r.done_ps[p], ready[p]);
    std::stable_sort(r.incoming[p].begin(), r.incoming[p].end(), [](const Landing& a, const Landing& b) {
      return std::tie(a.landed_ps, a.src) < std::tie(b.landed_ps, b.src);
    });
  }
  return r;
}

std::vector<std::uint32_t> arrival_order(const TimingResult& t, std::uint32_t position) {
  std::vector<std::uint32_t> order{position};
  for (const auto& l : t.incoming.at(position))
    if (std::find(order.begin(), order.end(), l.src) == order.end()) order.push_back(l.src);
  // Positions that sent nothing here (not a Direct schedule) follow in group order.
  for (std::uint32_t p = 0; p < t.incoming.size(); ++p)
    if (std::find(order.begin(), order.end(), p) == order.end()) order.push_back(p);
  return order;
}

}  // namespace probelab::chip
