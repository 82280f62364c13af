#include "sim/run/runner.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <fmt/format.h>

#include "probes/dump_writer.h"
#include "sim/html/report_html.h"
#include "sim/run/perf_report.h"
#include "sim/run/process_pool.h"
#include "sim/run/report.h"
#include "sim/run/resources.h"
#include "sim/run/result_codec.h"
#include "sim/run/resume_fit.h"
#include "sim/run/rewind.h"
#include "sim/run/simulation.h"
#include "sim/scenario/bad_input.h"
#include "chip_model/chip_config.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

void write_text_atomic(const fs::path& path, const std::string& text) {
  probes::write_file_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

nlohmann::json read_json_or_null(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return nullptr;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

void check_output_dir(const fs::path& root, const std::string& what, bool create, const std::string& option) {
  std::error_code ec;
  const std::string shown = fmt::format("'{}'", root.string());
  const std::string a = what.find_first_of("aeiou") == 0 ? "an " : "a ";
  if (fs::exists(root, ec) && !fs::is_directory(root, ec))
    throw ScenarioError(option, 0, 0, "", a + what, shown + " (a file, not a directory)");
  if (!create) {  // the nearest existing directory on the way must let it be made
    fs::path p = fs::absolute(root, ec);
    while (!fs::exists(p, ec) && p.has_relative_path()) p = p.parent_path();
    if (!fs::is_directory(p, ec))
      throw ScenarioError(option, 0, 0, "", a + what + " that can be created", shown + ": '" + p.string() + "' is a file");
    if (::access(p.c_str(), W_OK | X_OK) != 0)
      throw ScenarioError(option, 0, 0, "", "a writable " + what,
                          shown + ": " + std::error_code(errno, std::generic_category()).message());
    return;
  }
  fs::create_directories(root, ec);
  if (ec) throw ScenarioError(option, 0, 0, "", a + what + " that can be created", shown + ": " + ec.message());
  if (::access(root.c_str(), W_OK | X_OK) != 0)
    throw ScenarioError(option, 0, 0, "", "a writable " + what,
                        shown + ": " + std::error_code(errno, std::generic_category()).message());
}

namespace {

void remove_stale_scratch(const fs::path& root) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.empty() || n.front() != '.') continue;
    for (const char* tag : {".partial-", ".old-"}) {
      const auto at = n.rfind(tag);
      if (at == std::string::npos) continue;
      const std::string digits = n.substr(at + std::strlen(tag));
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
      if (!process_alive(std::stoi(digits))) {
        std::error_code rm;
        fs::remove_all(it->path(), rm);
      }
    }
  }
}

void publish_dir(const fs::path& stage, const fs::path& final) {
  if (::renameat2(AT_FDCWD, stage.c_str(), AT_FDCWD, final.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(stage);  // now the previous results
    return;
  }
  if (errno == ENOENT) {  // no previous results
    fs::rename(stage, final);
    return;
  }
  // A filesystem without RENAME_EXCHANGE: move the previous results aside, then into place.
  const fs::path old = final.parent_path() / fmt::format(".{}.old-{}", final.filename().string(), ::getpid());
  fs::rename(final, old);
  fs::rename(stage, final);
  fs::remove_all(old);
}

// A scenario's results replace what is at <out>/<name> only when that is an earlier run's results
// (a directory holding report.json), never a user's file or directory that happens to share the name.
void check_previous_results(const Scenario& s, const fs::path& dir) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (ec || !fs::exists(st)) return;
  std::string what;
  if (!fs::is_directory(st)) what = fs::is_symlink(st) ? "a symbolic link" : "a file";
  else if (!fs::is_regular_file(dir / "report.json", ec)) what = "a directory that holds no earlier results (no report.json)";
  if (what.empty()) return;
  throw ScenarioError(s.file.string(), 0, 0, "name",
                      fmt::format("a scenario name whose output directory is free or holds an earlier run's results "
                                  "(choose another --out or name; nothing was changed)"),
                      fmt::format("'{}': {} is {}", s.name, dir.string(), what));
}

// The probe runtime's dump directory lives beside the runner's own outputs; it must not be one.
void check_dump_dir(const PreparedRun& run) {
  if (!run.probes) return;
  const std::string first = fs::path(run.probes->output.dir).begin()->string();
  for (const char* reserved : {"report.json", "report.html", "summary.txt", "perf_ops.csv", "trace.json", "trace.pftrace", "outputs", "variants", ".results"})
    if (first == reserved) {
      const std::string expected =
          "a dump directory other than the run's own outputs (report.json, report.html, summary.txt, perf_ops.csv, trace.json, trace.pftrace, outputs, variants)";
      const std::string got = "'" + run.probes->output.dir + "'";
      if (!run.scenario.probes_source)
        throw ScenarioError(run.scenario.file.string(), 0, 0, "probes.output.dir", expected, got);
      const YamlView& v = *run.scenario.probes_source;
      const auto out = v.is_map() ? v.get("output") : std::nullopt;
      const auto dir = out && out->is_map() ? out->get("dir") : std::nullopt;
      (dir ? *dir : v).fail(expected, got);
    }
}

}  // namespace

std::vector<fs::path> expand_scenario_args(const std::vector<std::string>& args, const fs::path& source_root) {
  std::vector<fs::path> out;
  auto add_dir = [&](const fs::path& dir) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && (e.path().extension() == ".yaml" || e.path().extension() == ".yml"))
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw ScenarioError(dir.string(), 0, 0, "", "a directory holding scenario *.yaml files", "none");
    out.insert(out.end(), files.begin(), files.end());
  };
  if (args.empty()) {
    add_dir(source_root / "scenarios");
    return out;
  }
  for (const auto& a : args) {
    std::error_code ec;
    if (fs::is_directory(a, ec))
      add_dir(a);
    else if (fs::is_regular_file(a, ec))
      out.emplace_back(a);
    else
      throw ScenarioError(a, 0, 0, "", "an existing scenario file or directory", "'" + a + "' (not found)");
  }
  return out;
}

void Runner::prepare(const std::vector<fs::path>& files) {
  for (const auto& f : files) add(load_scenario(f, opts_.load));
}

void Runner::add(const Scenario& s) {
  if (auto it = names_.find(s.name); it != names_.end())
    throw ScenarioError(s.file.string(), 0, 0, "name",
                        fmt::format("a scenario name not used by another scenario of this run ('{}' is also in {})",
                                    s.name, it->second.string()),
                        "'" + s.name + "'");
  if (opts_.trace && opts_.trace_steps) {
    const std::uint32_t from = s.resume ? s.resume->from_step : 0;
    if (opts_.trace_steps->first < from || opts_.trace_steps->first >= from + static_cast<std::uint32_t>(s.steps))
      throw ScenarioError("--trace-steps", 0, 0, "--trace-steps",
                          fmt::format("a first step the scenario runs (scenario '{}' ({}) runs steps {} to {})", s.name,
                                      s.file.string(), from, from + static_cast<std::uint32_t>(s.steps) - 1),
                          std::to_string(opts_.trace_steps->first));
  }
  Entry e;
  e.main = prepare_run(s);
  check_resume_fits(e.main);
  for (const auto& v : s.variants) e.variants.push_back(prepare_variant(s, v, opts_.load));
  check_dump_dir(e.main);
  for (const auto& v : e.variants) check_dump_dir(v);
  check_resources(e.main, opts_.jobs, opts_.host_memory_limit);
  for (const auto& v : e.variants) check_resources(v, opts_.jobs, opts_.host_memory_limit);
  if (opts_.distributed) {
    const auto procs = opts_.distributed->processes();
    try {
      partition_map(e.main, procs);
      for (const auto& v : e.variants) partition_map(v, procs);
    } catch (const chip::ClusterFitError& err) {
      fail_cluster_fit(s, err, fmt::format("the run has {} processes", procs));
    }
  }
  check_output_dir(opts_.out_root, "output directory", false);  // made when the run starts
  if (opts_.strict) {
    const std::string expected = "a probe config that selects something and translates whole (--strict)";
    if (!e.main.warnings.empty()) throw ScenarioError(s.file.string(), 0, 0, "probes", expected, e.main.warnings.front());
    for (std::size_t v = 0; v < e.variants.size(); ++v)
      if (const auto ws = variant_warnings(e.main, e.variants[v]); !ws.empty()) {
        if (s.variants[v].source) s.variants[v].source->fail(expected, ws.front());
        throw ScenarioError(s.file.string(), 0, 0, "variants", expected, ws.front());
      }
  }
  e.out_dir = opts_.out_root / s.name;
  check_previous_results(s, e.out_dir);
  e.stage_dir = opts_.out_root / fmt::format(".{}.partial-{}", s.name, ::getpid());
  scenarios_.push_back(std::move(e));
  names_.emplace(s.name, s.file);
}

namespace {

struct Job {
  std::size_t scenario = 0;
  int variant = -1;  // -1: the scenario itself
  bool baseline = false;
  fs::path result_file;
  fs::path out_dir;
  std::string label;
};

json read_result(const Job& job, const ChildStatus& st) {
  std::ifstream in(job.result_file, std::ios::binary);
  if (in) {
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      return decode_result(bytes);
    } catch (const std::exception& e) {
      return {{"status", "error"}, {"error", fmt::format("unreadable simulation result: {}", e.what())}};
    }
  }
  return {{"status", "error"}, {"error", fmt::format("the simulation process ended without a result ({})", st.describe())}};
}

}  // namespace

std::vector<ScenarioOutcome> Runner::run(const std::function<void(const std::string&)>& progress) {
  // Every scenario runs in a scratch directory beside its final one and replaces it only when
  // complete: a killed run leaves the previous results as they were (and its scratch is removed
  // by the next run), never a mixture.
  std::error_code root_ec;
  const bool made_root = writer() && !fs::exists(opts_.out_root, root_ec);
  if (writer()) {
    check_output_dir(opts_.out_root, "output directory");
    remove_stale_scratch(opts_.out_root);  // pids of other machines mean nothing here
  }
  if (opts_.distributed) {
    // Every process of a distributed run writes its ranks' dumps into the writer's scratch.
    const int pid = opts_.distributed->agree(static_cast<int>(::getpid()));
    for (Entry& e : scenarios_) e.stage_dir = opts_.out_root / fmt::format(".{}.partial-{}", e.main.scenario.name, pid);
  }
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < scenarios_.size(); ++i) {
    Entry& e = scenarios_[i];
    const fs::path& dir = e.stage_dir;
    if (writer()) {  // a distributed run's other processes write nothing here
      std::error_code ec;
      fs::remove_all(dir, ec);
      fs::create_directories(dir / ".results");
    }
    const bool probes = e.main.probes.has_value();
    jobs.push_back({i, -1, false, dir / ".results" / "main.json", dir, e.main.scenario.name});
    if (probes && opts_.baseline)
      jobs.push_back({i, -1, true, dir / ".results" / "baseline.json", dir, e.main.scenario.name + " (no probes)"});
    for (std::size_t v = 0; v < e.variants.size(); ++v) {
      const auto& var = e.main.scenario.variants[v];
      const std::string label = fmt::format("{} [{}]", e.main.scenario.name, var.name);
      jobs.push_back({i, static_cast<int>(v), false, dir / ".results" / ("variant." + var.name + ".json"),
                      dir / "variants" / var.name, label});
      if (e.variants[v].probes && opts_.baseline && !variant_changes_probes_only(var))
        jobs.push_back({i, static_cast<int>(v), true, dir / ".results" / ("variant." + var.name + ".baseline.json"),
                        dir / "variants" / var.name, label + " (no probes)"});
    }
  }

  std::vector<json> results(jobs.size());
  auto request = [this](const Job& job) {
    const Entry& e = scenarios_[job.scenario];
    SimRequest req;
    req.run = job.variant < 0 ? &e.main : &e.variants[static_cast<std::size_t>(job.variant)];
    req.probes = !job.baseline;
    req.out_dir = job.out_dir;
    req.trace = opts_.trace && !job.baseline && job.variant < 0;
    req.trace_formats = opts_.trace_formats;
    req.trace_steps = opts_.trace_steps;
    req.save_outputs = !job.baseline && job.variant < 0;
    return req;
  };
  auto status_line = [&](std::size_t done, std::size_t index) {
    if (progress)
      progress(fmt::format("[{}/{}] {}: {}", done, jobs.size(), jobs[index].label,
                           results[index].value("status", "") == "ok"     ? std::string("done")
                           : results[index].value("status", "") == "hang" ? std::string("the job hung")
                                                                          : "error: " + results[index].value("error", "")));
  };
  if (opts_.distributed) {
    // One simulation at a time, each over every process of the run.
    opts_.distributed->agree(0);  // the writer cleaned the output directories
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      // As one process's result file is read: numbers JSON has no text for (a NaN loss) become
      // null, so the summary and the page say what they say for one process.
      results[j] = simulate_distributed(request(jobs[j]), *opts_.distributed, opts_.timeout_s);
      as_text_would_read(results[j]);
      if (writer()) status_line(j + 1, j);
    }
    if (!writer()) return {};
  } else {
    ProcessPool pool(opts_.jobs);
    pool.set_interrupt_cleanup([this] {
      std::error_code ec;
      for (const Entry& e : scenarios_) fs::remove_all(e.stage_dir, ec);
    });
    for (const Job& job : jobs) {
      pool.submit([this, job, &request]() -> int {
        ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
        ::dup2(2, 1);  // SystemC reports go to stdout; keep the parent's stdout for its own output
        if (opts_.timeout_s) ::alarm(opts_.timeout_s);
        json res;
        try {
          res = simulate(request(job));
        } catch (const std::exception& ex) {
          res = {{"status", "error"}, {"error", ex.what()}, {"bad_input", is_bad_input(ex)}};
        }
        const std::vector<std::uint8_t> bytes = encode_result(std::move(res));
        probes::write_file_atomic(job.result_file, std::as_bytes(std::span(bytes)));
        return 0;
      });
    }
    std::size_t done = 0;
    pool.run([&](std::size_t index, const ChildStatus& st) {
      results[index] = read_result(jobs[index], st);
      status_line(++done, index);
    });
  }

  std::vector<ScenarioOutcome> out;
  for (std::size_t i = 0; i < scenarios_.size(); ++i) {
    Entry& e = scenarios_[i];
    json main, baseline;
    std::vector<VariantOutcome> variants(e.variants.size());
    for (std::size_t v = 0; v < e.variants.size(); ++v) variants[v].run = &e.variants[v];
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      if (jobs[j].scenario != i) continue;
      // Each job belongs to one scenario: its result moves (a long run's is megabytes).
      if (jobs[j].variant < 0)
        (jobs[j].baseline ? baseline : main) = std::move(results[j]);
      else
        (jobs[j].baseline ? variants[jobs[j].variant].baseline : variants[jobs[j].variant].result) = std::move(results[j]);
    }
    // Variants that only change probes share the scenario's own baseline.
    for (std::size_t v = 0; v < e.variants.size(); ++v)
      if (variants[v].baseline.is_null() && variant_changes_probes_only(e.main.scenario.variants[v]))
        variants[v].baseline = baseline;
    // What the rewind reads of the first pass; the report takes the rest of its result.
    json pass1 = json::object();
    for (const char* key : {"rewind_request", "losses"})
      if (main.contains(key)) pass1[key] = main[key];
    const bool bad_input = main.value("bad_input", false);
    json report = build_report(e.main, std::move(main), baseline, variants);
    ScenarioOutcome o;
    o.name = e.main.scenario.name;
    o.file = e.main.scenario.file;
    if (bad_input) {  // e.g. an index out of range in the data: earlier results stay
      std::error_code ec;
      fs::remove_all(e.stage_dir, ec);
      report["rewind"] = nullptr;
      add_expectations(report, e.main.scenario);
      o.report = std::move(report);
      out.push_back(std::move(o));
      continue;
    }
    report["rewind"] = nullptr;
    if (auto plan = plan_rewind(e.main.scenario, pass1, e.stage_dir)) {
      if (opts_.distributed)
        report["warnings"].push_back("rewind: a distributed run does not re-execute (run it in one process)");
      else
        report["rewind"] = run_rewind(*plan, pass1, e.stage_dir, opts_, progress);
    }
    add_expectations(report, e.main.scenario);
    std::error_code ec;
    fs::remove_all(e.stage_dir / ".results", ec);
    write_text_atomic(e.stage_dir / "summary.txt", summary_text(report));
    write_text_atomic(e.stage_dir / "report.html", html::report_html(report));
    if (report.contains("perf") && report["perf"].is_object())
      write_text_atomic(e.stage_dir / "perf_ops.csv", perf_ops_csv(report["perf"]));
    write_text_atomic(e.stage_dir / "report.json", report.dump(2) + "\n");
    publish_dir(e.stage_dir, e.out_dir);
    o.out_dir = e.out_dir;
    o.passed = report.value("passed", false);
    o.report = std::move(report);
    out.push_back(std::move(o));
  }
  if (made_root && fs::is_empty(opts_.out_root, root_ec)) fs::remove(opts_.out_root, root_ec);
  return out;
}

}  // namespace probelab::sim
