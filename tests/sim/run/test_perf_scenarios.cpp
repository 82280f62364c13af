// The performance-diagnosis scenarios (scenarios/perf/*.yaml, not in the bundled suite): each
// passes through the probelab executable, and the fact it exists for is measured on report.json
// against the same scenario without its fault. The faults are then placed elsewhere (another
// model, rank, channel, link) and must be localized there too. Also: the profiler's per-step PMU
// counters (read through Device) agree with the per-op records, a memory-bound op's evidence
// states its intensity against the ridge truthfully, and bad perf-fault descriptors are refused
// naming the key.
#include <regex>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"
#include "tests/sim/scenario_suite.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

std::string perf_yaml(const std::string& stem) { return test::slurp(test::source_root() / "scenarios" / "perf" / (stem + ".yaml")); }

/// Runs scenario text (written into `dir`) and returns its report.
json run_text(const std::string& text, const TempDir& dir) { return test::run_scenario_report(dir.write("s.yaml", text), dir); }

/// The scenario text without its injections and expectations (the healthy run).
std::string healthy(std::string text) {
  text = text.substr(0, text.find("injections:"));
  return text + "expectations:\n  - no_detection: {}\n";
}

std::uint64_t collective_cycles(const json& r) {
  std::uint64_t c = 0;
  for (const auto& s : r["perf"]["steps"]) c += s["collective_cycles"].get<std::uint64_t>();
  return c;
}

/// A memory-bound op's evidence states the intensity against the ridge as it is: "<" only when it
/// is below, and at or above it the reason the MTE still took longer (returns the ops checked).
int check_memory_evidence(const json& r) {
  const std::regex claim(R"(intensity ([0-9.]+) FLOP/B( of HBM traffic)? (<|>=) ridge ([0-9.]+))");
  int n = 0;
  for (const auto& o : r["perf"]["ops"]) {
    if (o["bound"] != "memory") continue;
    const std::string ev = o["evidence"].get<std::string>();
    std::smatch m;
    if (!std::regex_search(ev, m, claim)) {
      ADD_FAILURE() << o["op"] << ": " << ev;
      continue;
    }
    ++n;
    const double intensity = std::stod(m[1].str()), ridge = std::stod(m[4].str());
    if (m[3].str() == "<") {
      EXPECT_LT(intensity, ridge) << o["op"] << ": " << ev;
    } else {
      EXPECT_GE(intensity + 0.05, ridge) << o["op"] << ": " << ev;
      const bool l2 = o["counters"]["l2_read_bytes"].get<std::uint64_t>() > 0;
      EXPECT_NE(ev.find(l2 ? "bytes from L2" : "waited"), std::string::npos) << o["op"] << ": " << ev;
    }
  }
  return n;
}

class PerfScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(PerfScenario, PassesAndShowsWhatItIsFor) {
  const std::string name = GetParam();
  TempDir dir, clean_dir;
  const json r = test::run_scenario_report(test::source_root() / "scenarios" / "perf" / (name + ".yaml"), dir);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["status"], "ok");
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  for (const auto& i : r["injections"]) EXPECT_TRUE(i["fired"].get<bool>()) << i.dump();
  const json clean = run_text(healthy(perf_yaml(name)), clean_dir);
  ASSERT_TRUE(clean.is_object());
  EXPECT_TRUE(clean["perf"]["findings"].empty()) << clean["perf"]["findings"].dump();
  check_memory_evidence(r);
  check_memory_evidence(clean);
  const json& top = r["perf"]["findings"][0];
  if (name == "hbm_channel_latency_spike") {
    // The ops memory-bound in the healthy run slow down and carry most of the added time.
    std::set<std::string> mem_ops;
    for (const auto& o : clean["perf"]["ops"])
      if (o["bound"] == "memory") mem_ops.insert(o["op"].get<std::string>());
    double mem_a = 0, mem_b = 0, all_a = 0, all_b = 0;
    for (const auto& [rep, m, a] : {std::tuple{&r, &mem_a, &all_a}, std::tuple{&clean, &mem_b, &all_b}})
      for (const auto& o : (*rep)["perf"]["ops"]) {
        const double c = o["cycles"].get<double>();
        *a += c;
        if (mem_ops.count(o["op"].get<std::string>())) *m += c;
      }
    EXPECT_GT(mem_a, 1.5 * mem_b) << "memory-bound ops " << mem_b << " -> " << mem_a;
    EXPECT_GT(mem_a - mem_b, 0.75 * (all_a - all_b)) << "share of the added op time in memory-bound ops";
    EXPECT_GT(r["cycles"]["total"].get<double>(), 1.2 * clean["cycles"]["total"].get<double>());
    for (const auto& op : top["ops"]) EXPECT_TRUE(mem_ops.count(op.get<std::string>())) << op;
    EXPECT_FALSE(top["ops"].empty());
  } else if (name == "ring_link_degraded") {
    EXPECT_GT(static_cast<double>(collective_cycles(r)), 1.3 * static_cast<double>(collective_cycles(clean)));
    EXPECT_EQ(top["src"], 1);
    EXPECT_EQ(top["dst"], 2);
  } else if (name == "throttled_core") {
    EXPECT_EQ(top["core"], 7);
    EXPECT_NEAR(top["pace"].get<double>(), 3.0, 0.3);
    // Core 7's busy time triples; the healthy run's cores all keep the median pace.
    const auto busy = [](const json& rep) { return rep["perf"]["ranks"][0]["cores"][7]["busy_cycles"].get<double>(); };
    EXPECT_NEAR(busy(r) / busy(clean), 3.0, 0.3);
    for (const auto& c : clean["perf"]["ranks"][0]["cores"]) EXPECT_LT(c["pace"].get<double>(), 1.1) << c.dump();
  } else if (name == "straggler_rank") {
    EXPECT_EQ(top["rank"], 2);
    // Every rank's step got slower (they wait for the straggler), yet no link or collective is blamed.
    for (std::size_t i = 0; i < r["perf"]["steps"].size(); ++i)
      EXPECT_GT(r["perf"]["steps"][i]["cycles"].get<std::uint64_t>(), clean["perf"]["steps"][i]["cycles"].get<std::uint64_t>());
    for (const auto& f : r["perf"]["findings"]) EXPECT_EQ(f["cause"], "straggler") << f.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Suite, PerfScenario, ::testing::ValuesIn(test::yaml_stems(test::source_root() / "scenarios" / "perf")),
                         test::scenario_test_name);

// The same faults where the bundled perf scenarios do not put them.
TEST(PerfFaultsElsewhere, DegradedChannelOnAnotherRankChannelAndModel) {
  TempDir dir;
  const json r = run_text(R"(name: hbm_elsewhere
model: transformer_block
mode: training
ranks: 2
steps: 1
seed: 3
injections:
  - {kind: hbm_channel_degraded, channel: 17, fraction: 0.05, rank: 1}
expectations:
  - perf_finding: {cause: hbm_channel, rank: 1, channel: 17, only: true}
)",
                          dir);
  ASSERT_TRUE(r.is_object());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump() << r["perf"]["findings"].dump();
}

TEST(PerfFaultsElsewhere, DegradedNicOfAChipOnTheSecondServer) {
  // Two servers of eight chips, hierarchical all-reduce: the inter-server stage of chip index 5
  // crosses the RoCE network. The link r13 -> r5 is the first link of that route: r13's NIC.
  TempDir dir;
  const json r = run_text(R"(name: nic_elsewhere
model: mlp
mode: training
ranks: 16
steps: 1
seed: 12
cluster: {chips_per_server: 8}
training: {allreduce: {algorithm: hierarchical, inter_algorithm: ring}}
injections:
  - {kind: link_degraded, src: 13, dst: 5, fraction: 0.25}
expectations:
  - perf_finding: {cause: link, link: "r13 nic.tx", rank: 13, only: true}
)",
                          dir);
  ASSERT_TRUE(r.is_object());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump() << r["perf"]["findings"].dump();
  const json& f = r["perf"]["findings"].at(0);
  EXPECT_EQ(f["kind"], "nic");
  EXPECT_NEAR(f["gbps"].get<double>(), 0.25 * f["nominal_gbps"].get<double>(), 0.01 * f["nominal_gbps"].get<double>());
  EXPECT_NE(r["injections"].dump().find("r13 nic.tx"), std::string::npos) << r["injections"].dump();
}

TEST(PerfFaultsElsewhere, ThrottledCoreOfTheSecondRankInTraining) {
  TempDir dir;
  const json r = run_text(R"(name: core_elsewhere
model: transformer_wide
mode: training
ranks: 2
steps: 1
seed: 8
injections:
  - {kind: core_throttled, rank: 1, core: 11, slowdown: 2}
expectations:
  - perf_finding: {cause: core, rank: 1, core: 11, only: true}
)",
                          dir);
  ASSERT_TRUE(r.is_object());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump() << r["perf"]["findings"].dump();
  EXPECT_NEAR(r["perf"]["findings"][0]["pace"].get<double>(), 2.0, 0.05);
  EXPECT_GT(check_memory_evidence(r), 0) << "training: the backward GEMMs are memory-bound too";
  for (const auto& f : r["perf"]["findings"]) {
    if (f["cause"] == "core") {
      EXPECT_TRUE(f["rank"] == 1 && f["core"] == 11) << "only one core is slow: " << f.dump();
    }
  }
}

TEST(PerfFaultsElsewhere, DegradedWrapAroundLinkOfAnEightRankRing) {
  TempDir dir;
  const json r = run_text(R"(name: link_elsewhere
model: transformer_block
mode: training
ranks: 8
steps: 1
seed: 4
chip: {overrides: {link_count: 2}}
training: {allreduce: {algorithm: ring}}
injections:
  - {kind: link_degraded, src: 7, dst: 0, fraction: 0.2}
expectations:
  - perf_finding: {cause: link, src: 7, dst: 0, only: true}
)",
                          dir);
  ASSERT_TRUE(r.is_object());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump() << r["perf"]["findings"].dump();
}

TEST(PerfFaultsElsewhere, StragglerRankZeroOfTwoOnTheTransformer) {
  TempDir dir;
  const json r = run_text(R"(name: straggler_elsewhere
model: transformer_block
mode: training
ranks: 2
steps: 2
seed: 5
injections:
  - {kind: straggler, rank: 0, slowdown: 2}
expectations:
  - perf_finding: {cause: straggler, rank: 0, only: true}
)",
                          dir);
  ASSERT_TRUE(r.is_object());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump() << r["perf"]["findings"].dump();
}

TEST(PerfFaultsElsewhere, LaunchDelayMakesSmallOpsLaunchBound) {
  TempDir dir;
  const json r = run_text(R"(name: launch_elsewhere
model: mlp
mode: inference
steps: 1
injections:
  - {kind: launch_delay, delay_ns: 20000}
expectations:
  - perf_finding: {cause: launch, rank: 0}
)",
                          dir);
  ASSERT_TRUE(r.is_object());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump() << r["perf"]["findings"].dump();
}

// The profiler reads the PMU through Device at each step's start and end; what it saw in a step
// is what the op records of that step add up to.
TEST(PerfCounters, ACollectiveOnIdleLinksMovesTheRingsBytesAtLineRate) {
  // The MLP's 8 gradients hold 1,994 FP16 values. A ring all-reduce over R ranks sends each of its
  // R chunks R-1 times in the reduce-scatter (the first hop the FP16 input, then R-2 hops of the
  // FP32 partial sum: accumulation fp32 is the communication buffer's) and R-1 times in the
  // all-gather (FP16): 1,994 x (2 + 4 (R-2) + 2 (R-1)) bytes over all links, in 2 (R-1) messages
  // per rank and gradient. Nothing else uses the links: each serves at line rate, nothing queues.
  for (const int ranks : {2, 4}) {
    TempDir dir;
    const json r = run_text(fmt::format("name: idle\nmodel: mlp\nmode: training\nranks: {}\nsteps: 1\nseed: 4\n"
                                        "training: {{allreduce: {{algorithm: ring}}}}\n",
                                        ranks),
                            dir);
    ASSERT_TRUE(r.is_object());
    std::uint64_t bytes = 0, transfers = 0;
    for (const auto& l : r["perf"]["links"]) {
      bytes += l["bytes"].get<std::uint64_t>();
      transfers += l["transfers"].get<std::uint64_t>();
      if (l["bytes"].get<std::uint64_t>() == 0) continue;
      EXPECT_EQ(l["wait_cycles"], 0) << l.dump();
      EXPECT_NEAR(l["achieved_gbps"].get<double>(), 56.0, 0.01) << l.dump();
      const double ideal_ns = l["bytes"].get<double>() / 56.0;
      EXPECT_NEAR(l["busy_cycles"].get<double>(), ideal_ns * 1.8, 1.0 + l["transfers"].get<double>()) << l.dump();
    }
    EXPECT_EQ(bytes, 1994u * (2 + 4 * (ranks - 2) + 2 * (ranks - 1))) << ranks << " ranks";
    EXPECT_EQ(transfers, 2u * (ranks - 1) * ranks * 8u) << ranks << " ranks";
    EXPECT_TRUE(r["perf"]["findings"].empty()) << r["perf"]["findings"].dump();
  }
}

TEST(PerfProfiler, StepCountersAgreeWithTheOpRecords) {
  TempDir dir;
  const json r = run_text(R"(name: profiled
model: mlp
mode: training
ranks: 2
steps: 3
seed: 2
profile: true
expectations:
  - no_detection: {}
)",
                          dir);
  ASSERT_TRUE(r.is_object());
  std::uint64_t flops = 0, rd = 0, wr = 0, ops = 0, step_flops = 0, step_rd = 0, step_wr = 0, step_ops = 0, colls = 0;
  for (const auto& o : r["perf"]["ops"]) {
    flops += o["counters"]["flops"].get<std::uint64_t>();
    rd += o["counters"]["hbm_read_bytes"].get<std::uint64_t>();
    wr += o["counters"]["hbm_write_bytes"].get<std::uint64_t>();
    if (o["kind"] == "kernel") ops += o["tasks"].get<std::uint64_t>();
  }
  ASSERT_EQ(r["perf"]["steps"].size(), 6u);
  for (const auto& s : r["perf"]["steps"]) {
    const json& c = s["counters"];
    ASSERT_TRUE(c.is_object()) << s.dump();
    step_flops += c["cube_flops"].get<std::uint64_t>();
    step_rd += c["hbm_read_bytes"].get<std::uint64_t>();
    step_wr += c["hbm_write_bytes"].get<std::uint64_t>();
    step_ops += c["kernel_ops"].get<std::uint64_t>();
    colls += c["collective_ops"].get<std::uint64_t>();
    // The two snapshots are taken inside the step, each when the chip serves its MMIO burst:
    // the interval is the step less at most two PCIe round trips (2 x 2 x 900 ns at 1.8 GHz).
    EXPECT_LE(c["cycles"].get<std::uint64_t>(), s["cycles"].get<std::uint64_t>());
    EXPECT_GE(c["cycles"].get<std::uint64_t>() + 6480, s["cycles"].get<std::uint64_t>());
  }
  EXPECT_GT(flops, 0u);
  EXPECT_EQ(step_flops, flops);
  EXPECT_EQ(step_rd, rd);
  EXPECT_EQ(step_wr, wr);
  EXPECT_EQ(step_ops, ops);
  EXPECT_GT(colls, 0u);
}

TEST(PerfFaults, BadDescriptorsNameTheKey) {
  struct Case {
    const char* injection;
    const char* key;
  };
  const Case cases[] = {{"{kind: hbm_channel_degraded, channel: 40, fraction: 0.5}", "channel"},
                        {"{kind: hbm_channel_degraded, channel: 1, fraction: 1.5}", "fraction"},
                        {"{kind: link_degraded, src: 0, dst: 2, fraction: 0.5}", "dst"},
                        {"{kind: link_degraded, src: 0, dst: 1, fraction: 0.5, both: true}", "both"},
                        {"{kind: straggler, rank: 9}", "rank"},
                        {"{kind: launch_delay, delay_ns: 0}", "delay_ns"},
                        {"{kind: core_throttled, core: 24, slowdown: 2}", "core"},
                        {"{kind: core_throttled, core: 3, slowdown: 0.5}", "slowdown"},
                        {"{kind: straggler, rank: 0, speed: 2}", "speed"}};
  for (const Case& c : cases) {
    TempDir dir;
    dir.write("s.yaml", std::string("name: bad\nmodel: mlp\nmode: training\nranks: 4\nchip: {overrides: {link_count: 2}}\ninjections:\n  - ") +
                            c.injection + "\n");
    const auto res = test::run("run s.yaml --out out", dir);
    EXPECT_EQ(res.code, 2) << c.injection << res.err;
    EXPECT_NE(res.err.find(c.key), std::string::npos) << c.injection << ": " << res.err;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "out" / "bad" / "report.json"));
  }
}

TEST(PerfCommand, PrintsTopOpsFindingsAndLinksAndRefusesANonRun) {
  TempDir dir;
  const json r = test::run_scenario_report(test::source_root() / "scenarios" / "perf" / "ring_link_degraded.yaml", dir);
  ASSERT_TRUE(r.is_object());
  const auto res = test::run("perf out/ring_link_degraded --top 3", dir);
  EXPECT_EQ(res.code, 0) << res.err;
  EXPECT_NE(res.out.find("findings (best first):"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("link: link r1 hccs->r2 carried"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("rank 3: top ops by time"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("  r1 hccs->r2: "), std::string::npos) << res.out;
  const auto js = test::run("perf out/ring_link_degraded --json", dir);
  EXPECT_EQ(js.code, 0);
  EXPECT_EQ(json::parse(js.out)["findings"][0]["cause"], "link");
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "out" / "ring_link_degraded" / "perf_ops.csv"));
  const auto bad = test::run("perf no_such_run", dir);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("no_such_run/report.json"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace probelab::sim
