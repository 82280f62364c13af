// Helpers of the injector-on-chip tests: run scenarios through the Runner (every simulation in
// its own forked child, so one TEST may run several simulations), and read what the runs left
// behind (report.json sections, saved outputs, the probe runtime's dump manifest).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/npy.h"
#include "sim/run/runner.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim::test {

/// Runs the scenario files (relative to `dir`) in child processes, two at a time, without the
/// no-probe baseline and without traces. Returns the outcomes by scenario name.
inline std::map<std::string, ScenarioOutcome> run_scenarios(const TempDir& dir, const std::vector<std::string>& files,
                                                            const std::string& out = "out",
                                                            std::optional<std::uint64_t> seed = std::nullopt) {
  RunOptions o;
  o.out_root = dir.path() / out;
  o.load.source_root = source_root();
  o.load.seed = seed;
  o.jobs = 2;
  o.baseline = false;
  o.trace = false;
  o.timeout_s = 300;
  Runner runner(o);
  std::vector<std::filesystem::path> paths;
  for (const auto& f : files) paths.push_back(dir.path() / f);
  runner.prepare(paths);
  std::map<std::string, ScenarioOutcome> by_name;
  for (auto& r : runner.run()) by_name.emplace(r.name, std::move(r));
  return by_name;
}

/// The device values of a saved output (outputs/rank<r>/<tensor>.npy), as doubles.
inline std::vector<double> saved_output(const ScenarioOutcome& o, const std::string& file, std::uint32_t rank = 0) {
  return graph::read_npy((o.out_dir / "outputs" / ("rank" + std::to_string(rank)) / (file + ".npy")).string()).to_f64();
}

/// The probe runtime's dump manifest of a rank.
inline nlohmann::json dump_manifest(const ScenarioOutcome& o, std::uint32_t rank = 0) {
  return nlohmann::json::parse(slurp(o.out_dir / "dump" / ("rank" + std::to_string(rank)) / "dump.json"));
}

/// The injection report of the scenario's `index`-th descriptor.
inline const nlohmann::json& injection(const ScenarioOutcome& o, std::size_t index = 0) {
  return o.report.at("injections").at(index);
}

/// Anomalies of the given kind (exception latches or "condition").
inline std::vector<nlohmann::json> anomalies_of(const ScenarioOutcome& o, const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& a : o.report.at("anomalies"))
    if (a.at("kind") == kind) out.push_back(a);
  return out;
}

/// The reference comparison of `op` at `step` (rank 0), or null.
inline nlohmann::json comparison(const ScenarioOutcome& o, const std::string& op, std::uint32_t step = 0) {
  for (const auto& c : o.report.at("comparisons"))
    if (c.at("op") == op && c.at("step") == step && c.at("rank") == 0) return c;
  return nullptr;
}

/// Parses a proof's "0x..." bit string.
inline std::uint64_t bits_of(const nlohmann::json& s) { return std::stoull(s.get<std::string>(), nullptr, 16); }

}  // namespace probelab::sim::test
