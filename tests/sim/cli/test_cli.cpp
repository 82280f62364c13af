// The probelab executable: --help everywhere, exit codes (0 held, 1 failed, 2 bad input), list,
// show, run on small temporary scenarios, compare, and byte-identical reports for the same seed.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;

using test::run;


std::string scenario(const std::string& name, const std::string& extra) {
  return "name: " + name + "\nmodel: tinynet.yaml\nchip: tiny\nseed: 3\nsteps: 2\n" + extra;
}

const char* kProbes = R"(probes:
  mode: full
  watch_points: ["*"]
  compare: {enabled: true}
)";

TEST(Cli, HelpOnEverySubcommand) {
  TempDir dir;
  for (const char* sub : {"", "run", "list", "show", "compare"}) {
    const test::CmdResult r = run(std::string(sub) + " --help", dir);
    EXPECT_EQ(r.code, 0) << sub << ": " << r.err;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub << ": " << r.out;
  }
}

TEST(Cli, BadInputExitsWithTwo) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("unknown_key.yaml", scenario("a", "stepz: 4\n"));
  test::CmdResult r = run("run unknown_key.yaml", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown_key.yaml:6:1: key 'stepz'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out" / "a")) << "nothing runs on bad input";

  dir.write("bad_yaml.yaml", "name: [x\n");
  EXPECT_EQ(run("run bad_yaml.yaml", dir).code, 2);
  EXPECT_EQ(run("run does_not_exist.yaml", dir).code, 2);
  dir.write("good.yaml", scenario("good", ""));
  r = run("run good.yaml --set nonsense", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("key=value"), std::string::npos) << r.err;
  r = run("run good.yaml --set chip.overrides.num_corez=3", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("num_corez"), std::string::npos) << r.err;
  dir.write("bad_glob.yaml", scenario("g", "expectations:\n  - detection: {kind: nan, op: 'fc[1'}\n"));
  EXPECT_EQ(run("run bad_glob.yaml", dir).code, 2);
  dir.write("bad_site.yaml", scenario("s", "injections:\n  - {kind: nan, op: no_such_op, step: 0}\n"));
  r = run("run bad_site.yaml", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no_such_op"), std::string::npos) << r.err;
  dir.write("bad_model.yaml", "name: m\nops:\n  - {name: a, type: NoSuchOp}\n");
  dir.write("uses_bad_model.yaml", "name: u\nmodel: bad_model.yaml\n");
  EXPECT_EQ(run("run uses_bad_model.yaml", dir).code, 2);
  EXPECT_EQ(run("frobnicate", dir).code, 2);
  EXPECT_EQ(run("show no_such_model", dir).code, 2);
  EXPECT_EQ(run("compare nowhere elsewhere", dir).code, 2);
}

TEST(Cli, ListShowsEverySection) {
  TempDir dir;
  const test::CmdResult r = run("list", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"== chips ==", "ascend910b", "tiny", "clock_mhz", "== ops ==", "MatMul", "Conv",
                        "== injectors ==", "nan", "== probe options", "watch_points", "== expectation kinds",
                        "detection", "capture", "nan_source"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  EXPECT_EQ(run("list chips", dir).out.find("== ops =="), std::string::npos);
}

TEST(Cli, ShowPrintsSnapshotsAndResolvedScenario) {
  TempDir dir;
  test::CmdResult r = run("show mlp", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("fused"), std::string::npos);
  EXPECT_NE(r.out.find("FusedLayerNormRelu"), std::string::npos) << r.out;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("s.yaml", scenario("s", kProbes));
  r = run("show s.yaml --set steps=4", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("steps: 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("probe sites"), std::string::npos) << r.out;
}

// An ONNX model's symbolic dimensions bound on the command line (--dims), and a scenario's own
// model.dims, overridden with --dims as with --set model.dims.NAME=VALUE.
TEST(Cli, ShowBindsSymbolicDimensions) {
  TempDir dir;
  test::CmdResult r = run("show gpt2_block --dims batch=2,seq=16 --stage original", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("[2, 16, 768]"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[1, 128, 768]"), std::string::npos);
  r = run("show " + (test::source_root() / "scenarios/models/rnn_encoder.onnx").string() +
              " --dims batch=3 --dims seq=7 --json --stage original",
          dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  bool seen = false;
  for (const auto& t : j["snapshots"]["original"]["tensors"])
    if (t["name"] == "logits") {
      EXPECT_EQ(t["shape"], nlohmann::json::array({3, 7, 32}));
      seen = true;
    }
  EXPECT_TRUE(seen) << r.out.substr(0, 2000);
  // The scenario binds batch 1, seq 128; --dims changes seq only.
  r = run("show 08_gpt2_block_inf --dims seq=32 --stage original", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("dims: {batch: 1, seq: 32}"), std::string::npos) << r.out.substr(0, 3000);
  EXPECT_NE(r.out.find("[1, 32, 768]"), std::string::npos);
  // A scenario naming a bundled ONNX model in the short form takes --set model.dims too.
  dir.write("s.yaml", "name: s\nmodel: gpt2_block\nchip: tiny\n");
  r = run("show s.yaml --set model.dims.batch=2 --set model.dims.seq=8 --stage original", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("[2, 8, 768]"), std::string::npos) << r.out.substr(0, 3000);
  r = run("show s.yaml --dims batch=2", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("symbolic ('seq') and no value is bound"), std::string::npos) << r.err;
}

TEST(Cli, RunExitCodesFollowExpectations) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("pass.yaml", scenario("pass", std::string(kProbes) + "expectations:\n  - no_detection: {}\n  - capture: {dropped: 0}\n"));
  dir.write("fail.yaml", scenario("fail", std::string(kProbes) +
                                              "expectations:\n  - detection: {kind: nan, op: fc2}\n  - capture: {dropped: 0}\n"));
  test::CmdResult r = run("run pass.yaml", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  for (const char* f : {"report.json", "summary.txt", "trace.json", "outputs/rank0/fc2.npy"})
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "out/pass" / f)) << f;
  r = run("run fail.yaml --out runs", dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("expected: detection of nan at op fc2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("actual:"), std::string::npos) << r.out;
  const auto rep = nlohmann::json::parse(test::slurp(dir.path() / "runs/fail/report.json"));
  EXPECT_FALSE(rep["passed"].get<bool>());
  EXPECT_TRUE(rep["expectations"][1]["passed"].get<bool>());
  // --json prints the machine-readable result.
  r = run("run pass.yaml --json --out j", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_EQ(j["scenarios"][0]["name"], "pass");
}

TEST(Cli, SameSeedGivesIdenticalReportsAndCompareFindsTheInjection) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("clean.yaml", scenario("clean", kProbes));
  dir.write("faulty.yaml", scenario("faulty", std::string(kProbes) +
                                                  "injections:\n  - {kind: nan, op: relu, element: 5, step: 1}\n"));
  ASSERT_EQ(run("run clean.yaml --out a --jobs 2", dir).code, 0);
  ASSERT_EQ(run("run clean.yaml --out b", dir).code, 0);
  EXPECT_EQ(test::slurp(dir.path() / "a/clean/report.json"), test::slurp(dir.path() / "b/clean/report.json"));
  EXPECT_EQ(test::slurp(dir.path() / "a/clean/trace.json"), test::slurp(dir.path() / "b/clean/trace.json"));
  test::CmdResult r = run("compare a/clean b/clean", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("no divergence"), std::string::npos) << r.out;
  ASSERT_EQ(run("run faulty.yaml --out a", dir).code, 0);
  r = run("compare a/clean a/faulty", dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("first divergent op: relu (step 1"), std::string::npos) << r.out;
  // A different seed changes the data and therefore the report.
  ASSERT_EQ(run("run clean.yaml --out c --seed 99", dir).code, 0);
  EXPECT_NE(test::slurp(dir.path() / "a/clean/report.json"), test::slurp(dir.path() / "c/clean/report.json"));
}

}  // namespace
}  // namespace probelab::sim
