// The scenario side of fault injection: the `injections:` descriptors are validated by the
// injector registry (injectors/) when a scenario is prepared, and instantiated as the chip's
// fault hooks in the simulation; after the run every injector reports whether it fired and its
// proof (site, bits before/after).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chip_model/hooks/fault_hooks.h"
#include "injectors/injector.h"
#include "sim/scenario/prepared_run.h"

namespace probelab::sim {

/// Throws ScenarioError naming the descriptor's file position when the registry rejects it.
void validate_injections(const PreparedRun& run);

/// The link chip `src` sends on towards chip `dst` in the job's cluster (the first link of the
/// route, chip::ClusterTopology) and whether it reaches dst directly (false: dst is further along
/// an HCCS ring). Null for one chip. src != dst, both below the rank count.
std::function<inject::InjectionEnv::FirstLink(std::uint32_t src, std::uint32_t dst)> cluster_first_link(const PreparedRun& run);

/// The injectors of one simulation.
class InjectionSet {
 public:
  virtual ~InjectionSet() = default;
  /// Fault hooks for the chips (nullptr when there are no injections).
  virtual chip::FaultHooks* hooks() = 0;
  /// [{kind, descriptor, fired, proof: [...]}] in descriptor order.
  virtual nlohmann::json report() const = 0;
  /// Per injector what it saw on the ranks simulated here (merged by merge_injection_reports).
  virtual nlohmann::json partial_report() const = 0;
};

/// report() of the partial reports of the partitions of a distributed run.
nlohmann::json merge_injection_reports(const std::vector<nlohmann::json>& partials);

/// Where a tensor lives on a rank (the executor's memory plan), asked when HBM faults are scheduled.
using Placement =
    std::function<std::optional<inject::TensorPlacement>(std::uint32_t rank, const std::string& tensor)>;

/// `executed` is the graph whose op ids the chips report (sites by op name resolve against it).
/// nullptr when the scenario has no injections.
std::unique_ptr<InjectionSet> make_injections(const PreparedRun& run, const graph::Graph& executed,
                                              Placement placement);

}  // namespace probelab::sim
