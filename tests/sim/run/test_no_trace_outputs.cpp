// `probelab run --no-trace` (what a user passes for a large job) writes the same report.json,
// summary.txt, report.html and perf_ops.csv as the run that records the trace: the per-op cycles
// of collectives and probe tasks come from the stream engines' task records, not from the trace's
// spans (under --no-trace they were 0, and the page's per-op chart left the all-reduce out).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;

// Two servers of two chips: a hierarchical all-reduce per parameter (no bucket), statistics
// captures of the reduced gradients and the updated weights, a breakpoint-free run of 3 steps.
constexpr const char* kJob = R"(name: job
model: mlp
mode: training
ranks: 4
steps: 3
seed: 12
cluster: {chips_per_server: 2}
training:
  optimizer: {type: sgd, lr: 0.01}
  allreduce: {algorithm: hierarchical, accumulation: fp32}
probes:
  mode: statistics
  watch_points: ["*/gradient/reduced", "fc1/*"]
  consistency: {enabled: true, reference_rank: 0, mode: statistics}
)";

void expect_same_reports(const TempDir& dir, const std::string& a, const std::string& b) {
  for (const char* f : {"report.json", "summary.txt", "report.html", "perf_ops.csv"}) {
    const std::string x = test::slurp(dir.path() / a / "job" / f), y = test::slurp(dir.path() / b / "job" / f);
    ASSERT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == y) << f << " differs between " << a << " and " << b;
  }
}

// `probelab run job.yaml ARGS` passes.
void run_ok(const TempDir& dir, const std::string& args) {
  const test::CmdResult r = test::probelab("run job.yaml " + args, dir);
  ASSERT_EQ(r.code, 0) << args << "\n" << r.err << r.out;
}

TEST(NoTraceOutputs, TheReportsAreTheOnesOfTheTracedRun) {
  TempDir dir;
  dir.write("job.yaml", kJob);
  ASSERT_NO_FATAL_FAILURE(run_ok(dir, "--out on"));
  ASSERT_NO_FATAL_FAILURE(run_ok(dir, "--out off --no-trace"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "off" / "job" / "trace.json"));
  ASSERT_NO_FATAL_FAILURE(expect_same_reports(dir, "on", "off"));

  // What the traced run's stream spans gave: every collective and probed op of every rank
  // counted, with their cycles.
  const auto r = nlohmann::json::parse(test::slurp(dir.path() / "off" / "job" / "report.json"));
  int collectives = 0, probed = 0;
  for (const auto& op : r["ops"]) {
    if (op["type"] == "AllReduce") {
      ++collectives;
      EXPECT_EQ(op["tasks"], 3) << op.dump();  // one a step
      EXPECT_GT(op["cycles"].get<std::uint64_t>(), 0u) << op.dump();
    }
    if (op["probe_tasks"].get<std::uint64_t>() > 0) {
      ++probed;
      EXPECT_GT(op["probe_cycles"].get<std::uint64_t>(), 0u) << op.dump();
    }
  }
  EXPECT_GT(collectives, 0);
  EXPECT_GT(probed, 0);
}

TEST(NoTraceOutputs, TwoPartitionsWithoutTheTraceGiveTheTracedReports) {
  TempDir dir;
  dir.write("job.yaml", kJob);
  ASSERT_NO_FATAL_FAILURE(run_ok(dir, "--out on"));
  ASSERT_NO_FATAL_FAILURE(run_ok(dir, "--out p2 --no-trace --partitions 2"));
  ASSERT_NO_FATAL_FAILURE(expect_same_reports(dir, "on", "p2"));
}

}  // namespace
}  // namespace probelab::sim
