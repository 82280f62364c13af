// `probelab run --trace-steps FIRST:LAST`: the trace of a long run keeps each rank's steps
// [FIRST, LAST] only (what it holds while running and what it writes), exactly the full trace's
// slices and instants that overlap each rank's window (its host's step slices), the same over two
// partitions; the reports do not change; a window the scenario does not reach is bad input.
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chip_model/trace.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

constexpr const char* kJob = R"(name: job
model: mlp
mode: training
ranks: 4
steps: 8
seed: 5
cluster: {chips_per_server: 2}
training:
  optimizer: {type: sgd, lr: 0.01}
  allreduce: {algorithm: hierarchical}
probes:
  mode: statistics
  watch_points: ["*/gradient/reduced"]
  exceptions: {kinds: all}
)";

// Slices and instants as (pid, track, name, ts, dur), lanes ("<track> #2") folded into their track.
using Item = std::tuple<std::uint64_t, std::string, std::string, double, double>;
std::multiset<Item> items(const json& trace) {
  const json& ev = trace.is_object() ? trace["traceEvents"] : trace;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::string> track;
  for (const json& e : ev)
    if (e.value("ph", "") == "M" && e["name"] == "thread_name") {
      const std::string n = e["args"]["name"].get<std::string>();
      track[{e["pid"], e["tid"]}] = n.substr(0, n.find(" #"));
    }
  std::multiset<Item> out;
  for (const json& e : ev) {
    const std::string ph = e.value("ph", "");
    if (ph != "X" && ph != "i") continue;
    out.insert({e["pid"], track[{e["pid"], e["tid"]}], e["name"], e["ts"], e.value("dur", 0.0)});
  }
  return out;
}

std::string slurp_job(const TempDir& dir, const std::string& out, const char* file) {
  return test::slurp(dir.path() / out / "job" / file);
}

TEST(TraceWindow, KeepsExactlyWhatOverlapsEachRanksSteps) {
  TempDir dir;
  dir.write("job.yaml", kJob);
  for (const std::string args : {"--out full", "--out win --trace-steps 3:4", "--out win2 --trace-steps 3:4 --partitions 2"}) {
    const test::CmdResult r = test::probelab("run job.yaml " + args, dir);
    ASSERT_EQ(r.code, 0) << args << "\n" << r.err << r.out;
  }
  for (const char* f : {"report.json", "summary.txt", "perf_ops.csv"})
    EXPECT_TRUE(slurp_job(dir, "full", f) == slurp_job(dir, "win", f)) << f;
  EXPECT_TRUE(slurp_job(dir, "win", "trace.json") == slurp_job(dir, "win2", "trace.json"));

  const std::multiset<Item> full = items(json::parse(slurp_job(dir, "full", "trace.json")));
  const std::multiset<Item> win = items(json::parse(slurp_job(dir, "win", "trace.json")));
  // Each rank's window from its host's step slices of the full trace.
  const std::uint64_t host = chip::Trace::kHostPid;
  std::map<std::uint64_t, std::pair<double, double>> window;  // rank -> [begin of step 3, end of step 4]
  for (const auto& [pid, track, name, ts, dur] : full) {
    if (pid < host || pid >= chip::Trace::kSwitchPid || track != "main") continue;
    if (name == "step 3") window[pid - host].first = ts;
    if (name == "step 4") window[pid - host].second = ts + dur;
  }
  ASSERT_EQ(window.size(), 4u);
  double lo = 1e300, hi = 0;
  for (const auto& [r, w] : window) lo = std::min(lo, w.first), hi = std::max(hi, w.second);
  std::multiset<Item> expected;
  for (const Item& it : full) {
    const auto& [pid, track, name, ts, dur] = it;
    const std::uint64_t r = pid < host ? pid : pid < chip::Trace::kSwitchPid ? pid - host : UINT64_MAX;
    const auto [b, e] = r == UINT64_MAX ? std::pair{lo, hi} : window.at(r);
    if (ts + dur >= b && ts <= e) expected.insert(it);
  }
  EXPECT_GT(expected.size(), 100u);
  EXPECT_LT(expected.size(), full.size() / 2);
  EXPECT_TRUE(win == expected) << win.size() << " slices written, " << expected.size() << " expected";
}

TEST(TraceWindow, AWindowTheScenarioDoesNotReachIsBadInput) {
  TempDir dir;
  dir.write("job.yaml", kJob);
  test::CmdResult r = test::probelab("run job.yaml --out o --trace-steps 8:9", dir);
  EXPECT_EQ(r.code, 2) << r.err << r.out;
  EXPECT_NE((r.err + r.out).find("--trace-steps"), std::string::npos) << r.err << r.out;
  EXPECT_NE((r.err + r.out).find("runs steps 0 to 7"), std::string::npos) << r.err << r.out;
  r = test::probelab("run job.yaml --out o --trace-steps 4:3", dir);
  EXPECT_EQ(r.code, 2) << r.err << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "o"));
  r = test::probelab("run job.yaml --out one --trace-steps 7 --no-baseline", dir);  // one step: 7:7
  EXPECT_EQ(r.code, 0) << r.err << r.out;
}

// While recording, a long run holds about its window: a million spans of a rank before the window
// leave a few passes' worth in memory, and the first step's span starts the window.
TEST(TraceWindow, ARecordingHoldsAboutTheWindow) {
  chip::Trace t(true);
  t.set_step_window(100, 100);
  const std::uint32_t host = chip::Trace::kHostPid;
  std::uint64_t now = 0;
  for (std::uint32_t step = 0; step <= 101; ++step) {
    const std::uint64_t begin = now;
    for (int k = 0; k < 10'000; ++k, now += 10) t.complete(0, "stream0", "kernel", "task", now, 5);
    t.counter(0, "capture buffer fill", "bytes", now, step);
    t.complete(host, "main", "step " + std::to_string(step), "host", begin, now - begin);
  }
  EXPECT_LT(t.size(), 200'000u);  // 1,020,102 recorded
  t.close_step_window();
  std::size_t spans = 0, counters = 0;
  for (const auto& e : t.events()) {
    spans += e.phase == 'X' && e.pid == 0;
    counters += e.phase == 'C';
  }
  EXPECT_EQ(spans, 10'001u);  // step 100's, and step 101's first, which starts where step 100 ends
  // The last sample before the window (step 98's end), the one at its start (step 99's end) and
  // the one at its end (step 100's).
  EXPECT_EQ(counters, 3u);
}

}  // namespace
}  // namespace probelab::sim
