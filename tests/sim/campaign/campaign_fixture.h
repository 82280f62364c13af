// A tiny campaign for the campaign tests: test::kTinyNet (MatMul, Add, Relu, MatMul) on the tiny
// chip, probes with reference comparison, NaN and bit-flip faults.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/campaign/campaign_comm.h"
#include "sim/campaign/campaign_runner.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim::test {

/// A scenario with a campaign section; `campaign_extra` is appended inside `campaign:`.
inline std::string campaign_scenario(const std::string& campaign_extra = "") {
  return std::string(R"(name: tinycamp
model: tinynet.yaml
chip: tiny
seed: 3
steps: 1
probes:
  mode: full
  watch_points: ["*"]
  compare: {enabled: true}
campaign:
  trials: 6
  seed: 5
  sampling: per_kind
  golden_runs: 2
  faults:
    - {kind: nan, ops: ["*"]}
    - {kind: bitflip, targets: [l0c, hbm], bits: ["8-15"]}
)") + campaign_extra;
}

/// Writes the model and the scenario into `dir`; returns the scenario path.
inline std::filesystem::path write_campaign(const TempDir& dir, const std::string& scenario = campaign_scenario()) {
  dir.write("tinynet.yaml", kTinyNet);
  return dir.write("camp.yaml", scenario);
}

/// Runs `trials` trials of the campaign in `scenario` with `jobs` workers into `out` (continuing
/// an interrupted one with `resume`); returns summary.json.
inline nlohmann::json run_campaign(const std::filesystem::path& scenario, const std::filesystem::path& out, int jobs,
                                   std::uint64_t trials, bool resume = false) {
  CampaignOptions o;
  o.scenario = scenario;
  o.load.source_root = source_root();
  o.trials = trials;
  o.jobs = jobs;
  o.out = out;
  o.resume = resume;
  Campaign c(o);
  c.prepare();
  auto comm = make_campaign_comm();
  return c.run(*comm);
}

}  // namespace probelab::sim::test
