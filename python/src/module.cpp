#include "python/src/bindings.h"

PYBIND11_MODULE(_probelab, m) {
  m.doc() = "probelab's C++ harness; use the `probelab` package, not this module directly.";
  probelab::python::bind_errors(m);
  probelab::python::bind_run(m);
  probelab::python::bind_data(m);
}
