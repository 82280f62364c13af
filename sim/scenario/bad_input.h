// Classification of exceptions: which ones mean "the user's input is bad" (exit code 2): scenario,
// chip config, probe config, injector and graph/model errors. Everything else is a failure of the run.
#pragma once

#include <exception>

namespace probelab::sim {

bool is_bad_input(const std::exception& e);

}  // namespace probelab::sim
