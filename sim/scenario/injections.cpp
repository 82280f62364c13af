#include "sim/scenario/injections.h"

#include <memory>
#include <vector>

#include <fmt/format.h>

#include "chip_model/collective/cluster_topology.h"
#include "injectors/injection_set.h"
#include "injectors/params.h"

namespace probelab::sim {

namespace {

std::string where_of(const InjectionSpec& spec, std::size_t i) {
  const YAML::Mark m = spec.source.mark();
  if (m.is_null()) return fmt::format("{}: injections[{}] ({})", spec.source.file(), i, spec.kind);
  return fmt::format("{}:{}:{}: injections[{}] ({})", spec.source.file(), m.line + 1, m.column + 1, i, spec.kind);
}

}  // namespace

std::function<inject::InjectionEnv::FirstLink(std::uint32_t, std::uint32_t)> cluster_first_link(const PreparedRun& run) {
  const auto ranks = static_cast<std::uint32_t>(run.scenario.ranks);
  if (ranks < 2) return nullptr;
  auto topo = std::make_shared<const chip::ClusterTopology>(run.chip, run.cluster, ranks);
  return [topo](std::uint32_t src, std::uint32_t dst) {
    const chip::Route route = topo->route(src, dst);
    const chip::LinkSpec& first = topo->link(route.front());
    return inject::InjectionEnv::FirstLink{topo->link_name(route.front()), first.kind != chip::LinkKind::Hccs || route.size() == 1};
  };
}

namespace {

inject::InjectionEnv env_of(const PreparedRun& run, const graph::Graph& executed) {
  inject::InjectionEnv env;
  env.executed = &executed;
  env.ranks = static_cast<std::uint32_t>(run.scenario.ranks);
  env.steps = static_cast<std::uint32_t>(run.scenario.steps);
  env.seed = run.scenario.seed;
  env.hbm_channels = run.chip.hbm_channels;
  env.cores = run.chip.num_cores;
  env.vector_lanes = run.chip.vector_lanes();
  env.first_link = cluster_first_link(run);
  return env;
}

class Set final : public InjectionSet {
 public:
  Set(const PreparedRun& run, const graph::Graph& executed, Placement placement) {
    inject::InjectionEnv env = env_of(run, executed);
    env.placement = std::move(placement);
    std::vector<YAML::Node> nodes;
    std::vector<std::string> where;
    for (std::size_t i = 0; i < run.scenario.injections.size(); ++i) {
      nodes.push_back(run.scenario.injections[i].params);
      where.push_back(where_of(run.scenario.injections[i], i));
    }
    set_ = std::make_unique<inject::InjectionSet>(nodes, where, env);
  }
  chip::FaultHooks* hooks() override { return set_->empty() ? nullptr : set_.get(); }
  nlohmann::json report() const override { return set_->report(); }
  nlohmann::json partial_report() const override { return set_->partial_report(); }

 private:
  std::unique_ptr<inject::InjectionSet> set_;
};

}  // namespace

void validate_injections(const PreparedRun& run) {
  const graph::Graph& executed = run.workload.snapshots.fused;
  const inject::InjectionEnv env = env_of(run, executed);
  for (std::size_t i = 0; i < run.scenario.injections.size(); ++i) {
    const InjectionSpec& spec = run.scenario.injections[i];
    const std::string where = where_of(spec, i);
    try {
      inject::InjectorRegistry::instance().create(spec.params, where, env);
    } catch (const inject::InjectorError& e) {
      const YAML::Mark m = spec.source.mark();
      std::string why = e.what();  // "<where>: key 'k': ...": the place is said once, by this error
      if (why.starts_with(where + ": ")) why.erase(0, where.size() + 2);
      if (!e.key().empty() && spec.source.overridden(e.key())) spec.source.fail_at(e.key(), "a valid injection descriptor", why);
      throw ScenarioError(spec.source.file(), m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1,
                          fmt::format("injections[{}]", i), "a valid injection descriptor", why);
    }
  }
}

nlohmann::json merge_injection_reports(const std::vector<nlohmann::json>& partials) {
  return inject::InjectionSet::merge_reports(partials);
}

std::unique_ptr<InjectionSet> make_injections(const PreparedRun& run, const graph::Graph& executed,
                                              Placement placement) {
  if (run.scenario.injections.empty()) return nullptr;
  return std::make_unique<Set>(run, executed, std::move(placement));
}

}  // namespace probelab::sim
