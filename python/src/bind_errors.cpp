// Exception translation: ScenarioError and the probe config's ConfigError (file, line, key) become
// probelab.ScenarioError; the other bad-input errors (chip config, graph/model, injector)
// probelab.BadInputError. A run interrupted by a signal delivers that signal to the session's own
// handler (KeyboardInterrupt for SIGINT). Anything else stays a RuntimeError (an internal error,
// exit code 3).
#include <csignal>

#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include "probes/probe_config.h"
#include "python/src/bindings.h"
#include "sim/run/process_pool.h"
#include "sim/scenario/bad_input.h"
#include "sim/scenario/scenario_error.h"

namespace py = pybind11;

namespace probelab::python {

namespace {

py::object opt_str(const std::string& s) { return s.empty() ? py::none() : py::object(py::str(s)); }
py::object opt_int(int v) { return v > 0 ? py::object(py::int_(v)) : py::none(); }

void raise(const char* cls, const std::string& message, py::dict attrs) {
  py::object type = py::module_::import("probelab._errors").attr(cls);
  py::object err = type(message, **attrs);
  PyErr_SetObject(type.ptr(), err.ptr());
}

}  // namespace

void bind_errors(py::module_&) {
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const sim::ScenarioError& e) {
      raise("ScenarioError", e.what(),
            py::dict(py::arg("file") = opt_str(e.file()), py::arg("line") = opt_int(e.line()),
                     py::arg("column") = opt_int(e.column()), py::arg("key") = opt_str(e.key()),
                     py::arg("expected") = opt_str(e.expected())));
    } catch (const probes::ConfigError& e) {
      raise("ScenarioError", e.what(),
            py::dict(py::arg("file") = opt_str(e.file()), py::arg("line") = opt_int(e.line()),
                     py::arg("key") = opt_str(e.key()), py::arg("expected") = opt_str(e.reason())));
    } catch (const sim::Interrupted& i) {
      // The workers are gone: deliver the signal to the session's own handler (KeyboardInterrupt
      // for SIGINT; the default action, if the session kept it, ends the interpreter as it would).
      ::raise(i.signal);
      if (PyErr_CheckSignals() == 0)
        PyErr_SetString(PyExc_RuntimeError, fmt::format("interrupted by signal {}", i.signal).c_str());
    } catch (const std::exception& e) {
      if (!sim::is_bad_input(e)) throw;
      raise("BadInputError", e.what(), py::dict());
    }
  });
}

}  // namespace probelab::python
