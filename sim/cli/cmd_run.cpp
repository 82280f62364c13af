// `probelab run [SCENARIO|DIR ...]`: replay scenarios; exit 0 when every expectation held, 1 when
// one failed, 2 on bad input (nothing is run then, or a simulation found its input bad), 3 when
// a simulation failed otherwise (crashed, timed out, an internal error).
#include <charconv>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "sim/cli/commands.h"
#include "sim/run/hang_report.h"
#include "sim/run/mpi_session.h"
#include "sim/run/partition_run.h"
#include "sim/run/report.h"
#include "sim/run/runner.h"
#include "sim/scenario/scenario_error.h"
#include "sim/scenario/source_root.h"

namespace probelab::cli {

namespace {

struct RunArgs {
  std::vector<std::string> paths;
  std::string out = "out";
  std::optional<std::uint64_t> seed;
  std::vector<std::string> sets;
  bool json = false;
  int jobs = 1;
  bool no_baseline = false;
  bool no_trace = false;
  bool strict = false;
  std::vector<std::string> trace_formats;
  std::string trace_steps;
  unsigned timeout = 3600;
  std::uint64_t host_memory_mib = 0;
  int partitions = 0;
};

std::string overhead_cell(const nlohmann::json& r) {
  const auto& c = r["capture"];
  if (!c.is_object() || !c["overhead_percent"].is_number()) return "-";
  return fmt::format("{:.2f}%", c["overhead_percent"].get<double>());
}

// "FIRST:LAST" or "STEP" (one step).
std::pair<std::uint32_t, std::uint32_t> parse_trace_steps(const std::string& text) {
  const auto colon = text.find(':');
  auto number = [&](std::string_view v) -> std::optional<std::uint32_t> {
    std::uint32_t n = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec == std::errc() && p == v.data() + v.size() && !v.empty() ? std::optional(n) : std::nullopt;
  };
  const std::string_view t(text);
  const auto first = number(t.substr(0, colon));
  const auto last = colon == std::string::npos ? first : number(t.substr(colon + 1));
  if (!first || !last || *last < *first)
    throw sim::ScenarioError("--trace-steps", 0, 0, "--trace-steps",
                             "FIRST:LAST (steps, FIRST <= LAST) or one STEP, e.g. 10:12", text);
  return {*first, *last};
}

int run(const RunArgs& a) {
  sim::RunOptions opts;
  opts.out_root = a.out;
  opts.load.seed = a.seed;
  opts.load.source_root = sim::find_source_root();
  for (const auto& s : a.sets) opts.load.sets.push_back(sim::parse_set(s));
  opts.jobs = a.jobs;
  opts.baseline = !a.no_baseline;
  opts.trace = !a.no_trace;
  opts.strict = a.strict;
  if (!a.trace_formats.empty()) {
    opts.trace_formats.clear();
    for (const auto& f : a.trace_formats) opts.trace_formats.push_back(chip::Trace::parse_format(f));
  }
  if (!a.trace_steps.empty()) opts.trace_steps = parse_trace_steps(a.trace_steps);
  opts.timeout_s = a.timeout;
  opts.host_memory_limit = a.host_memory_mib << 20;
  // Distributed runs: the processes of an MPI job (mpirun -np K), or --partitions K in this process.
  if (sim::launched_by_mpi() && sim::MpiSession::instance().size() > 1) {
    if (a.partitions > 0) throw sim::ScenarioError("--partitions", 0, 0, "--partitions", "no --partitions under mpirun (the MPI processes are the partitions)", std::to_string(a.partitions));
    opts.distributed = sim::mpi_partition_comm();
  } else if (a.partitions > 1) {
    opts.distributed = sim::local_partition_comm(static_cast<std::uint32_t>(a.partitions));
  }
  const auto files = sim::expand_scenario_args(a.paths, opts.load.source_root);

  sim::Runner runner(opts);
  runner.prepare(files);
  const bool tty = ::isatty(2);
  auto progress = [tty](const std::string& line) {
    if (tty)
      fmt::print(stderr, "\r\033[K{}", line);
    else
      fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
  };
  if (!opts.distributed)
    fmt::print(stderr, "running {} scenario(s), {} job(s) at a time\n", runner.size(), opts.jobs);
  else if (runner.writer())
    fmt::print(stderr, "running {} scenario(s), each simulation over {} processes\n", runner.size(),
               opts.distributed->processes());
  const auto outcomes = runner.run(progress);
  if (tty && runner.writer()) fmt::print(stderr, "\n");
  if (!runner.writer()) return runner.agree(0);

  bool bad_input = false, failed_run = false, all = true;
  for (const auto& o : outcomes) {
    all = all && o.passed;
    const bool bad = o.report.value("bad_input", false);
    bad_input = bad_input || bad;
    // a job hang is the simulated system failing (exit 1 unless expected), not the simulator
    failed_run = failed_run || (!bad && o.report.value("status", "") != "ok" && o.report.value("status", "") != "hang");
  }
  if (a.json) {
    nlohmann::json j = {{"passed", all}, {"scenarios", nlohmann::json::array()}};
    for (const auto& o : outcomes)
      j["scenarios"].push_back({{"name", o.name}, {"passed", o.passed}, {"out_dir", o.out_dir.string()},
                                {"report", o.report}});
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{:<32} {:<6} {:>14} {:>10} {:>9} {:>12}\n", "scenario", "result", "cycles", "overhead", "anomalies",
               "expectations");
    for (const auto& o : outcomes) {
      const auto& r = o.report;
      std::size_t held = 0, n = 0;
      for (const auto& e : r["expectations"]) {
        ++n;
        held += e.value("passed", false) ? 1 : 0;
      }
      fmt::print("{:<32} {:<6} {:>14} {:>10} {:>9} {:>12}\n", o.name, o.passed ? "PASS" : "FAIL",
                 r["cycles"].is_object() ? r["cycles"].value("total", std::uint64_t{0}) : 0, overhead_cell(r),
                 r["anomalies"].is_array() ? r["anomalies"].size() : 0, fmt::format("{}/{}", held, n));
    }
    for (const auto& o : outcomes) {
      const auto& r = o.report;
      const auto& pc = r["probe_config"];
      if (pc.is_object() && pc.value("format", "") == "msprobe") {
        fmt::print("\n{}: probes from msprobe config.json {}:\n", o.name, pc.value("source", "?"));
        fmt::print("{}", sim::mapping_text(pc["mapping"], "  ", 40));
      }
      if (r["warnings"].is_array() && !r["warnings"].empty()) {
        fmt::print("\n{}: {} warning(s):\n", o.name, r["warnings"].size());
        for (std::size_t i = 0; i < r["warnings"].size() && i < 5; ++i)
          fmt::print("  {}\n", r["warnings"][i].is_string() ? r["warnings"][i].get<std::string>() : r["warnings"][i].dump());
        if (r["warnings"].size() > 5) fmt::print("  ... (all in {})\n", (o.out_dir / "report.json").string());
      }
    }
    for (const auto& o : outcomes) {
      if (o.passed) continue;
      if (o.out_dir.empty()) {  // bad input found while simulating: nothing published
        fmt::print("\n{}: bad input (nothing written; earlier results under --out kept):\n  {}\n", o.name,
                   o.report.value("error", std::string("?")));
        continue;
      }
      fmt::print("\n{} FAILED ({}):\n", o.name, (o.out_dir / "report.json").string());
      if (o.report.value("status", "") == "hang")
        fmt::print("{}", sim::hang_text(o.report["hang"]));
      else if (o.report.value("status", "") != "ok")
        fmt::print("  simulation error: {}\n", o.report.value("error", std::string("?")));
      for (const auto& e : o.report["expectations"]) {
        if (e.value("passed", false)) continue;
        fmt::print("  {} (line {})\n    expected: {}\n    actual:   {}\n", e.value("kind", "?"), e.value("line", 0),
                   e.value("expected", ""), e.value("actual", ""));
      }
    }
    const auto published = std::count_if(outcomes.begin(), outcomes.end(), [](const auto& o) { return !o.out_dir.empty(); });
    fmt::print("\n{} of {} scenario(s) passed; {}\n",
               std::count_if(outcomes.begin(), outcomes.end(), [](const auto& o) { return o.passed; }), outcomes.size(),
               published == 0 ? std::string("no reports written")
                              : fmt::format("reports (report.json, report.html) under {}", opts.out_root.string()));
  }
  std::fflush(stdout);
  // 3: a simulation failed for a reason other than its input
  return runner.agree(bad_input ? 2 : failed_run ? 3 : all ? 0 : 1);
}

}  // namespace

Command add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand("run", "Replay scenarios (default: the bundled suite scenarios/*.yaml) and check "
                                        "their expectations");
  sub->add_option("scenarios", a->paths, "Scenario files or directories of *.yaml files");
  sub->add_option("--out", a->out, "Output root; each scenario writes <out>/<name>/ (default ./out)");
  sub->add_option("--seed", a->seed, "Override every scenario's seed (a non-negative integer)")
      ->check(non_negative_integer());
  sub->add_option("--set", a->sets, "Override a scenario key before validation: key=value (dotted path, "
                                    "e.g. chip.overrides.num_cores=4, injections.0.step=1); repeatable");
  sub->add_flag("--json", a->json, "Print the machine-readable result (every report) on stdout");
  sub->add_option("--jobs,-j", a->jobs, "Simulations to run in parallel (child processes)")->check(CLI::Range(1, 256));
  sub->add_flag("--no-baseline", a->no_baseline, "Skip the no-probe run (no capture overhead in the report)");
  sub->add_flag("--no-trace", a->no_trace, "Do not record the trace");
  sub->add_option("--trace-steps", a->trace_steps,
                  "Record and write the trace of steps FIRST:LAST (or one STEP) of each rank only: a long run holds "
                  "and writes about that much");
  sub->add_option("--trace-format", a->trace_formats,
                  "Trace file(s) to write: json (trace.json, Chrome/Perfetto JSON; the default) and/or perfetto "
                  "(trace.pftrace, Perfetto's protobuf trace); repeatable")
      ->check(CLI::IsMember({"json", "perfetto"}));
  sub->add_flag("--strict", a->strict,
                "Treat preparation warnings as bad input (exit 2): a probe config that selects nothing, an msprobe "
                "key with no equivalent");
  sub->add_option("--timeout", a->timeout, "Seconds after which a simulation is killed (0: never)")
      ->check(non_negative_integer());
  sub->add_option("--host-memory", a->host_memory_mib,
                  "MiB of host memory the simulations running at once may use; a run estimated to need more is "
                  "refused before it starts (default 0: the memory available on this machine)")
      ->check(non_negative_integer());
  sub->add_option("--partitions", a->partitions,
                  "Simulate each job's chips in K processes of this machine (whole servers each), synchronised as "
                  "under mpirun -np K; the result is the same bytes as one process")
      ->check(CLI::Range(1, 4096));
  return [a] { return run(*a); };
}

}  // namespace probelab::cli
