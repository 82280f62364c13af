// A tiny campaign for the campaign tests: a small MLP (MatMul, Add, Relu, MatMul) on the tiny
// chip, probes with reference comparison, NaN and bit-flip faults.
#pragma once

#include <string>

#include "sim_test_util.h"

namespace probelab::sim::test {

inline const char* kCampaignModel = R"(name: tinynet
seed: 5
inputs:
  - {name: x, shape: [4, 8]}
ops:
  - {name: fc1, type: MatMul, inputs: [x], weights: {weight: [8, 16]}}
  - {name: fc1_bias, type: Add, weights: {b: [16]}}
  - {name: relu, type: Relu}
  - {name: fc2, type: MatMul, weights: {weight: [16, 4]}}
outputs: [fc2]
)";

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
  dir.write("tinynet.yaml", kCampaignModel);
  return dir.write("camp.yaml", scenario);
}

}  // namespace probelab::sim::test
