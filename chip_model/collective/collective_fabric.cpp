#include "chip_model/collective/collective_fabric.h"

#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/chip.h"

namespace probelab::chip {

CollectiveFabric::CollectiveFabric(sc_core::sc_module_name name, ClusterTopology topology, Options opts)
    : sc_core::sc_module(name), topo_(std::move(topology)), opts_(opts) {
  network_ = std::make_unique<Network>("network", topo_, opts_.partition, opts_.process, opts_.trace);
  engines_.resize(topo_.ranks());
  for (std::uint32_t r = 0; r < topo_.ranks(); ++r) {
    if (opts_.partition && opts_.partition->of_rank.at(r) != opts_.process) continue;
    engines_[r] = std::make_unique<CollectiveEngine>(fmt::format("engine_r{}", r).c_str(), r, *this);
    network_->attach(r, engines_[r].get());
  }
}

CollectiveFabric::~CollectiveFabric() = default;

CollectiveEngine& CollectiveFabric::engine(std::uint32_t rank) {
  if (!local(rank)) throw std::out_of_range(fmt::format("{}: r{} is not simulated in this partition", name(), rank));
  return *engines_[rank];
}

void CollectiveFabric::attach(Chip& chip) {
  chip.set_collective_handler(&engine(chip.rank()));
  chips_.push_back(&chip);
}

std::size_t CollectiveFabric::first_link(std::uint32_t src, std::uint32_t dst, const char* what) const {
  // A faulty link "src -> dst" is the first link of the route, the one src owns: the HCCS link
  // to a chip of its server (a neighbour on a ring), or its NIC towards another server.
  if (dst >= topo_.ranks() || dst == src)
    throw std::invalid_argument(fmt::format("{}: a {} link r{} -> r{} outside the job of {} chips", name(), what, src, dst,
                                            topo_.ranks()));
  const Route route = topo_.route(src, dst);
  if (topo_.link(route.front()).kind == LinkKind::Hccs && route.size() > 1)
    throw std::invalid_argument(fmt::format("{}: a {} link r{} -> r{}, but the chips are not neighbours on their "
                                            "server's HCCS ring",
                                            name(), what, src, dst));
  return route.front();
}

void CollectiveFabric::start_of_simulation() {
  for (Chip* c : chips_) {
    for (const auto& [dst, fraction] : c->perf_faults().link_fraction)
      network_->degrade(first_link(c->rank(), dst, "degraded"), fraction);
    for (const auto& [dst, cycle] : c->perf_faults().link_down_cycle)
      network_->set_down(first_link(c->rank(), dst, "dead"), c->clock().cycles_to_ps(cycle));
  }
}

std::vector<std::string> CollectiveFabric::pending() const {
  std::vector<std::string> out;
  for (const auto& e : engines_)
    if (e)
      if (auto w = e->waiting(); !w.empty()) out.push_back(std::move(w));
  return out;
}

std::vector<BlockedCollective> CollectiveFabric::blocked() const {
  std::vector<BlockedCollective> out;
  for (const auto& e : engines_)
    if (e)
      for (auto& b : e->blocked()) out.push_back(std::move(b));
  return out;
}

}  // namespace probelab::chip
