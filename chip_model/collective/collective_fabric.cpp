#include "chip_model/collective/collective_fabric.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/chip.h"
#include "chip_model/clock.h"
#include "chip_model/collective/collective_math.h"
#include "chip_model/collective/collective_timing.h"

namespace probelab::chip {

std::string_view topology_name(Topology t) { return t == Topology::Ring ? "ring" : "full_mesh"; }

Topology parse_topology(std::string_view s) {
  if (s == "full_mesh") return Topology::FullMesh;
  if (s == "ring") return Topology::Ring;
  throw ConfigError(fmt::format("topology: unknown value '{}', expected full_mesh or ring", s));
}

FabricConfig FabricConfig::from_chip_config(const ChipConfig& cfg, std::uint32_t num_chips) {
  FabricConfig f;
  f.link_bandwidth_gbps = cfg.link_bandwidth_gbps;
  f.link_latency_ns = cfg.link_latency_ns;
  f.topology = cfg.link_count + 1 >= num_chips ? Topology::FullMesh : Topology::Ring;
  return f;
}

struct CollectiveFabric::Pending {
  std::vector<std::uint16_t> group;
  std::vector<std::optional<CollectiveJoin>> members;  // by position
  std::vector<std::shared_ptr<CollectiveTicket>> tickets;
  std::uint32_t joined = 0;
};

CollectiveFabric::CollectiveFabric(sc_core::sc_module_name name, std::uint32_t num_chips,
                                   const FabricConfig& cfg, Trace* trace)
    : sc_core::sc_module(name), cfg_(cfg), trace_(trace) {
  if (num_chips == 0 || num_chips > static_cast<std::uint32_t>(spec::kMaxCollectiveRanks))
    throw ConfigError(fmt::format("{}: {} chips, expected 1..{}", this->name(), num_chips, spec::kMaxCollectiveRanks));
  if (!(cfg.link_bandwidth_gbps > 0))
    throw ConfigError(fmt::format("link_bandwidth_gbps: must be > 0, got {}", cfg.link_bandwidth_gbps));
  for (std::uint32_t r = 0; r < num_chips; ++r)
    engines_.push_back(std::make_unique<CollectiveEngine>(fmt::format("engine_r{}", r).c_str(), r, *this));
  const std::uint64_t latency_ps = std::uint64_t{cfg.link_latency_ns} * 1000;
  auto add = [&](std::uint32_t a, std::uint32_t b) {
    if (a == b || links_.count({a, b})) return;
    links_[{a, b}] = std::make_unique<Link>(fmt::format("link_r{}_r{}", a, b).c_str(), a, b,
                                            cfg.link_bandwidth_gbps, latency_ps, trace);
  };
  for (std::uint32_t a = 0; a < num_chips; ++a) {
    if (cfg.topology == Topology::FullMesh) {
      for (std::uint32_t b = 0; b < num_chips; ++b) add(a, b);
    } else {
      add(a, (a + 1) % num_chips);
      add((a + 1) % num_chips, a);
    }
  }
}

CollectiveFabric::~CollectiveFabric() = default;

void CollectiveFabric::attach(Chip& chip) {
  chip.set_collective_handler(&engine(chip.rank()));
  chips_.push_back(&chip);
}

void CollectiveFabric::start_of_simulation() {
  for (Chip* c : chips_)
    for (const auto& [dst, fraction] : c->perf_faults().link_fraction) {
      auto it = links_.find({c->rank(), dst});
      if (it == links_.end())
        throw std::invalid_argument(fmt::format("{}: a degraded link r{} -> r{}, but the {} topology has no such link",
                                                name(), c->rank(), dst,
                                                cfg_.topology == Topology::Ring ? "ring" : "full-mesh"));
      it->second->set_bandwidth_fraction(fraction);
    }
}

std::vector<Link*> CollectiveFabric::route(std::uint32_t src, std::uint32_t dst) const {
  const std::uint32_t n = size();
  if (src >= n || dst >= n || src == dst)
    throw std::out_of_range(fmt::format("{}: no route from r{} to r{}", name(), src, dst));
  if (cfg_.topology == Topology::FullMesh) return {links_.at({src, dst}).get()};
  const std::uint32_t up = (dst + n - src) % n;  // hops going to increasing ranks
  const bool increasing = up <= n - up;
  std::vector<Link*> r;
  for (std::uint32_t at = src; at != dst;) {
    const std::uint32_t next = increasing ? (at + 1) % n : (at + n - 1) % n;
    r.push_back(links_.at({at, next}).get());
    at = next;
  }
  return r;
}

std::vector<const Link*> CollectiveFabric::links() const {
  std::vector<const Link*> out;
  for (const auto& [key, link] : links_) out.push_back(link.get());
  return out;
}

std::vector<std::string> CollectiveFabric::pending() const {
  std::vector<std::string> out;
  for (const auto& [key, p] : pending_) {
    std::string missing;
    for (std::size_t i = 0; i < p->group.size(); ++i)
      if (!p->members[i]) missing += fmt::format("{}r{}", missing.empty() ? "" : ", ", p->group[i]);
    out.push_back(fmt::format("comm {} #{}: waiting for {}", key.first, key.second, missing));
  }
  return out;
}

std::shared_ptr<CollectiveTicket> CollectiveFabric::join(CollectiveJoin j, std::uint32_t seq) {
  const std::pair<std::uint32_t, std::uint32_t> key{j.args.comm_id, seq};
  const PlanRequest req = plan_request_from_args(j.args, size());
  auto& slot = pending_[key];
  if (!slot) {
    slot = std::make_unique<Pending>();
    slot->group = req.group;
    slot->members.resize(req.group.size());
  } else if (slot->group != req.group) {
    throw std::runtime_error(fmt::format("collective comm {} #{}: r{} names a different group than its peers",
                                         key.first, key.second, j.rank));
  }
  Pending& p = *slot;
  const auto it = std::find(p.group.begin(), p.group.end(), j.rank);
  if (it == p.group.end())
    throw std::runtime_error(fmt::format("collective comm {} #{}: r{} is not in the group", key.first, key.second, j.rank));
  const auto pos = static_cast<std::uint32_t>(it - p.group.begin());
  auto ticket = std::make_shared<CollectiveTicket>();
  ticket->position = pos;
  p.members[pos] = std::move(j);
  p.tickets.resize(p.group.size());
  p.tickets[pos] = ticket;
  if (++p.joined == p.group.size()) {
    auto done = std::move(slot);
    pending_.erase(key);
    resolve(key, *done);
  }
  return ticket;
}

void CollectiveFabric::resolve(std::pair<std::uint32_t, std::uint32_t> key, Pending& pc) {
  auto fail = [&](const std::string& what) {
    throw std::runtime_error(fmt::format("collective comm {} #{}: {}", key.first, key.second, what));
  };
  const std::uint32_t n = static_cast<std::uint32_t>(pc.group.size());
  std::vector<CollectiveJoin*> m;
  for (auto& x : pc.members) m.push_back(&*x);
  PlanRequest req = plan_request_from_args(m[0]->args, size());
  std::vector<std::uint32_t> algo(n);
  for (std::uint32_t p = 0; p < n; ++p) {
    const auto& a = m[p]->args;
    const auto& a0 = m[0]->args;
    if (a.op != a0.op || a.count != a0.count || a.input.dtype != a0.input.dtype || a.root != a0.root ||
        a.reduction != a0.reduction)
      fail(fmt::format("r{} and r{} disagree on op, count, dtype, root or reduction", pc.group[0], pc.group[p]));
    const auto& o = m[p]->override_;
    algo[p] = o && o->algorithm ? *o->algorithm : a.algorithm;
    if (algo[p] > 2) fail(fmt::format("r{}: algorithm {} is not ring(0), tree(1) or direct(2)", pc.group[p], algo[p]));
    if (algo[p] != algo[0])
      fail(fmt::format("ranks disagree on the algorithm: r{} {}, r{} {} (force it on every rank)", pc.group[0],
                       spec::collective_algo_name(static_cast<spec::CollectiveAlgo>(algo[0])), pc.group[p],
                       spec::collective_algo_name(static_cast<spec::CollectiveAlgo>(algo[p]))));
    req.rank_acc_dtypes.push_back(o && o->acc_dtype ? *o->acc_dtype : static_cast<graph::DType>(a.acc_dtype));
  }
  req.algo = static_cast<spec::CollectiveAlgo>(algo[0]);
  req.acc_dtype = req.rank_acc_dtypes[0];

  CollectivePlan plan;
  try {
    plan = build_plan(req);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  TimingInput ti;
  std::uint64_t seed_report = 0;
  for (std::uint32_t p = 0; p < n; ++p) {
    ti.arrival_ps.push_back(m[p]->arrival_ps);
    ti.hbm.push_back(m[p]->hbm);
    ti.read_addr.push_back(m[p]->args.input.addr);
    ti.write_addr.push_back(m[p]->args.output.addr);
    const auto& o = m[p]->override_;
    ti.jitter_ps.push_back(o ? o->arrival_jitter_ps : 0);
    const std::uint64_t base = o ? o->jitter_seed : 0;
    if (o && o->arrival_jitter_ps) seed_report = base;
    ti.jitter_seed.push_back(mix_seed(base ^ mix_seed((std::uint64_t{key.first} << 32 | key.second) + pc.group[p])));
  }
  const TimingResult tr = time_schedule(plan, ti, [this](std::uint32_t a, std::uint32_t b) { return route(a, b); });

  if (plan.algo == spec::CollectiveAlgo::Direct && plan.reduces()) {
    for (std::uint32_t p = 0; p < n; ++p) {
      const auto& a = m[p]->args;
      const auto& o = m[p]->override_;
      std::vector<std::uint32_t> order;
      try {
        if (o && !o->reduction_order.empty()) {
          for (auto r : o->reduction_order) order.push_back(plan.position_of(r));
        } else if (a.order_mode == static_cast<std::uint8_t>(spec::OrderMode::Explicit)) {
          for (std::uint32_t i = 0; i < n; ++i) order.push_back(plan.position_of(a.order[i]));
        } else if (a.order_mode == static_cast<std::uint8_t>(spec::OrderMode::Arrival)) {
          order = arrival_order(tr, p);
        }
      } catch (const std::invalid_argument& e) {
        fail(fmt::format("reduction order of r{}: {}", pc.group[p], e.what()));
      }
      req.direct_orders.push_back(std::move(order));
    }
    try {
      plan = build_plan(req);
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
  }

  const std::size_t in_bytes = plan.input_count() * graph::dtype_size(plan.data_dtype);
  const std::vector<std::byte> zeros(m[0]->args.op == static_cast<std::uint8_t>(spec::CollectiveOp::Broadcast) ? in_bytes : 0);
  std::vector<std::span<const std::byte>> inputs;
  std::vector<num::Mode> modes;
  for (std::uint32_t p = 0; p < n; ++p) {
    inputs.push_back(m[p]->input.empty() ? std::span<const std::byte>(zeros) : std::span<const std::byte>(m[p]->input));
    modes.push_back(m[p]->mode);
  }
  CollectiveOutcome outcome = execute_plan(plan, inputs, modes);

  auto rec = std::make_shared<CollectiveRecord>();
  rec->comm_id = key.first;
  rec->seq = key.second;
  rec->jitter_seed = seed_report;
  for (std::uint32_t p = 0; p < n; ++p) {
    rec->task_id.push_back(m[p]->task_id);
    rec->arrival_ps.push_back(m[p]->arrival_ps);
    rec->done_ps.push_back(tr.done_ps[p]);
    rec->finish_ps.push_back(tr.done_ps[p]);
    rec->arrival_order.push_back(arrival_order(tr, p));
    rec->flags.push_back(outcome.reports[p].flags);
    rec->overridden.push_back(m[p]->override_ ? 1 : 0);
    auto& t = *pc.tickets[p];
    t.done_ps = tr.done_ps[p];
    t.output = std::move(outcome.outputs[p]);
    t.report = outcome.reports[p];
    t.record = rec;
    t.resolved = true;
  }
  rec->plan = std::move(plan);
  history_.push_back(rec);
  for (auto r : pc.group) engines_.at(r)->wake();
}

void CollectiveFabric::end_of_simulation() {
  for (const auto& line : pending())
    fmt::print(stderr, "[chip.collective] {}: unfinished collective {}\n", name(), line);
}

}  // namespace probelab::chip
