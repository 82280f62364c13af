// Cost of a data-parallel job against its rank count (issue: cluster scale):
//  - BM_RankScaling/<R>/<B>: the MLP training job of scenarios/02b (ring all-reduce, FP32
//    accumulation, statistics probes and the consistency check) at R = 8 .. 256 ranks in one
//    process, with one AllReduce per parameter (B = 0) or the gradients in one DDP-style bucket
//    (B = 1, training.allreduce.bucket_mb: 25: 2(R-1) ring messages per rank and step instead of
//    per parameter), and the same bucket with a binary-tree all-reduce (B = 2: a constant number
//    of messages per rank, 2(R-1) in all, against the ring's 2(R-1) per rank; what the simulator
//    costs per rank when the algorithm's own message count does not grow). A forked child runs
//    it with 1 and with S = 1 + max(4, 512 / R) steps (about the same number of rank-steps, so
//    that the difference is tens of milliseconds of CPU at every size, not the 4 ms of two 8-rank
//    steps; at least four steps, so that at 256 ranks the difference is not lost in the spread of
//    a second of setup), each the best of three runs, the two lengths alternating; the
//    host CPU time of a step is the difference divided by S - 1 (elaboration and setup left out,
//    reported as `setup_ms`). Counters: host microseconds
//    per rank-step and the peak RSS (getrusage ru_maxrss) of a child that runs 3 steps (the report
//    keeps some data per step: a 65-step run holds more than a 3-step one).
//  - BM_RankScalingFit: per B, least-squares growth exponents of step time and of peak RSS against
//    the rank count over the runs above (targets <= 1.1 both), the 256-to-8 step-time ratio (target
//    <= 40) and the 256-rank peak RSS (target < 4 GB).
//  - BM_StepMemory: peak RSS of the whole `probelab run` of the 8-rank job at 50 and 400 steps,
//    and what each further rank-step adds.
//  - BM_MpiPartitions/<K>/<R>: `mpirun --oversubscribe -np K probelab run --no-baseline
//    --no-trace` of an R-rank job (R/8 servers; the simulation alone: no probe-off run, no
//    timeline); wall time and efficiency T1 / (K T_K). On a machine with fewer cores than K the
//    processes share them, so the efficiency there measures the synchronisation overhead (one
//    window exchange per lookahead of simulated time), not the speed-up.
// Host times are CPU seconds of the child (best of N), so load from other processes moves them
// little. Run from the repository root (or set PROBELAB_SOURCE_DIR).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/support/sim_child.h"
#include "sim/run/simulation.h"
#include "sim/scenario/prepared_run.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace probelab;

using bench::prepare;
using bench::scratch;

// The job's all-reduce: one per parameter (ring), one bucket (ring), one bucket (tree).
enum class Variant { PerParameter = 0, Bucketed = 1, BucketedTree = 2 };
const char* variant_name(Variant v) {
  return v == Variant::PerParameter ? "per parameter" : v == Variant::Bucketed ? "one bucket" : "one bucket, tree";
}
const char* variant_key(Variant v) {
  return v == Variant::PerParameter ? "" : v == Variant::Bucketed ? "bucketed_" : "tree_";
}

std::string job_yaml(int ranks, int steps, Variant variant = Variant::PerParameter) {
  return fmt::format(R"(name: bench_cluster
model: mlp_loss_scaled
mode: training
ranks: {}
steps: {}
seed: 21
training:
  loss: model
  optimizer: {{type: sgd, lr: 5.0e-5}}
  allreduce: {{algorithm: {}, accumulation: fp32, bucket_mb: {}}}
probes:
  mode: statistics
  watch_points: ["*/gradient/reduced", "*/updated"]
  consistency: {{enabled: true, reference_rank: 0, mode: statistics, tolerance: 1.0e-3}}
)",
                     ranks, steps, variant == Variant::BucketedTree ? "tree" : "ring",
                     variant == Variant::PerParameter ? 0 : 25);
}

struct ChildCost {
  double cpu_s = 0;
  double rss_mb = 0;
};

ChildCost simulate_in_child(const sim::PreparedRun& run) {
  const bench::ChildRun c = bench::simulate_in_child(run, true);
  return {c.cpu_s, c.rss_mb};
}

ChildCost best_of(const sim::PreparedRun& run, int n) {
  ChildCost best{std::numeric_limits<double>::max(), 0};
  for (int i = 0; i < n; ++i) {
    const ChildCost c = simulate_in_child(run);
    best.cpu_s = std::min(best.cpu_s, c.cpu_s);
    best.rss_mb = std::max(best.rss_mb, c.rss_mb);
  }
  return best;
}

/// The best of n runs of each of `a` and `b`, alternating (a, b, a, b, ...), so that a change of
/// the machine's load meets both series alike.
std::pair<ChildCost, ChildCost> best_of_alternating(const sim::PreparedRun& a, const sim::PreparedRun& b, int n) {
  ChildCost best_a{std::numeric_limits<double>::max(), 0}, best_b = best_a;
  for (int i = 0; i < n; ++i) {
    for (auto [run, best] : {std::pair{&a, &best_a}, std::pair{&b, &best_b}}) {
      const ChildCost c = simulate_in_child(*run);
      best->cpu_s = std::min(best->cpu_s, c.cpu_s);
      best->rss_mb = std::max(best->rss_mb, c.rss_mb);
    }
  }
  return {best_a, best_b};
}

struct Point {
  double step_s = 0, rss_mb = 0;
};
std::map<int, std::map<int, Point>>& points() {  // variant -> ranks -> point
  static std::map<int, std::map<int, Point>> p;
  return p;
}

void BM_RankScaling(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const auto variant = static_cast<Variant>(state.range(1));
  const int reps = 3;
  const int steps = 1 + std::max(4, 512 / ranks);
  const sim::PreparedRun one = prepare(job_yaml(ranks, 1, variant));
  const sim::PreparedRun many = prepare(job_yaml(ranks, steps, variant));
  const sim::PreparedRun three = prepare(job_yaml(ranks, 3, variant));
  for (auto _ : state) {
    const auto [a, b] = best_of_alternating(one, many, reps);
    const double rss_mb = steps == 3 ? b.rss_mb : best_of(three, 1).rss_mb;
    const double step_s = std::max(1e-9, (b.cpu_s - a.cpu_s) / (steps - 1));
    points()[static_cast<int>(variant)][ranks] = {step_s, rss_mb};
    state.SetIterationTime(step_s);
    state.counters["us_per_rank_step"] = step_s / ranks * 1e6;
    state.counters["peak_rss_mb"] = rss_mb;
    state.counters["kb_per_rank"] = rss_mb * 1024 / ranks;
    state.counters["setup_ms"] = (a.cpu_s - step_s) * 1e3;
    fmt::print(stderr, "[ranks {:>4}, {}] step {:.1f} ms host CPU ({:.0f} us per rank-step, {} steps), peak RSS {:.0f} MB (3 steps), "
               "setup {:.0f} ms\n",
               ranks, variant_name(variant), step_s * 1e3, step_s / ranks * 1e6, steps, rss_mb, (a.cpu_s - step_s) * 1e3);
  }
}
BENCHMARK(BM_RankScaling)->ArgsProduct({{8, 16, 32, 64, 128, 256}, {0, 1, 2}})
    ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

// Least-squares slope of log(y) against log(x).
double exponent(const std::vector<std::pair<double, double>>& xy) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const auto n = static_cast<double>(xy.size());
  for (auto [x, y] : xy) {
    const double lx = std::log(x), ly = std::log(y);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

void BM_RankScalingFit(benchmark::State& state) {
  for (auto _ : state) {
    for (const auto& [v, pts] : points()) {
      const auto variant = static_cast<Variant>(v);
      if (pts.size() < 2) continue;
      std::vector<std::pair<double, double>> t, m;
      for (const auto& [r, p] : pts) {
        t.emplace_back(r, p.step_s);
        m.emplace_back(r, p.rss_mb);
      }
      const auto& lo = *pts.begin();
      const auto& hi = *pts.rbegin();
      const std::string k = variant_key(variant);
      state.counters[k + "time_exponent"] = exponent(t);
      state.counters[k + "rss_exponent"] = exponent(m);
      state.counters[k + "time_ratio_hi_lo"] = hi.second.step_s / lo.second.step_s;
      state.counters[k + "rank_ratio_hi_lo"] = static_cast<double>(hi.first) / lo.first;
      state.counters[k + "peak_rss_mb_hi"] = hi.second.rss_mb;
      fmt::print(stderr,
                 "[fit, {}] growth exponents: step time {:.3f} (target <= 1.1), peak RSS {:.3f} (target <= 1.1); "
                 "{} ranks vs {}: {:.1f}x the step time (target <= 40x at 256 vs 8), peak {:.0f} MB (target < 4096)\n",
                 variant_name(variant), exponent(t), exponent(m), hi.first, lo.first,
                 hi.second.step_s / lo.second.step_s, hi.second.rss_mb);
    }
    if (points().empty()) state.SkipWithError("run BM_RankScaling first (at least two rank counts)");
  }
}
BENCHMARK(BM_RankScalingFit)->Iterations(1);

fs::path probelab_binary() { return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "probelab"; }

struct CommandCost {
  double wall = 0, cpu = 0, max_rss_mb = 0;
};

// Wall seconds, user+system CPU seconds and the largest peak RSS of one shell command (with every
// process it waited for).
CommandCost run_command(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("failed: " + cmd);
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  return {wall, cpu, static_cast<double>(ru.ru_maxrss) / 1024.0};
}

// Memory against the number of steps: the whole `probelab run` (simulation child and the parent
// that writes the report) of the 8-rank job at 50 and at 400 steps, largest peak RSS of its
// processes; KB per rank-step is what a longer run adds (what the report keeps per step and rank,
// and whatever else grows).
void BM_StepMemory(benchmark::State& state) {
  constexpr int kRanks = 8, kShort = 50, kLong = 400;
  std::map<int, CommandCost> cost;
  for (auto _ : state) {
    for (int steps : {kShort, kLong}) {
      const fs::path file = bench::write_scenario(job_yaml(kRanks, steps), fmt::format("steps{}", steps), "bench_cluster.yaml");
      const fs::path out = scratch(fmt::format("steps_out{}", steps));
      cost[steps] = run_command(fmt::format("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 {} run {} --out {} --no-baseline --no-trace "
                                            ">/dev/null 2>&1",
                                            probelab_binary().string(), file.string(), out.string()));
      std::error_code ec;
      fs::remove_all(file.parent_path(), ec);
      fs::remove_all(out, ec);
    }
    const double kb = (cost[kLong].max_rss_mb - cost[kShort].max_rss_mb) * 1024 / ((kLong - kShort) * kRanks);
    state.SetIterationTime(cost[kLong].cpu);
    state.counters["peak_rss_mb_short"] = cost[kShort].max_rss_mb;
    state.counters["peak_rss_mb_long"] = cost[kLong].max_rss_mb;
    state.counters["kb_per_rank_step"] = kb;
    fmt::print(stderr, "[steps] {} ranks: peak RSS {:.0f} MB at {} steps, {:.0f} MB at {}: {:.1f} KB per rank-step\n", kRanks,
               cost[kShort].max_rss_mb, kShort, cost[kLong].max_rss_mb, kLong, kb);
  }
}
BENCHMARK(BM_StepMemory)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

std::map<int, double>& mpi_walls() {
  static std::map<int, double> w;
  return w;
}

void BM_MpiPartitions(benchmark::State& state) {
  const int procs = static_cast<int>(state.range(0));
  const int ranks = static_cast<int>(state.range(1));
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    state.SkipWithError("mpirun is not installed");
    return;
  }
  const fs::path file = bench::write_scenario(job_yaml(ranks, 2), fmt::format("mpi{}", procs), "bench_cluster.yaml");
  const fs::path out = scratch(fmt::format("mpi_out{}", procs));
  const std::string cmd = fmt::format(
      "SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 mpirun --oversubscribe --allow-run-as-root -np {} {} run {} --out {} "
      "--no-baseline --no-trace >/dev/null 2>&1",
      procs, probelab_binary().string(), file.string(), out.string());
  for (auto _ : state) {
    const auto [wall, cpu, rss] = run_command(cmd);
    mpi_walls()[procs * 100000 + ranks] = wall;
    state.SetIterationTime(wall);
    state.counters["wall_s"] = wall;
    state.counters["cpu_s"] = cpu;
    const auto one = mpi_walls().find(100000 + ranks);
    if (one != mpi_walls().end()) state.counters["efficiency"] = one->second / (procs * wall);
    fmt::print(stderr, "[mpi -np {}] {} ranks, 2 steps: {:.1f} s wall, {:.1f} s CPU{}\n", procs, ranks, wall, cpu,
               one == mpi_walls().end() ? std::string() : fmt::format(", efficiency {:.2f}", one->second / (procs * wall)));
  }
  std::error_code ec;
  fs::remove_all(file.parent_path(), ec);
  fs::remove_all(out, ec);
}
BENCHMARK(BM_MpiPartitions)->Args({1, 64})->Args({2, 64})->Args({4, 64})
    ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
// 1024 ranks across 4 processes (128 servers): completes, and how long it takes.
BENCHMARK(BM_MpiPartitions)->Args({4, 1024})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
