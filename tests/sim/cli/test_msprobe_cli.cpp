// msprobe's config.json through `probelab run`: the bundled examples run, the mapping is printed
// and kept in the report, and a probe config that selects nothing is a warning (an error with
// --strict).
#include <algorithm>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

using test::run;

std::string scenario(const std::string& name, const std::string& probes) {
  return "name: " + name + "\nmodel: tinynet.yaml\nchip: tiny\nseed: 3\nsteps: 2\n" + probes;
}

TEST(MsprobeCli, BundledExamplesRunWithTheirMapping) {
  TempDir dir;
  const test::CmdResult r =
      run("run '" + (test::source_root() / "scenarios/msprobe").string() + "' --out out --no-trace --no-baseline", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("probes from msprobe config.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dump_path: \"./dump_path\""), std::string::npos) << r.out;
  for (const char* name : {"msprobe_mlp_statistics", "msprobe_mlp_tensor", "msprobe_mlp_overflow_check"}) {
    const json rep = json::parse(test::slurp(dir.path() / "out" / name / "report.json"));
    EXPECT_EQ(rep["probe_config"]["format"], "msprobe") << name;
    EXPECT_GE(rep["probe_config"]["mapping"].size(), 5u) << name;
    EXPECT_TRUE(rep["passed"].get<bool>()) << name;
    EXPECT_NE(test::slurp(dir.path() / "out" / name / "summary.txt").find("translated:"), std::string::npos);
  }
  // task tensor, step [1], list [Module.fc2..., relu], data_mode [forward, output]: exactly the
  // fc2 module's ops and the ReLU, forward outputs, at step 1, under the dump_path's name
  std::set<std::string> files;
  const fs::path dump = dir.path() / "out/msprobe_mlp_tensor/data_dump/rank0";
  for (const auto& e : fs::recursive_directory_iterator(dump))
    if (e.path().extension() == ".npy") files.insert(fs::relative(e.path(), dump).string());
  EXPECT_EQ(files, (std::set<std::string>{"step1/fc1.relu.out0.npy", "step1/fc2.bias.out0.npy",
                                          "step1/fc2.gelu.out0.npy", "step1/fc2.matmul.out0.npy"}));
  // overflow_check: the injected NaN is reported at its op and the tensor holding it is dumped
  const json ov = json::parse(test::slurp(dir.path() / "out/msprobe_mlp_overflow_check/report.json"));
  EXPECT_TRUE(fs::exists(dir.path() / "out/msprobe_mlp_overflow_check/overflow_dump/rank0/step1/fc3.matmul.out0.full_dump.npy"));
  EXPECT_EQ(ov["anomalies"][0]["op"], "fc3/matmul");
}

TEST(MsprobeCli, AConfigThatSelectsNothingWarnsAndFailsWithStrict) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  // probelab's own vocabulary with no watch point: nothing to capture
  dir.write("none.yaml", scenario("none", "probes: {mode: full, steps: [0], ranks: [0]}\n"));
  // msprobe's config.json selecting a step the run does not have
  dir.write("late.json", R"({"task": "tensor", "dump_path": "./d", "step": [7], "rank": []})");
  dir.write("late.yaml", scenario("late", "probes: late.json\n"));
  dir.write("fine.yaml", scenario("fine", "probes: {watch_points: ['*']}\n"));
  for (const char* name : {"none", "late"}) {
    test::CmdResult r = run(std::string("run ") + name + ".yaml --out out --no-trace --no-baseline", dir);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("selects nothing to capture"), std::string::npos) << name << ": " << r.out;
    const json rep = json::parse(test::slurp(dir.path() / "out" / name / "report.json"));
    ASSERT_FALSE(rep["warnings"].empty()) << name;
    EXPECT_NE(rep["warnings"][0].get<std::string>().find("selects nothing"), std::string::npos) << rep["warnings"];
    EXPECT_NE(test::slurp(dir.path() / "out" / name / "summary.txt").find("selects nothing"), std::string::npos);
    r = run(std::string("run ") + name + ".yaml --out strict --no-trace --no-baseline --strict", dir);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("selects nothing"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.path() / "strict" / name)) << "nothing runs on bad input";
  }
  const json late = json::parse(test::slurp(dir.path() / "out/late/report.json"));
  EXPECT_NE(late["warnings"][0].get<std::string>().find("steps [7] miss the run's steps 0-1"), std::string::npos);
  EXPECT_EQ(run("run fine.yaml --out out --no-trace --no-baseline --strict", dir).code, 0);
  dir.write("missing.yaml", scenario("missing", "probes: nowhere.json\n"));
  const test::CmdResult m = run("run missing.yaml --no-trace", dir);
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("nowhere.json"), std::string::npos) << m.err;
}

TEST(MsprobeCli, AMinimalMsprobeConfigDumpsEveryOpOfItsSteps) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("cfg.json", R"({"task": "tensor", "step": [1]})");
  dir.write("minimal.yaml", scenario("minimal", "probes: cfg.json\n"));
  const test::CmdResult r = run("run minimal.yaml --out out --no-trace --no-baseline --strict", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("level (absent: msprobe's default \"L1\")"), std::string::npos) << r.out;
  const json rep = json::parse(test::slurp(dir.path() / "out/minimal/report.json"));
  EXPECT_EQ(rep["probe_config"]["format"], "msprobe");
  EXPECT_TRUE(rep["warnings"].empty()) << rep["warnings"];
  // every op's inputs and outputs, full tensors, at step 1 only, under output.dir's default
  std::set<std::string> steps, ops;
  for (const auto& e : fs::recursive_directory_iterator(dir.path() / "out/minimal/dump/rank0"))
    if (e.path().extension() == ".npy") {
      steps.insert(e.path().parent_path().filename().string());
      ops.insert(e.path().filename().string().substr(0, e.path().filename().string().find('.')));
    }
  EXPECT_EQ(steps, (std::set<std::string>{"step1"}));
  EXPECT_EQ(ops, (std::set<std::string>{"fc1", "fc1_bias", "relu", "fc2"}));
}

TEST(MsprobeCli, ShowPrintsWhatTheConfigTranslatesTo) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("cfg.json", R"({"task": "tensor", "dump_path": "./d", "step": [1], "precision": "low"})");
  dir.write("s.yaml", scenario("s", "probes: cfg.json\n"));
  const test::CmdResult r = run("show s.yaml", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const char* part : {"== probes: msprobe config.json", "task: \"tensor\"", "-> mode: full", "dump_path: \"./d\"",
                           "-> output.dir: d", "as probelab's config:\n", "\n  mode: full\n", "\n  steps:",
                           "warning: msprobe precision: \"low\" has no equivalent here"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  const test::CmdResult j = run("show s.yaml --json", dir);
  ASSERT_EQ(j.code, 0) << j.out << j.err;
  const json show = json::parse(j.out);
  EXPECT_EQ(show["probes"]["format"], "msprobe");
  EXPECT_EQ(show["probes"]["translated"]["mode"], "full");
  EXPECT_EQ(show["probes"]["translated"]["output"]["dir"], "d");
  EXPECT_EQ(show["probes"]["translated"]["watch_points"][0]["match"][0], "*");
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(MsprobeCli, EachWarningIsPrintedOnce) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  // every watch point selects nothing: the preparation says so, and the insertion pass of each rank
  dir.write("nomatch.yaml", scenario("nomatch", "ranks: 2\nprobes: {watch_points: ['nosuch*']}\n"));
  // msprobe's dump_enable: false: the translation and the preparation both knew the probes are off
  dir.write("off.json", R"({"task": "statistics", "dump_path": "./d", "dump_enable": false})");
  dir.write("off.yaml", scenario("off", "probes: off.json\n"));
  for (const auto& [name, what] : {std::pair{"nomatch", "'wp0'"}, std::pair{"off", "nothing is captured"}}) {
    const test::CmdResult r = run(std::string("run ") + name + ".yaml --out out --no-trace --no-baseline", dir);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(count(r.out, what), 1u) << name << ": " << r.out;
    const std::string summary = test::slurp(dir.path() / "out" / name / "summary.txt");
    EXPECT_EQ(count(summary, what), 1u) << name << ": " << summary;
    EXPECT_EQ(count(summary, "warnings:"), 1u) << name << ": " << summary;
    const json rep = json::parse(test::slurp(dir.path() / "out" / name / "report.json"));
    EXPECT_EQ(rep["warnings"].size(), 1u) << name << ": " << rep["warnings"];
  }
}

}  // namespace
}  // namespace probelab::sim
