// Time-travel replay (`probelab replay RUN --from-step K [--set ...]`): resumes a saved run at step
// K from its checkpoint (sim/run/checkpoint_store.h) with the same or other probes / chip settings,
// and compares what the steps K.. produced with the original run: the losses of every step, the
// fetched outputs, and every later checkpoint (the whole training state at each later step
// boundary), bit for bit. With nothing changed the two are bit-identical (tested); with other probe
// settings they stay identical (probes observe, they do not change values); with other chip or
// precision settings the first difference is named.
//
// The replay writes a normal run directory at <out>/<scenario>/ (report.json, dumps, outputs, its
// own checkpoints) and <out>/<scenario>/replay.json with the comparison; its expectations are not
// evaluated (the original run's refer to the whole run).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"

namespace probelab::sim {

struct ReplayOptions {
  std::uint32_t from_step = 0;
  std::vector<SetOverride> sets;
  std::filesystem::path out_root;  // empty: <run>/replay.step<K>
  int jobs = 1;
};

struct ReplayResult {
  bool identical = false;
  nlohmann::json report;  // what replay.json holds
  std::filesystem::path out_dir;
};

/// Throws ScenarioError on bad input (no run there, no checkpoint at K, bad --set).
ReplayResult replay_run(const std::filesystem::path& run_dir, const ReplayOptions& opts,
                        const std::function<void(const std::string&)>& progress = {});

}  // namespace probelab::sim
