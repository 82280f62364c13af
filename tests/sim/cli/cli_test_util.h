// The CLI tests' one way to run the binary under test (PROBELAB_BINARY, set by CMake for the
// tests of this folder) with arguments, in a temporary directory.
#pragma once

#include <string>

#include "tests/sim/sim_test_util.h"

namespace probelab::sim::test {

inline CmdResult run(const std::string& args, const TempDir& dir) {
  return shell(std::string("'") + PROBELAB_BINARY + "' " + args, dir);
}

}  // namespace probelab::sim::test
