#include "sim/scenario/injections.h"

#include <fmt/format.h>

#include "injectors/injection_set.h"
#include "injectors/params.h"

namespace probelab::sim {

namespace {

std::string where_of(const InjectionSpec& spec, std::size_t i) {
  const YAML::Mark m = spec.source.mark();
  if (m.is_null()) return fmt::format("{}: injections[{}] ({})", spec.source.file(), i, spec.kind);
  return fmt::format("{}:{}:{}: injections[{}] ({})", spec.source.file(), m.line + 1, m.column + 1, i, spec.kind);
}

inject::InjectionEnv env_of(const PreparedRun& run, const graph::Graph& executed) {
  inject::InjectionEnv env;
  env.executed = &executed;
  env.ranks = static_cast<std::uint32_t>(run.scenario.ranks);
  env.steps = static_cast<std::uint32_t>(run.scenario.steps);
  env.seed = run.scenario.seed;
  env.hbm_channels = run.chip.hbm_channels;
  // The fabric's rule (chip::FabricConfig::from_chip_config): a full mesh when every chip has a
  // link to every other, else a ring.
  env.ring = run.chip.link_count + 1 < env.ranks;
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

 private:
  std::unique_ptr<inject::InjectionSet> set_;
};

}  // namespace

void validate_injections(const PreparedRun& run) {
  const graph::Graph& executed = run.workload.snapshots.fused;
  const inject::InjectionEnv env = env_of(run, executed);
  for (std::size_t i = 0; i < run.scenario.injections.size(); ++i) {
    const InjectionSpec& spec = run.scenario.injections[i];
    try {
      inject::InjectorRegistry::instance().create(spec.params, where_of(spec, i), env);
    } catch (const inject::InjectorError& e) {
      const YAML::Mark m = spec.source.mark();
      throw ScenarioError(spec.source.file(), m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1,
                          fmt::format("injections[{}]", i), "a valid injection descriptor", e.what());
    }
  }
}

std::unique_ptr<InjectionSet> make_injections(const PreparedRun& run, const graph::Graph& executed,
                                              Placement placement) {
  if (run.scenario.injections.empty()) return nullptr;
  return std::make_unique<Set>(run, executed, std::move(placement));
}

}  // namespace probelab::sim
