// Campaign throughput: trials per minute of the bundled campaign
// (scenarios/campaigns/transformer_nan_bitflip.yaml, every trial a forked simulation of the
// transformer block) with one and with two worker processes, and the speedup from 1 to 2.
// Each measurement is a whole campaign of `trials` trials plus its fault-free golden runs.
// Run from the repository root (or set PROBELAB_SOURCE_DIR).
#include <chrono>
#include <filesystem>

#include <benchmark/benchmark.h>
#include <unistd.h>

#include "sim/campaign/campaign_runner.h"
#include "sim/scenario/source_root.h"

namespace {

namespace fs = std::filesystem;
using probelab::sim::Campaign;
using probelab::sim::CampaignOptions;

// Seconds of one campaign of `trials` trials with `jobs` workers.
double campaign_seconds(std::uint64_t trials, int jobs) {
  CampaignOptions o;
  const fs::path root = probelab::sim::find_source_root();
  o.scenario = root / "scenarios" / "campaigns" / "transformer_nan_bitflip.yaml";
  o.load.source_root = root;
  o.trials = trials;
  o.jobs = jobs;
  o.out = fs::temp_directory_path() / ("probelab_bench_campaign_" + std::to_string(::getpid()));
  Campaign c(o);
  c.prepare();
  auto comm = probelab::sim::make_campaign_comm();
  const auto t0 = std::chrono::steady_clock::now();
  const auto summary = c.run(*comm);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::error_code ec;
  fs::remove_all(o.out, ec);
  if (!summary.value("complete", false)) throw std::runtime_error("campaign incomplete");
  return s;
}

void BM_CampaignTrialsPerMinute(benchmark::State& state) {
  const auto trials = static_cast<std::uint64_t>(state.range(0));
  const int jobs = static_cast<int>(state.range(1));
  double seconds = 0;
  for (auto _ : state) {
    seconds = campaign_seconds(trials, jobs);
    state.SetIterationTime(seconds);
  }
  state.counters["trials_per_min"] = static_cast<double>(trials) / seconds * 60.0;
  state.counters["jobs"] = jobs;
}
BENCHMARK(BM_CampaignTrialsPerMinute)
    ->Args({96, 1})
    ->Args({96, 2})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

// Both in one process, so that machine noise largely cancels in the ratio.
void BM_CampaignScaling1To2(benchmark::State& state) {
  const auto trials = static_cast<std::uint64_t>(state.range(0));
  double one = 0, two = 0;
  for (auto _ : state) {
    one = campaign_seconds(trials, 1);
    two = campaign_seconds(trials, 2);
    state.SetIterationTime(one + two);
  }
  state.counters["trials_per_min_1"] = static_cast<double>(trials) / one * 60.0;
  state.counters["trials_per_min_2"] = static_cast<double>(trials) / two * 60.0;
  state.counters["speedup"] = one / two;
}
BENCHMARK(BM_CampaignScaling1To2)->Arg(96)->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);

}  // namespace
