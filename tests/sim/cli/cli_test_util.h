// The CLI tests' one way to run the binary under test (PROBELAB_BINARY, set by CMake for the
// tests of this folder) with arguments, in a temporary directory; and the JSON files it writes.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/sim/sim_test_util.h"

namespace probelab::sim::test {

inline CmdResult run(const std::string& args, const TempDir& dir) {
  return shell(std::string("'") + PROBELAB_BINARY + "' " + args, dir);
}

/// The JSON document at `p` (throws when it is missing or not JSON, which fails the test).
inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace probelab::sim::test
