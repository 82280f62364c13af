// Every bundled scenario's timeline, in both formats, read the way viewers read it: no slice a
// viewer's nesting rule would drop, every track in time order, whole-nanosecond timestamps, flows
// bound to slices; one track per serial resource (no extra lanes needed); the counter tracks and
// flows the timeline promises.
#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"
#include "tests/sim/sim_test_util.h"
#include "tests/support/perfetto_check.h"
#include "tests/support/trace_check.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

std::vector<std::string> bundled() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(test::source_root() / "scenarios"))
    if (e.is_regular_file() && e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

class BundledTrace : public ::testing::TestWithParam<std::string> {};

TEST_P(BundledTrace, ViewersKeepEverySliceAndFlow) {
  TempDir dir;
  const fs::path path = test::source_root() / "scenarios" / (GetParam() + ".yaml");
  const test::CmdResult r = test::run("run '" + path.string() +
                                            "' --out out --trace-format json --trace-format perfetto",
                                        dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  fs::path out;
  for (const auto& e : fs::directory_iterator(dir.path() / "out")) out = e.path();
  const json doc = json::parse(test::slurp(out / "trace.json"));
  const json report = json::parse(test::slurp(out / "report.json"));

  const probelab::test::TraceCheck c = probelab::test::check_json_trace(doc);
  EXPECT_TRUE(c.ok()) << c.summary();
  EXPECT_GT(c.slices, 100u);
  const probelab::test::TraceCheck p = probelab::test::check_perfetto_trace(test::slurp(out / "trace.pftrace"));
  EXPECT_TRUE(p.ok()) << p.summary();
  EXPECT_EQ(p.slices, c.slices) << "both formats carry the same slices";
  EXPECT_EQ(p.counters, c.counters);

  std::set<std::string> tracks, counters;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "C") counters.insert(e["name"].get<std::string>());
  }
  for (const auto& t : tracks) EXPECT_EQ(t.find(" #"), std::string::npos) << "track " << t << " needed an extra lane";
  EXPECT_TRUE(tracks.count("hbm.ch00")) << "one track per HBM channel";
  EXPECT_TRUE(tracks.count("pcie.h2d"));
  EXPECT_TRUE(counters.count("hbm bandwidth"));
  EXPECT_TRUE(counters.count("pcie h2d bandwidth"));
  // PMU counter tracks: every scenario runs kernels, and each moves bytes through the MTEs.
  EXPECT_TRUE(counters.count("pmu.mte_busy"));
  EXPECT_TRUE(counters.count("pmu.core_hbm"));
  EXPECT_TRUE(counters.count("pmu.cube_busy") || counters.count("pmu.vector_busy"));
  if (report["capture"]["records"].get<std::uint64_t>() > 0) {
    EXPECT_TRUE(counters.count("capture buffer fill"));
  }

  // One flow per latched anomaly: latch -> ISR (when one serviced it) -> report entry.
  std::uint64_t latched = 0;
  for (const auto& a : report["anomalies"]) latched += a.contains("latency_cycles") ? 1 : 0;
  std::set<std::string> flow_cats;
  std::map<std::int64_t, int> flow_len;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "s" || e["ph"] == "t" || e["ph"] == "f") {
      flow_cats.insert(e["cat"].get<std::string>());
      ++flow_len[e["id"].get<std::int64_t>()];
    }
  std::uint64_t anomaly_flows = 0, collective_flows = 0;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "s" && e["cat"] != "xcore") {  // xcore: a mixed kernel's Cube -> Vector hand-overs
      (e["cat"] == "exception" ? anomaly_flows : collective_flows) += 1;
    }
  EXPECT_EQ(anomaly_flows, latched);
  if (report["scenario"]["ranks"].get<int>() > 1) {
    // One flow per collective (comm, seq) across the ranks of its group (a stage of a
    // hierarchical collective is a collective of its own group), bound to each rank's slice.
    using SliceKey = std::tuple<std::int64_t, std::int64_t, double>;  // pid, tid, ts
    std::map<SliceKey, std::pair<std::uint64_t, std::uint64_t>> comm_seq_at;
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> group_size, slices_of;
    for (const auto& e : doc["traceEvents"]) {
      if (e["ph"] != "X" || e["cat"] != "collective") continue;
      const auto key = std::make_pair(e["args"]["comm"].get<std::uint64_t>(), e["args"]["seq"].get<std::uint64_t>());
      comm_seq_at[{e["pid"].get<std::int64_t>(), e["tid"].get<std::int64_t>(), e["ts"].get<double>()}] = key;
      group_size[key] = e["args"]["ranks"].get<std::uint64_t>();
      ++slices_of[key];
    }
    std::uint64_t expected_flows = 0;
    for (const auto& [key, n] : group_size) {
      EXPECT_EQ(slices_of[key], n) << "collective " << key.first << ":" << key.second << " has a slice on every rank";
      expected_flows += n >= 2 ? 1 : 0;
    }
    EXPECT_EQ(collective_flows, expected_flows) << "one flow across the ranks per collective";
    std::map<std::int64_t, std::set<std::pair<std::uint64_t, std::uint64_t>>> flow_keys;
    for (const auto& e : doc["traceEvents"])
      if ((e["ph"] == "s" || e["ph"] == "t" || e["ph"] == "f") && e["cat"] == "collective") {
        const auto it = comm_seq_at.find({e["pid"].get<std::int64_t>(), e["tid"].get<std::int64_t>(), e["ts"].get<double>()});
        ASSERT_NE(it, comm_seq_at.end()) << "a collective flow point binds to a collective slice: " << e.dump();
        flow_keys[e["id"].get<std::int64_t>()].insert(it->second);
      }
    for (const auto& [id, keys] : flow_keys) {
      ASSERT_EQ(keys.size(), 1u) << "flow " << id << " joins one collective";
      EXPECT_EQ(static_cast<std::uint64_t>(flow_len[id]), group_size[*keys.begin()]) << "flow " << id;
    }
  }
}

// The same files in Chrome DevTools' own trace model (npm @paulirish/trace_engine, which
// scripts/test.sh installs into build/trace_engine): it keeps every slice and binds the anomaly
// flows. (Its flows are keyed by timestamp, so a collective whose ranks start in the same
// nanosecond shows no arrow there; Perfetto draws it, checked above.)
TEST(BundledTraceChrome, DevToolsTraceModelKeepsEverySlice) {
  const fs::path engine = PROBELAB_TRACE_ENGINE_DIR;
  if (!fs::exists(engine / "node_modules" / "@paulirish" / "trace_engine" / "package.json"))
    GTEST_SKIP() << "Chrome's trace model is not installed in " << engine << " (scripts/test.sh installs it)";
  TempDir dir;
  const test::CmdResult r = test::run("run --out out --jobs 2", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::string files;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path() / "out"))
    if (fs::exists(e.path() / "trace.json")) {
      files += " '" + (e.path() / "trace.json").string() + "'";
      names.push_back(e.path().filename().string());
    }
  ASSERT_EQ(names.size(), bundled().size());
  const test::CmdResult m = test::shell("node '" + (test::source_root() / "tests/support/chrome_trace_model.mjs").string() +
                                            "' '" + engine.string() + "'" + files,
                                        dir);
  ASSERT_EQ(m.code, 0) << m.err;
  std::istringstream lines(m.out);
  std::string line;
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    const fs::path trace = j["file"].get<std::string>();
    const json report = json::parse(test::slurp(trace.parent_path() / "report.json"));
    std::uint64_t latched = 0;
    for (const auto& a : report["anomalies"]) latched += a.contains("latency_cycles") ? 1 : 0;
    EXPECT_GT(j["slices"].get<std::uint64_t>(), 100u) << line;
    EXPECT_EQ(j["dropped"], 0) << line;
    EXPECT_EQ(j["kept"], j["slices"]) << line;
    EXPECT_GE(j["flows"].size(), latched) << line;
    for (const auto& f : j["flows"]) EXPECT_GE(f.get<int>(), 2) << line;
    ++n;
  }
  EXPECT_EQ(n, names.size()) << m.out;
}

INSTANTIATE_TEST_SUITE_P(Suite, BundledTrace, ::testing::ValuesIn(bundled()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           std::replace_if(n.begin(), n.end(), [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); }, '_');
                           return n;
                         });

}  // namespace
}  // namespace probelab::sim
