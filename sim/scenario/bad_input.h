// Classification of exceptions: which ones mean "the user's input is bad" (exit code 2): scenario,
// chip config, probe config, injector, graph/model and unreadable-dump errors. Everything else is a
// failure of the run (exit code 3).
#pragma once

#include <exception>

namespace probelab::sim {

bool is_bad_input(const std::exception& e);

}  // namespace probelab::sim
