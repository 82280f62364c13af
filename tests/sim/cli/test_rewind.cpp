// Rewind as an action: a condition or rule with `rewind(...)` stops the run after the anomaly's
// step and the runner re-executes it from the last checkpoint before it with full capture of the
// implicated ops (or of every op), then stops or continues; report.json links both passes.
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

// tinynet trains for 6 steps; a NaN lands in fc1's output at step `nan_step`.
std::string scenario(const std::string& name, int nan_step, const std::string& checkpoints, const std::string& probes) {
  return "name: " + name + R"y(
model: tinynet.yaml
chip: tiny
mode: training
training: {loss: mse, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
seed: 3
steps: 6
)y" + checkpoints + R"y(
injections:
  - {kind: nan, op: fc1, element: 5, step: )y" + std::to_string(nan_step) + R"y(}
probes:
)y" + probes;
}

const char* kConditionProbes = R"y(  mode: statistics
  watch_points:
    - {name: nan, match: ["*"], conditions: [{when: "nan_count > 0", actions: ["rewind(full_dump)"]}]}
)y";

std::set<std::pair<std::string, int>> dumped(const fs::path& run) {
  std::set<std::pair<std::string, int>> out;
  const nlohmann::json m = test::read_json(run / "dump" / "rank0" / "dump.json");
  for (const auto& e : m["entries"])
    if (e.value("payload", "") == "full") out.insert({e["op"].get<std::string>() + ":" + e["edge"].get<std::string>(), e["step"].get<int>()});
  return out;
}

TEST(Rewind, ConditionReexecutesFromTheCheckpointBeforeTheAnomalyWithFullCaptureOfTheImplicatedOps) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("rw.yaml", scenario("rw", 3, "checkpoints: {every: 2}", kConditionProbes));
  const test::CmdResult r = test::run("run rw.yaml --out out", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const fs::path run = dir.path() / "out" / "rw";
  const nlohmann::json rep = test::read_json(run / "report.json");
  // Pass 1 stopped after the anomaly's step.
  ASSERT_EQ(rep["losses"][0].size(), 4u) << rep["losses"].dump();
  const nlohmann::json& w = rep["rewind"];
  ASSERT_TRUE(w.is_object()) << rep.dump(1).substr(0, 2000);
  EXPECT_EQ(w["requested"]["step"], 3);
  EXPECT_EQ(w["requested"]["op"], "fc1");
  EXPECT_EQ(w["requested"]["by"], "condition");
  EXPECT_EQ(w["from_step"], 2);  // checkpoints at 0, 2, 4: the last one before step 3
  EXPECT_TRUE(w["from_checkpoint"].get<bool>());
  EXPECT_EQ(w["to_step"], 3);
  EXPECT_EQ(w["status"], "ok");
  EXPECT_TRUE(w["reproduced"].get<bool>());
  EXPECT_EQ(w["losses_compared"], 2);
  EXPECT_TRUE(w["losses_identical"].get<bool>());
  EXPECT_EQ(w["ops"], nlohmann::json::array({"fc1"}));
  // Pass 2: its own run directory, linked back, with full tensors of fc1's edges at steps 2 and 3 only.
  const fs::path pass = run / "rewind";
  const nlohmann::json rep2 = test::read_json(pass / "report.json");
  EXPECT_EQ(rep2["rewind_of"]["requested"]["step"], 3);
  EXPECT_EQ(rep2["losses"][0].size(), 2u);
  const auto d = dumped(pass);
  for (int s : {2, 3})
    for (const char* edge : {"fc1:in0", "fc1:in1", "fc1:out0"}) EXPECT_TRUE(d.count({edge, s})) << edge << " " << s;
  // Nothing but the implicated op's tensors in full (fc1's output is also fc1_bias's input).
  const nlohmann::json m = test::read_json(pass / "dump" / "rank0" / "dump.json");
  for (const auto& e : m["entries"]) {
    if (e.value("payload", "") != "full") continue;
    EXPECT_GE(e["step"].get<int>(), 2) << e.dump();
    const std::string t = e["tensor"];
    EXPECT_TRUE(t == "x" || t == "fc1/weight" || t == "fc1") << e.dump();
  }
  // The summary names both passes.
  const std::string summary = test::slurp(run / "summary.txt");
  EXPECT_NE(summary.find("rewind: condition 'nan_count > 0' on fc1 at step 3"), std::string::npos) << summary;
  EXPECT_NE(summary.find("reproduced"), std::string::npos) << summary;
}

TEST(Rewind, RuleWithoutCheckpointsRewindsFromTheStartCapturesEverythingAndContinues) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("rw.yaml", scenario("rule", 2, "", R"y(  mode: statistics
  watch_points: ["*"]
  rules: ["invalid_count > 0 -> rewind(stats_dump, all, continue)"]
)y"));
  const test::CmdResult r = test::run("run rw.yaml --out out", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json rep = test::read_json(dir.path() / "out" / "rule" / "report.json");
  const nlohmann::json& w = rep["rewind"];
  ASSERT_TRUE(w.is_object());
  EXPECT_EQ(w["requested"]["by"], "rule");
  EXPECT_EQ(w["requested"]["op"], "fc1");  // the op that latched at the step
  EXPECT_EQ(w["from_step"], 0);
  EXPECT_FALSE(w["from_checkpoint"].get<bool>());
  EXPECT_EQ(w["to_step"], 5);  // continue: to the last step
  EXPECT_EQ(w["ops"], nlohmann::json::array({"*"}));
  EXPECT_TRUE(w["reproduced"].get<bool>());
  EXPECT_EQ(w["losses_compared"], 3);  // pass 1 ran steps 0..2
  EXPECT_TRUE(w["losses_identical"].get<bool>());
  const nlohmann::json rep2 = test::read_json(dir.path() / "out" / "rule" / "rewind" / "report.json");
  EXPECT_EQ(rep2["losses"][0].size(), 6u);
  // Its rewind actions asked for nothing more: no nested pass, no stop.
  EXPECT_TRUE(rep2["rewind"].is_null());
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "rule" / "rewind" / "rewind"));
}

TEST(Rewind, BadRewindActionsAreBadInput) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("a.yaml", scenario("a", 2, "", R"y(  watch_points: [{match: ["*"], conditions: [{when: "nan_count > 0", actions: ["rewind(full_dump, sideways)"]}]}]
)y"));
  test::CmdResult r = test::run("run a.yaml --out out", dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("unknown rewind argument 'sideways'"), std::string::npos) << r.err;
  dir.write("b.yaml", scenario("b", 2, "", R"y(  watch_points: [{match: ["*"], conditions: [{when: "nan_count > 0", actions: [break, rewind]}]}]
)y"));
  r = test::run("run b.yaml --out out", dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("break and rewind exclude each other"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "b"));
}

}  // namespace
}  // namespace probelab::sim
