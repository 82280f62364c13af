// Loading and checking scenarios in-process (errors as Python exceptions), runs through the
// scenario runner (a forked child per simulation) and campaigns (a forked worker per trial).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "python/src/bindings.h"
#include "python/src/yaml_convert.h"
#include "sim/campaign/campaign_comm.h"
#include "sim/campaign/campaign_runner.h"
#include "sim/run/runner.h"
#include "sim/scenario/prepared_run.h"
#include "sim/scenario/source_root.h"

namespace py = pybind11;

namespace probelab::python {

namespace {

using nlohmann::json;
using Sets = std::vector<std::pair<std::string, std::string>>;

/// A scenario as the package passes it: ("file", path, "") or ("text", yaml, label).
struct Source {
  std::string kind, value, label;
};

sim::LoadOptions load_options(const Sets& sets, std::optional<std::uint64_t> seed) {
  sim::LoadOptions o;
  o.source_root = sim::find_source_root();
  for (const auto& [k, v] : sets) o.sets.push_back({k, v});
  o.seed = seed;
  return o;
}

sim::Scenario load(const Source& s, const sim::LoadOptions& o) {
  if (s.kind == "file") return sim::load_scenario(s.value, o);
  return sim::parse_scenario(s.value, s.label, o);
}

/// Calls a Python callable from C++ code that runs without the GIL; the first exception it
/// raises is kept and raised again once the run is over.
class Callback {
 public:
  explicit Callback(py::object fn) : fn_(std::move(fn)) {}
  template <class F>
  void operator()(F&& make_arg) {
    if (fn_.is_none() || error_) return;
    py::gil_scoped_acquire gil;
    try {
      fn_(make_arg());
    } catch (py::error_already_set& e) {
      error_ = std::make_unique<py::error_already_set>(std::move(e));
    }
  }
  void rethrow() {
    if (error_) throw *error_;
  }

 private:
  py::object fn_;
  std::unique_ptr<py::error_already_set> error_;
};

py::dict check_scenario(const Source& src, const Sets& sets, std::optional<std::uint64_t> seed) {
  const sim::LoadOptions o = load_options(sets, seed);
  const sim::Scenario s = load(src, o);
  const sim::PreparedRun run = sim::prepare_run(s);
  py::list variants, expectations;
  for (const auto& v : s.variants) {
    sim::prepare_variant(s, v, o);
    variants.append(v.name);
  }
  for (const auto& e : s.expectations) expectations.append(py::dict(py::arg("kind") = e.kind, py::arg("line") = e.line));
  return py::dict(py::arg("name") = s.name, py::arg("file") = s.file.string(), py::arg("description") = s.description,
                  py::arg("model") = s.model.ref, py::arg("model_file") = s.model.path.string(),
                  py::arg("mode") = std::string(sim::run_mode_name(s.mode)), py::arg("ranks") = s.ranks,
                  py::arg("steps") = s.steps, py::arg("seed") = s.seed, py::arg("probes") = run.probes.has_value(),
                  py::arg("injections") = s.injections.size(), py::arg("variants") = variants,
                  py::arg("expectations") = expectations, py::arg("chip") = run.chip.preset,
                  py::arg("executed_ops") = run.workload.snapshots.fused.ops().size(),
                  py::arg("yaml") = std::string(YAML::Dump(s.resolved)));
}

std::string run(const std::vector<Source>& sources, const std::string& out, int jobs, bool baseline, bool trace,
                unsigned timeout, const Sets& sets, std::optional<std::uint64_t> seed, py::object progress) {
  sim::RunOptions opts;
  opts.out_root = out;
  opts.load = load_options(sets, seed);
  opts.jobs = jobs;
  opts.baseline = baseline;
  opts.trace = trace;
  opts.timeout_s = timeout;
  sim::Runner runner(opts);
  for (const auto& s : sources) runner.add(load(s, opts.load));
  Callback cb(std::move(progress));
  std::vector<sim::ScenarioOutcome> outcomes;
  {
    py::gil_scoped_release nogil;
    outcomes = runner.run([&cb](const std::string& line) { cb([&] { return py::str(line); }); });
  }
  cb.rethrow();
  json list = json::array();
  for (const auto& o : outcomes)
    list.push_back({{"name", o.name}, {"file", o.file.string()}, {"out_dir", o.out_dir.string()}, {"passed", o.passed},
                    {"report", o.report}});
  return list.dump();
}

std::string campaign(const std::string& scenario, std::optional<std::uint64_t> trials, int jobs,
                     std::optional<std::uint64_t> seed, const std::string& out, bool resume,
                     const std::vector<std::string>& faults, const Sets& sets, py::object progress) {
  sim::CampaignOptions o;
  o.scenario = scenario;
  o.load = load_options(sets, std::nullopt);
  o.faults = faults;
  o.trials = trials;
  o.seed = seed;
  o.jobs = jobs;
  o.out = out;
  o.resume = resume;
  sim::Campaign c(o);
  c.prepare();
  std::unique_ptr<sim::CampaignComm> comm = sim::make_campaign_comm();
  Callback cb(std::move(progress));
  json summary;
  {
    py::gil_scoped_release nogil;
    summary = c.run(*comm, [&cb](const sim::CampaignProgress& p) {
      cb([&] {
        return py::dict(py::arg("done") = p.done, py::arg("total") = p.total, py::arg("resumed") = p.resumed,
                        py::arg("last") = p.last);
      });
    });
  }
  cb.rethrow();
  return json({{"summary", summary}, {"out_dir", c.out_dir().string()}, {"name", c.name()}, {"rank", comm->rank()},
               {"trials", c.trials()}, {"seed", c.seed()}})
      .dump();
}

}  // namespace

void bind_run(py::module_& m) {
  py::class_<Source>(m, "Source")
      .def(py::init<std::string, std::string, std::string>(), py::arg("kind"), py::arg("value"), py::arg("label") = "")
      .def_readonly("kind", &Source::kind)
      .def_readonly("value", &Source::value)
      .def_readonly("label", &Source::label);
  m.def("to_yaml", &to_yaml_text, py::arg("value"), py::arg("flow") = false,
        "The YAML text of a Python value (dict, list, str, int, float, bool, None).");
  m.def("source_root", [] { return sim::find_source_root().string(); },
        "The repository root holding scenarios/ (bundled scenarios and models).");
  m.def("check_scenario", &check_scenario, py::arg("source"), py::arg("sets"), py::arg("seed"),
        "Loads and validates a scenario against the model, chip, probe config and injectors.");
  m.def("run", &run, py::arg("sources"), py::arg("out"), py::arg("jobs"), py::arg("baseline"), py::arg("trace"),
        py::arg("timeout"), py::arg("sets"), py::arg("seed"), py::arg("progress"),
        "Runs scenarios (each simulation in a forked child); returns the outcomes as JSON text.");
  m.def("campaign", &campaign, py::arg("scenario"), py::arg("trials"), py::arg("jobs"), py::arg("seed"), py::arg("out"),
        py::arg("resume"), py::arg("faults"), py::arg("sets"), py::arg("progress"),
        "Runs a fault-injection campaign; returns its summary and output directory as JSON text.");
}

}  // namespace probelab::python
