// What the simulation benchmarks share: CPU clocks, scratch directories, preparing a scenario
// given as YAML text, and one simulation in a forked child (SystemC elaborates once per process,
// so every measured run needs its own), reporting its CPU time, step cycles and peak RSS.
// Header-only: each bench binary includes it once.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/run/process_pool.h"
#include "sim/run/simulation.h"
#include "sim/scenario/prepared_run.h"
#include "sim/scenario/source_root.h"

namespace probelab::bench {

inline double cpu_seconds(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// A per-process directory under the system temp directory (not created).
inline std::filesystem::path scratch(const std::string& what) {
  return std::filesystem::temp_directory_path() / fmt::format("probelab_bench_{}_{}", what, ::getpid());
}

/// Writes `yaml` to <scratch(tag)>/<file_name> and returns the path (the caller removes its directory).
inline std::filesystem::path write_scenario(const std::string& yaml, const std::string& tag,
                                            const std::string& file_name = "bench.yaml") {
  const std::filesystem::path dir = scratch("scenario_" + tag);
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / file_name;
  std::ofstream(file) << yaml;
  return file;
}

/// Loads and prepares a scenario given as text (bundled models only: the source root's).
inline sim::PreparedRun prepare(const std::string& yaml) {
  sim::LoadOptions o;
  o.source_root = sim::find_source_root();
  const std::filesystem::path file = write_scenario(yaml, "prep");
  sim::PreparedRun run = sim::prepare_run(sim::load_scenario(file, o));
  std::error_code ec;
  std::filesystem::remove_all(file.parent_path(), ec);
  return run;
}

struct ChildRun {
  double cpu_s = 0;           // CPU time of the child's simulate() call
  std::uint64_t cycles = 0;   // rank 0's step cycles (setup and the end-of-run drain excluded)
  double rss_mb = 0;          // the child's peak RSS
};

/// Simulates `run` in a forked child (with `trace`: recording the trace and writing trace.json,
/// as `probelab run` does by default). Throws std::runtime_error when the child fails or the
/// simulation's status is not "ok".
inline ChildRun simulate_in_child(const sim::PreparedRun& run, bool probes, bool trace = false) {
  using nlohmann::json;
  const std::filesystem::path out = scratch("run");
  const std::filesystem::path result = out / "result.json";
  std::filesystem::create_directories(out);
  sim::ProcessPool pool(1);
  pool.submit([&]() -> int {
    ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    const double t0 = cpu_seconds();
    sim::SimRequest req;
    req.run = &run;
    req.probes = probes;
    req.out_dir = out;
    req.trace = trace;
    const json r = sim::simulate(req);
    const double t1 = cpu_seconds();
    std::uint64_t steps = 0;
    for (const auto& c : r["cycles"]["per_step"].at(0)) steps += c.get<std::uint64_t>();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::ofstream(result) << json{{"cpu_s", t1 - t0}, {"cycles", steps}, {"rss_kb", ru.ru_maxrss}, {"status", r["status"]}}
                                 .dump();
    return 0;
  });
  bool ok = true;
  pool.run([&](std::size_t, const sim::ChildStatus& st) { ok = st.ok(); });
  std::ifstream in(result);
  std::stringstream ss;
  ss << in.rdbuf();
  std::error_code ec;
  std::filesystem::remove_all(out, ec);
  if (!ok || ss.str().empty()) throw std::runtime_error("simulation child failed");
  const json j = json::parse(ss.str());
  if (j["status"] != "ok") throw std::runtime_error("simulation status " + j["status"].dump());
  return {j["cpu_s"].get<double>(), j["cycles"].get<std::uint64_t>(),
          static_cast<double>(j["rss_kb"].get<long>()) / 1024.0};
}

}  // namespace probelab::bench
