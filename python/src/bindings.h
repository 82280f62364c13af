// The extension module probelab._probelab: what the Python package (python/probelab/) calls. The
// functions speak JSON text for reports and registries (the package turns it into dicts) and
// numpy arrays for tensors. Bad input raises probelab.ScenarioError / probelab.BadInputError
// carrying file, line, column, key and what was expected, as the CLI reports them (exit code 2).
// Simulations run in forked children through the same runner as `probelab run`: the Python
// process never elaborates SystemC, so one session can run any number of scenarios.
#pragma once

#include <pybind11/pybind11.h>

namespace probelab::python {

/// Scenario loading and checking, runs and campaigns (bind_run.cpp).
void bind_run(pybind11::module_& m);
/// Dumps and outputs as numpy arrays, the HTML renderers, the registries (bind_data.cpp).
void bind_data(pybind11::module_& m);
/// C++ bad-input exceptions -> the package's exception classes (bind_errors.cpp).
void bind_errors(pybind11::module_& m);

}  // namespace probelab::python
