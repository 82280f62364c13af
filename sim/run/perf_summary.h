// What `probelab perf RUN` prints, from a run's report.json `perf` section (perf_report.h):
// the top ops by time with their bound and evidence, each step's critical path, per-rank
// utilization and, for multi-rank runs, per-link utilization.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace probelab::sim {

/// report.json of a run directory; throws ScenarioError (bad input) naming the file when it is
/// missing, malformed, or has no `perf` section (a run made before counters existed).
nlohmann::json read_perf_report(const std::filesystem::path& run_dir);

struct PerfTextOptions {
  std::size_t top = 10;  // ops listed per rank
  int rank = -1;         // -1: every rank
};

/// The human summary.
std::string perf_text(const nlohmann::json& report, const PerfTextOptions& opt = {});

/// The ops of perf.ops for `rank` (-1: all), slowest first (ties: executed order).
nlohmann::json top_ops(const nlohmann::json& perf, int rank, std::size_t n);

}  // namespace probelab::sim
