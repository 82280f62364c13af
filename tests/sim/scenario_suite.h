// Helpers of the tests that run a folder of scenario files through the probelab executable, one
// test per file (the bundled suite, the diagnosis scenarios). Needs PROBELAB_BINARY.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim::test {

/// The stems of the .yaml files directly in `dir`, sorted.
inline std::vector<std::string> yaml_stems(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// Runs `probelab run <yaml> --out out --no-trace` in `dir`; expects exit code 0 and returns the
/// report.json written (a failure and an empty value when none was).
inline nlohmann::json run_scenario_report(const std::filesystem::path& yaml, const TempDir& dir) {
  const CmdResult r = run("run '" + yaml.string() + "' --out out --no-trace", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "out"))
    return nlohmann::json::parse(slurp(e.path() / "report.json"));
  ADD_FAILURE() << "no report written";
  return {};
}

/// A GoogleTest parameter name for a scenario stem (non-alphanumerics become '_').
inline std::string scenario_test_name(const ::testing::TestParamInfo<std::string>& i) {
  std::string n = i.param;
  std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return n;
}

}  // namespace probelab::sim::test
