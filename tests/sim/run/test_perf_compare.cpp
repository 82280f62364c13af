// `probelab compare --perf RUN_A RUN_B`: a healthy run against each scenarios/perf/ fault names
// the cause, the component and the ops; the same against faults where the bundled scenarios do
// not put them (a launch delay on one rank of two, a straggler on rank 1 of a 2-rank MLP, fewer
// cores on the wide block: a different tiling); a run against itself shows no regression; every
// kind of finding names its component in the verdict; bad input exits 2.
#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/run/perf_compare.h"
#include "sim/run/perf_findings.h"
#include "tests/sim/cli/cli_test_util.h"
#include "tests/sim/scenario_suite.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

/// Scenario text without its injections and expectations, renamed healthy_<name>.
std::string healthy(std::string text) {
  text = text.substr(0, text.find("injections:"));
  text.replace(text.find("name: "), 6, "name: healthy_");
  return text + "expectations:\n  - no_detection: {}\n";
}

json compare_json(const std::string& a, const std::string& b, const TempDir& dir, int code) {
  const auto res = test::run("compare --perf " + a + " " + b + " --json", dir);
  EXPECT_EQ(res.code, code) << a << " vs " << b << res.err;
  return json::parse(res.out, nullptr, false);
}

std::set<std::string> causes(const json& c, int rank = -1) {
  std::set<std::string> s;
  for (const auto& o : c["ops"])
    if (rank < 0 || o["rank"] == rank) s.insert(o["cause"].get<std::string>());
  return s;
}

TEST(PerfCompare, HealthyRunAgainstEachBundledPerfFault) {
  TempDir dir;
  const auto perf_dir = test::source_root() / "scenarios" / "perf";
  for (const auto& stem : test::yaml_stems(perf_dir)) dir.write("h/" + stem + ".yaml", healthy(test::slurp(perf_dir / (stem + ".yaml"))));
  const auto ran = test::run("run '" + perf_dir.string() + "' h --out out --no-trace --no-baseline -j 2", dir);
  ASSERT_EQ(ran.code, 0) << ran.out << ran.err;

  {  // A degraded HBM channel: the memory-bound ops slow down; the channel and those ops are named.
    const json c = compare_json("out/healthy_hbm_channel_latency_spike", "out/hbm_channel_latency_spike", dir, 1);
    EXPECT_TRUE(c["regression"].get<bool>());
    EXPECT_EQ(c["verdict"]["cause"], "hbm_channel");
    EXPECT_EQ(c["verdict"]["component"]["channel"], 5);
    EXPECT_GT(c["verdict"]["share_of_added_op_cycles"].get<double>(), 0.8);
    std::set<std::string> named;
    for (const auto& op : c["verdict"]["component"]["ops"]) named.insert(op.get<std::string>());
    ASSERT_GE(c["ops"].size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(named.count(c["ops"][i]["op"].get<std::string>())) << c["ops"][i].dump();
      EXPECT_EQ(c["ops"][i]["cause"], "hbm_channel") << c["ops"][i].dump();
      EXPECT_NE(c["ops"][i]["why"].get<std::string>().find("HBM channel 5"), std::string::npos);
    }
    double shares = 0;
    for (const auto& o : c["ops"]) shares += o["share"].get<double>();
    EXPECT_NEAR(shares, 1.0, 0.05) << "one rank, one stream: the ops' added cycles are the rank's";
    const auto text = test::run("compare --perf out/healthy_hbm_channel_latency_spike out/hbm_channel_latency_spike", dir);
    EXPECT_EQ(text.code, 1);
    EXPECT_NE(text.out.find("ops that got slower"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("regression: hbm_channel"), std::string::npos) << text.out;
  }
  {  // One slow ring link: every rank's collectives slow down; the link is named, not a rank.
    const json c = compare_json("out/healthy_ring_link_degraded", "out/ring_link_degraded", dir, 1);
    EXPECT_EQ(c["verdict"]["cause"], "link");
    EXPECT_EQ(c["verdict"]["component"]["link"], "r1 hccs->r2");
    for (int r = 0; r < 4; ++r) EXPECT_TRUE(causes(c, r).count("link")) << r;
    EXPECT_EQ(c["ops"][0]["kind"], "collective");
    EXPECT_EQ(c["steps"].size(), 4u);
    for (const auto& s : c["steps"]) EXPECT_GT(s["delta"].get<double>(), 0.2 * s["a"].get<double>());
  }
  {  // A straggler: the others' collectives wait for it, its own kernels compute longer.
    const json c = compare_json("out/healthy_straggler_rank", "out/straggler_rank", dir, 1);
    EXPECT_EQ(c["verdict"]["cause"], "straggler");
    EXPECT_EQ(c["verdict"]["component"]["rank"], 2);
    for (int r : {0, 1, 3}) EXPECT_EQ(causes(c, r), std::set<std::string>{"straggler"}) << r;
    EXPECT_TRUE(causes(c, 2).count("compute"));
    EXPECT_FALSE(causes(c).count("link"));
  }
  {  // A throttled core: the ops wait for its tiles; the verdict names the core, not "no component".
    const json c = compare_json("out/healthy_throttled_core", "out/throttled_core", dir, 1);
    EXPECT_EQ(c["verdict"]["cause"], "core") << c["verdict"].dump();
    EXPECT_EQ(c["verdict"]["component"]["core"], 7) << c["verdict"].dump();
    EXPECT_TRUE(causes(c, 0).count("core")) << c["ops"].dump();
  }
  {  // A run against itself: nothing got slower, exit 0.
    const json c = compare_json("out/straggler_rank", "out/straggler_rank", dir, 0);
    EXPECT_FALSE(c["regression"].get<bool>());
    EXPECT_TRUE(c["ops"].empty());
    EXPECT_EQ(c["total"]["delta"], 0);
    EXPECT_TRUE(c["new_findings"].empty());
    const auto text = test::run("compare --perf out/straggler_rank out/straggler_rank", dir);
    EXPECT_EQ(text.code, 0);
    EXPECT_NE(text.out.find("no op got slower"), std::string::npos) << text.out;
  }
}

constexpr const char* kTwoRankBlock = R"(name: NAME
model: transformer_block
mode: training
ranks: 2
steps: 1
seed: 21
)";

std::string named(std::string text, const std::string& name) { return text.replace(text.find("NAME"), 4, name); }

TEST(PerfCompare, FaultsWhereTheBundledScenariosDoNotPutThem) {
  TempDir dir;
  dir.write("s/base.yaml", named(kTwoRankBlock, "base"));
  dir.write("s/launch.yaml", named(kTwoRankBlock, "launch") + "injections:\n  - {kind: launch_delay, delay_ns: 5000, rank: 1}\n");
  dir.write("s/wide.yaml", "name: wide\nmodel: transformer_wide\nmode: inference\nsteps: 1\nseed: 30\n");
  dir.write("s/cores.yaml", "name: cores\nmodel: transformer_wide\nmode: inference\nsteps: 1\nseed: 30\n"
                            "chip: {overrides: {num_cores: 6}}\n");
  dir.write("s/mlp.yaml", "name: mlp\nmodel: mlp\nmode: training\nranks: 2\nsteps: 2\nseed: 8\n");
  dir.write("s/mlp_straggler.yaml", "name: mlp_straggler\nmodel: mlp\nmode: training\nranks: 2\nsteps: 2\nseed: 8\n"
                                    "injections:\n  - {kind: straggler, rank: 1, slowdown: 4}\n");
  const auto ran = test::run("run s --out out --no-trace --no-baseline -j 2", dir);
  ASSERT_EQ(ran.code, 0) << ran.out << ran.err;
  {  // A slow host launch path on rank 1 only: its ops are launch-bound; rank 0 waits at the all-reduces.
    const json c = compare_json("out/base", "out/launch", dir, 1);
    EXPECT_EQ(c["verdict"]["cause"], "launch") << c["verdict"].dump();
    EXPECT_EQ(c["verdict"]["component"]["rank"], 1);
    EXPECT_TRUE(causes(c, 1).count("launch"));
    EXPECT_FALSE(causes(c, 0).count("launch")) << "rank 0's launch path is healthy";
  }
  {  // A quarter of the cores: the ops are tiled over fewer cores.
    const json c = compare_json("out/wide", "out/cores", dir, 1);
    EXPECT_EQ(c["verdict"]["cause"], "tiling") << c["verdict"].dump();
    EXPECT_NE(c["ops"][0]["why"].get<std::string>().find("24 -> 6 cores"), std::string::npos) << c["ops"][0].dump();
  }
  {  // A straggler on rank 1 of a 2-rank MLP.
    const json c = compare_json("out/mlp", "out/mlp_straggler", dir, 1);
    EXPECT_EQ(c["verdict"]["cause"], "straggler") << c["verdict"].dump();
    EXPECT_EQ(c["verdict"]["component"]["rank"], 1);
    EXPECT_EQ(causes(c, 0), std::set<std::string>{"straggler"});
  }
  {  // B faster than A is no regression.
    const json c = compare_json("out/launch", "out/base", dir, 0);
    EXPECT_FALSE(c["regression"].get<bool>());
  }
}

// A minimal report: one rank, one op of `kind` with the given cycles, and `findings`.
json tiny_report(const std::string& op_kind, double cycles, double launch, double busy, const json& findings) {
  const json op = {{"op", "op1"}, {"rank", 0}, {"kind", op_kind}, {"tasks", 4}, {"cores", 4}, {"cycles", cycles},
                   {"launch_cycles", launch}, {"probe_cycles", 0},
                   {"counters", {{"cube_busy_cycles", busy}, {"vector_busy_cycles", 0}, {"hbm_stall_cycles", 0}}}};
  return {{"scenario", {{"name", "s"}}},
          {"cycles", {{"total", cycles + launch}}},
          {"perf", {{"ranks", json::array({{{"rank", 0}, {"cycles", cycles + launch}}})},
                    {"steps", json::array()},
                    {"ops", json::array({op})},
                    {"findings", findings}}}};
}

// Every kind of finding the perf analysis gives (read from perf_findings.cpp, so a new kind cannot
// be missed) is listed by perf_finding_causes(), explains an op cause of the comparison, and,
// newly in B, is the verdict's component when an op got slower for that cause.
TEST(PerfCompare, EveryFindingKindNamesItsComponentInTheVerdict) {
  const std::string src = test::slurp(test::source_root() / "sim" / "run" / "perf_findings.cpp");
  std::set<std::string> in_source;
  const std::string tag = "{\"cause\", \"";
  for (auto at = src.find(tag); at != std::string::npos; at = src.find(tag, at + 1)) {
    const auto from = at + tag.size();
    in_source.insert(src.substr(from, src.find('"', from) - from));
  }
  const std::set<std::string> listed(perf_finding_causes().begin(), perf_finding_causes().end());
  EXPECT_EQ(in_source, listed);
  for (const std::string& kind : perf_finding_causes()) {
    SCOPED_TRACE(kind);
    // A finding of this kind on rank 0, as perf_findings() writes it (the fields the comparison reads).
    json f = {{"cause", kind}, {"rank", 0}, {"score", 0.5}, {"evidence", kind + " evidence"}};
    if (kind == "hbm_channel") f.update({{"channel", 3}, {"gbps", 5.0}, {"nominal_gbps", 50.0}});
    if (kind == "link") f.update({{"link", "r0 hccs->r1"}, {"gbps", 5.0}, {"nominal_gbps", 56.0}});
    if (kind == "core") f.update({{"core", 11}, {"pace", 4.0}});
    if (kind == "straggler") f.update({{"busy_cycles", 4000}, {"others_median_busy_cycles", 1000}});
    // The op slows down the way that component slows it.
    const bool collective = kind == "link";
    const json a = tiny_report(collective ? "collective" : "kernel", 1000, 100, 500, json::array());
    const json b = tiny_report(collective ? "collective" : "kernel", kind == "launch" ? 1000 : 3000,
                          kind == "launch" ? 2100 : 100, 500, json::array({f}));
    bool explains = false;
    for (const char* cause : {"tiling", "compute", "hbm_channel", "core", "memory", "link", "straggler", "contention",
                              "communication", "launch", "capture"})
      for (const std::string& k : perf_findings_explaining(cause)) explains |= k == kind;
    EXPECT_TRUE(explains) << "no op cause is summed under a " << kind << " finding";
    const json c = compare_perf(a, b);
    ASSERT_TRUE(c["verdict"].is_object()) << c.dump();
    EXPECT_EQ(c["verdict"]["component"], f) << c["verdict"].dump();
    EXPECT_EQ(c["verdict"]["evidence"], kind + " evidence");
    EXPECT_DOUBLE_EQ(c["verdict"]["share_of_added_op_cycles"].get<double>(), 1.0);
  }
}

TEST(PerfCompare, BadInputNamesTheFile) {
  TempDir dir;
  dir.write("s.yaml", "name: s\nmodel: mlp\nsteps: 1\n");
  ASSERT_EQ(test::run("run s.yaml --out out --no-trace --no-baseline", dir).code, 0);
  auto res = test::run("compare --perf out/s nowhere", dir);
  EXPECT_EQ(res.code, 2);
  EXPECT_NE(res.err.find("nowhere/report.json"), std::string::npos) << res.err;
  json r = json::parse(test::slurp(dir.path() / "out" / "s" / "report.json"));
  r.erase("perf");
  dir.write("old/report.json", r.dump());
  res = test::run("compare --perf old out/s", dir);
  EXPECT_EQ(res.code, 2);
  EXPECT_NE(res.err.find("old/report.json"), std::string::npos) << res.err;
  EXPECT_NE(res.err.find("no perf section"), std::string::npos) << res.err;
  EXPECT_EQ(test::run("compare --perf out/s out/s --threshold -1", dir).code, 2);
}

}  // namespace
}  // namespace probelab::sim
