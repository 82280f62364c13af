// Cost of simulating, and cost of probing, measured on bundled models:
//  - BM_SimulatedStep/<model>: host CPU seconds of one simulated step against the same graph on
//    the FP32 CPU reference (graph::run_graph_reference, in the parent). A forked child runs the
//    scenario with 2 and with S steps (S >= 7, and enough for about 50 ms of CPU between the two
//    runs: hundreds for the small models); the step's cost is the difference divided by S - 2, so
//    elaboration and setup (weights uploaded once) are left out, and so is the heap's warm-up: the
//    kernels' temporary tensors still fault in fresh pages in the second step (mobilenetv2_stack:
//    6,900 page faults, 27 MB, there; about 35 a step after it), while the reference is measured
//    warm; `setup_ms` reports all of it. The reference is the mean over as many steps, after
//    one not counted (a small model's single reference run, 10-20 us, moved its ratio by 1.5x
//    from one run of the benchmark to the next). The
//    step includes generating its inputs (the data generator, as the simulated host does;
//    `input_generation_ms`), the reference does not. Counters: simulated cycles per host second
//    and ratio_vs_reference (target <= 1.5x with all detection on, for every bundled model);
//  - BM_LongRun/<case>: host CPU per step of a whole run at 250 and at 2000 steps (trace: report
//    and trace.json included; statistics_dumps: training with a statistics capture of every op,
//    the dump manifest written every step), and the growth exponent between them (target <= 1.1:
//    cost linear in steps);
//  - BM_CaptureOverhead/<case>: simulated step-cycle overhead of capture against the same run
//    without probes (sum of the step times: setup and the end-of-run drain excluded), for
//    statistics on every op (in-kernel, and as separate capture tasks drained every step for
//    comparison) and full capture at sample rate 0.1 with ping-pong and with a single buffer
//    (targets: <= 1 %, <= 3 %, single shown beside), and the host CPU cost of probes against
//    probes off (target <= 1.3x for statistics on every op).
// Simulated cycles are deterministic; host times are best-of-N thread/process CPU times (the
// capture host cost: the median of per-pair ratios of alternating runs), so load from other
// processes on the machine moves them little. Run from the repository root (or
// set PROBELAB_SOURCE_DIR).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "bench/support/sim_child.h"
#include "graph/op_registry.h"
#include "sim/scenario/data_gen.h"
#include "sim/scenario/prepared_run.h"
#include "sim/run/simulation.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace probelab;

using bench::cpu_seconds;
using bench::prepare;

struct SimResult {
  std::uint64_t cycles = 0;
  double cpu_s = 0;
};

SimResult simulate_in_child(const sim::PreparedRun& run, bool probes) {
  const bench::ChildRun c = bench::simulate_in_child(run, probes);
  return {c.cycles, c.cpu_s};
}

// Step `step`'s data inputs as the simulated host generates them (data generator of the scenario).
std::map<std::string, graph::Tensor> step_feeds(const sim::PreparedRun& run, std::uint32_t step) {
  const sim::DataGenerator gen(run.scenario.data);
  std::map<std::string, graph::Tensor> feeds;
  for (const auto& name : run.workload.data_inputs) {
    const graph::TensorDesc d = run.workload.reference.tensor(name).desc;
    auto it = run.workload.input_inits.find(name);
    feeds.emplace(name, gen.make_input(name, d, step, 0, it == run.workload.input_inits.end() ? nullptr : &it->second));
  }
  return feeds;
}

// Host CPU seconds (this thread) of generating one step's inputs and of the FP32 CPU reference
// of one step of the run's workload on them: the mean over `n` steps, each on its own step's
// inputs, after one that is not counted (it refills the caches the children used), as the
// simulated step is the mean over the steps of a run.
std::pair<double, double> reference_seconds(const sim::PreparedRun& run, int n) {
  double gen = 0, ref = 0;
  for (int i = -1; i < n; ++i) {
    const double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    const std::map<std::string, graph::Tensor> feeds = step_feeds(run, static_cast<std::uint32_t>(i + 1));
    const double t1 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    auto out = graph::run_graph_reference(run.workload.reference, feeds, graph::RefPrecision::F32);
    benchmark::DoNotOptimize(out);
    if (i < 0) continue;
    gen += t1 - t0;
    ref += cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t1;
  }
  return {gen / n, ref / n};
}

// A GEMM-heavy inference step with every detection circuit and the exception ISR on.
std::string step_scenario(const std::string& model, int steps) {
  return fmt::format(R"(name: bench_step
model: {}
mode: inference
steps: {}
seed: 1
probes:
  watch_points: []
  exceptions: {{kinds: all}}
)",
                     model, steps);
}

// Host time of a simulated step with all detection on vs the FP32 CPU reference of the same graph.
constexpr double kStepRatioTarget = 1.5;

// Steps of the shorter run (above).
constexpr int kBaseSteps = 2;

// Steps of the longer run: at least kBaseSteps + 5, and enough that the difference of the two runs
// is about kDifferenceS of CPU (a small model's step is a fraction of a millisecond, within the
// spread of a run's setup), estimated from one pair of runs.
constexpr double kDifferenceS = 0.05;
int steps_for(const sim::PreparedRun& base, const std::string& model) {
  constexpr int kMinSteps = kBaseSteps + 5, kMaxSteps = 2002;
  const double a = simulate_in_child(base, true).cpu_s;
  const double b = simulate_in_child(prepare(step_scenario(model, kMinSteps)), true).cpu_s;
  const double step = std::max(1e-6, (b - a) / (kMinSteps - kBaseSteps));
  return std::clamp(kBaseSteps + static_cast<int>(std::ceil(kDifferenceS / step)), kMinSteps, kMaxSteps);
}

void BM_SimulatedStep(benchmark::State& state, const std::string& model) {
  constexpr int kRounds = 5;
  const sim::PreparedRun base = prepare(step_scenario(model, kBaseSteps));
  const int kSteps = steps_for(base, model);
  const sim::PreparedRun many = prepare(step_scenario(model, kSteps));
  for (auto _ : state) {
    // The measurements alternate, so a change of load on the machine meets all of them; the
    // least disturbed (smallest) of each is kept.
    SimResult a{0, std::numeric_limits<double>::max()}, b = a;
    double ref = std::numeric_limits<double>::max(), gen = ref;
    for (int i = 0; i < kRounds; ++i) {
      const SimResult ra = simulate_in_child(base, true), rb = simulate_in_child(many, true);
      a = {ra.cycles, std::min(a.cpu_s, ra.cpu_s)};
      b = {rb.cycles, std::min(b.cpu_s, rb.cpu_s)};
      // The reference runs warm, as the simulated step does (its cost is the difference of two
      // runs), and is the mean over as many steps as the simulated one.
      const auto [g, r] = reference_seconds(base, kSteps - kBaseSteps);
      gen = std::min(gen, g);
      ref = std::min(ref, r);
    }
    const double step_s = std::max(1e-9, (b.cpu_s - a.cpu_s) / (kSteps - kBaseSteps));
    const double step_cycles = static_cast<double>(b.cycles - a.cycles) / (kSteps - kBaseSteps);
    state.SetIterationTime(step_s);
    state.counters["step_cycles"] = step_cycles;
    state.counters["cycles_per_host_s"] = step_cycles / step_s;
    state.counters["setup_ms"] = (a.cpu_s - kBaseSteps * step_s) * 1e3;
    state.counters["reference_ms"] = ref * 1e3;
    state.counters["input_generation_ms"] = gen * 1e3;
    state.counters["steps"] = kSteps;
    state.counters["ratio_vs_reference"] = step_s / ref;
    fmt::print(stderr,
               "[simulated step] {}: {:.0f} cycles in {:.2f} ms host CPU ({:.3g} cycles/s; setup {:.1f} ms; of the step, "
               "generating its inputs {:.2f} ms; {} steps against {}), CPU reference {:.2f} ms, ratio {:.2f}x (target <= {:.1f}x: {})\n",
               model, step_cycles, step_s * 1e3, step_cycles / step_s, (a.cpu_s - kBaseSteps * step_s) * 1e3, gen * 1e3, kSteps,
               kBaseSteps, ref * 1e3,
               step_s / ref, kStepRatioTarget, step_s / ref <= kStepRatioTarget ? "met" : "missed");
  }
}
// Every bundled model (scenarios/models/), the ONNX ones at the sizes of their scenarios.
#define PROBELAB_STEP_BENCH(name, model) \
  BENCHMARK_CAPTURE(BM_SimulatedStep, name, std::string(model))->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond)
PROBELAB_STEP_BENCH(mlp, "mlp");
PROBELAB_STEP_BENCH(mlp_loss_scaled, "mlp_loss_scaled");
PROBELAB_STEP_BENCH(resnet16, "resnet16");
PROBELAB_STEP_BENCH(resnet16_collapsed_bn, "resnet16_collapsed_bn");
PROBELAB_STEP_BENCH(transformer_block, "transformer_block");
PROBELAB_STEP_BENCH(transformer_wide, "transformer_wide");
PROBELAB_STEP_BENCH(large_k_matmul, "large_k_matmul");
PROBELAB_STEP_BENCH(gpt2_block, "{name: gpt2_block, dims: {batch: 1, seq: 128}}");
PROBELAB_STEP_BENCH(llama_block, "{name: llama_block, dims: {batch: 1, seq: 64}}");
PROBELAB_STEP_BENCH(mobilenetv2_stack, "{name: mobilenetv2_stack, dims: {batch: 2}}");
PROBELAB_STEP_BENCH(resnet50_stage, "{name: resnet50_stage, dims: {batch: 1}}");
PROBELAB_STEP_BENCH(rnn_encoder, "{name: rnn_encoder, dims: {batch: 4, seq: 32}}");
PROBELAB_STEP_BENCH(cnn_int8, "cnn_int8");
#undef PROBELAB_STEP_BENCH

// A long run costs the same per step as a short one: host CPU of the whole simulation at 250 and
// at 2000 steps, for the MLP inference with every detection on (report, anomalies linked in the
// trace, trace.json written) and for the MLP training with statistics probes on every op (a
// dump manifest entry per captured tensor, the manifest brought up to date every step). Counter
// growth_exponent: log(t_2000 / t_250) / log(8), 1 when linear (target <= 1.1).
std::string long_run_scenario(bool dumps, int steps) {
  if (!dumps) return step_scenario("mlp", steps);
  return fmt::format(R"(name: bench_long
model: mlp
mode: training
steps: {}
seed: 1
training:
  optimizer: {{type: sgd, lr: 1.0e-3}}
probes:
  mode: statistics
  watch_points: ["*"]
)",
                     steps);
}

void BM_LongRun(benchmark::State& state, bool dumps) {
  constexpr int kShort = 250, kLong = 2000;
  const sim::PreparedRun short_run = prepare(long_run_scenario(dumps, kShort));
  const sim::PreparedRun long_run = prepare(long_run_scenario(dumps, kLong));
  for (auto _ : state) {
    double a = std::numeric_limits<double>::max(), b = a;
    for (int i = 0; i < 3; ++i) {
      a = std::min(a, bench::simulate_in_child(short_run, true, !dumps).cpu_s);
      b = std::min(b, bench::simulate_in_child(long_run, true, !dumps).cpu_s);
    }
    const double exponent = std::log(b / a) / std::log(static_cast<double>(kLong) / kShort);
    state.SetIterationTime(b);
    state.counters["us_per_step_short"] = a / kShort * 1e6;
    state.counters["us_per_step_long"] = b / kLong * 1e6;
    state.counters["growth_exponent"] = exponent;
    fmt::print(stderr, "[long run] {}: {:.0f} us per step over {} steps, {:.0f} us over {}; growth exponent {:.2f} "
               "(target <= 1.1: {})\n", dumps ? "mlp training with statistics dumps" : "mlp with trace",
               a / kShort * 1e6, kShort, b / kLong * 1e6, kLong, exponent, exponent <= 1.1 ? "met" : "missed");
  }
}
BENCHMARK_CAPTURE(BM_LongRun, trace, false)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LongRun, statistics_dumps, true)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

// The capture cases of scenarios/06_capture_overhead.yaml on the wide transformer block.
std::string capture_scenario(const std::string& probes) {
  return fmt::format(R"(name: bench_capture
model: transformer_wide
mode: inference
steps: 24
seed: 9
probes:
{}
)",
                     probes);
}

void BM_CaptureOverhead(benchmark::State& state, const std::string& label, const std::string& probes) {
  const sim::PreparedRun run = prepare(capture_scenario(probes));
  for (auto _ : state) {
    // Host cost: runs without and with probes alternate, the ratio is taken per pair and the
    // median of 9 pairs kept (CPU time on a shared VM drifts by tens of percent between runs).
    std::vector<double> ratios, on_cpu;
    SimResult off, on;
    for (int i = 0; i < 9; ++i) {
      off = simulate_in_child(run, false);
      on = simulate_in_child(run, true);
      ratios.push_back(on.cpu_s / off.cpu_s);
      on_cpu.push_back(on.cpu_s);
    }
    std::sort(ratios.begin(), ratios.end());
    std::sort(on_cpu.begin(), on_cpu.end());
    const double host_x = ratios[ratios.size() / 2];
    const double overhead = 100.0 * (static_cast<double>(on.cycles) - static_cast<double>(off.cycles)) /
                            static_cast<double>(off.cycles);
    state.SetIterationTime(on_cpu[on_cpu.size() / 2]);
    state.counters["cycles_off"] = static_cast<double>(off.cycles);
    state.counters["cycles_on"] = static_cast<double>(on.cycles);
    state.counters["overhead_pct"] = overhead;
    state.counters["host_cost_x"] = host_x;
    fmt::print(stderr, "[capture overhead] {}: {:.2f}% simulated cycles, host CPU {:.2f}x (pairs {:.2f}-{:.2f})\n",
               label, overhead, host_x, ratios.front(), ratios.back());
  }
}
BENCHMARK_CAPTURE(BM_CaptureOverhead, stats_every_op, std::string("stats_every_op"),
                  std::string("  mode: statistics\n  watch_points: [\"*\"]\n"
                              "  capture: {buffer_bytes: 524288, ping_pong: true, overrun: stall}"))
    ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CaptureOverhead, stats_every_op_as_tasks_step_drain, std::string("stats_every_op_as_tasks_step_drain"),
                  std::string("  mode: statistics\n  watch_points: [\"*\"]\n"
                              "  capture: {buffer_bytes: 524288, ping_pong: true, overrun: stall,\n"
                              "            in_kernel_statistics: false, drain: step}"))
    ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CaptureOverhead, full_0_1_ping_pong, std::string("full_0_1_ping_pong"),
                  std::string("  mode: full\n  sample_rate: 0.1\n  watch_points: [\"*\"]\n"
                              "  capture: {buffer_bytes: 524288, ping_pong: true, overrun: stall}"))
    ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CaptureOverhead, full_0_1_single, std::string("full_0_1_single"),
                  std::string("  mode: full\n  sample_rate: 0.1\n  watch_points: [\"*\"]\n"
                              "  capture: {buffer_bytes: 524288, ping_pong: false, overrun: stall}"))
    ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
