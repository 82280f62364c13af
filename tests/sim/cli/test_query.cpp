// `probelab query`: reverse queries on a finished run answered from its checkpoints plus
// deterministic re-execution: when a tensor first became non-finite or exceeded a bound (an
// activation, a weight found by bisecting the checkpoints), which op last wrote an element
// (activation, in-place weight, fed input) with its value before and after; bad input exits 2.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

std::string training(const std::string& name, const std::string& every, const std::string& injections) {
  return "name: " + name + R"(
model: tinynet.yaml
chip: tiny
mode: training
training: {loss: mse, optimizer: {type: sgd, lr: 0.05}}
seed: 3
steps: 7
checkpoints: {every: )" + every + R"(}
injections:
)" + injections;
}

class Query : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    dir_->write("tinynet.yaml", test::kTinyNet);
    // A finite spike in relu's output at step 2, a NaN in fc1's output at step 4.
    const std::string inj = "  - {kind: value, op: relu, element: 9, value: 30, step: 2}\n"
                            "  - {kind: nan, op: fc1, element: 21, step: 4}\n";
    dir_->write("every1.yaml", training("every1", "1", inj));
    dir_->write("every3.yaml", training("every3", "3", inj));
    const test::CmdResult r = test::run("run every1.yaml every3.yaml --out out --jobs 2", *dir_);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static TempDir* dir_;
  nlohmann::json query(const std::string& args, int want_code) {
    const test::CmdResult r = test::run("query " + args + " --json", *dir_);
    EXPECT_EQ(r.code, want_code) << args << "\n" << r.out << r.err;
    return nlohmann::json::parse(r.out.empty() ? "{}" : r.out);
  }
};
TempDir* Query::dir_ = nullptr;

TEST_F(Query, FirstNonFiniteActivationByReexecutionWithAStopCondition) {
  const nlohmann::json j = query("out/every1 nonfinite fc1 --out q1", 0);
  EXPECT_EQ(j["step"], 4);
  EXPECT_EQ(j["written_by"], "fc1");
  EXPECT_EQ(j["element"], 21);
  EXPECT_EQ(j["value"], "nan");
  EXPECT_EQ(j["coordinate"], nlohmann::json::array({1, 5}));  // fc1 is [4, 16]
  // The scan stopped at step 4 (not 6); the element pass ran step 4 alone from its checkpoint.
  EXPECT_EQ(j["search"]["simulations"], 2);
  EXPECT_EQ(j["search"]["runs"][0]["steps_run"], 5);
  EXPECT_EQ(j["search"]["runs"][1]["from_step"], 4);
  EXPECT_EQ(j["search"]["runs"][1]["steps_run"], 1);
  EXPECT_TRUE(fs::exists(dir_->path() / "q1" / "query.json"));
}

TEST_F(Query, FirstNonFiniteWeightByBisectingTheCheckpoints) {
  // Checkpoints every step: the bisection bounds it to one step and the next checkpoint holds
  // the written value, so no simulation is needed.
  nlohmann::json j = query("out/every1 nonfinite fc2/weight --out q2", 0);
  EXPECT_EQ(j["step"], 4);
  const nlohmann::json element = j["element"];
  EXPECT_EQ(j["search"]["simulations"], 0);
  EXPECT_LE(j["search"]["checkpoints_read"].get<int>(), 4);  // bisection over 7 checkpoints
  EXPECT_NE(j["written_by"].get<std::string>().find("fc2/weight"), std::string::npos) << j.dump(1);
  // Every third step: the checkpoints bound it to steps 3..5, one re-execution from step 3 finds it.
  j = query("out/every3 nonfinite fc2/weight --out q3", 0);
  EXPECT_EQ(j["step"], 4);
  EXPECT_EQ(j["search"]["interval"], nlohmann::json::array({3, 5}));
  EXPECT_EQ(j["search"]["runs"][0]["from_step"], 3);
  EXPECT_TRUE(j["value"] == "nan" || j["value"] == "inf" || j["value"] == "-inf") << j.dump(1);
  EXPECT_EQ(j["element"], element);  // the same value, read from a capture instead of a checkpoint
}

TEST_F(Query, ExceedsFindsTheSpikeAndNeverIsExitOne) {
  nlohmann::json j = query("out/every1 exceeds relu 20 --out q4", 0);
  EXPECT_EQ(j["step"], 2);
  EXPECT_EQ(j["element"], 9);
  EXPECT_EQ(j["value"], 30.0);
  EXPECT_EQ(j["search"]["runs"][0]["steps_run"], 3);  // stopped at step 2
  j = query("out/every1 exceeds x 1000 --out q5", 1);  // the fed input never does
  EXPECT_FALSE(j["found"].get<bool>());
}

TEST_F(Query, LastWriterOfAnActivationAnInPlaceWeightAndAFedInput) {
  nlohmann::json j = query("out/every1 writer relu 9 --step 2 --out q6", 0);
  EXPECT_EQ(j["writer"]["op"], "relu");
  EXPECT_EQ(j["after"], 30.0);
  EXPECT_TRUE(j["before"].is_number());  // relu's element 9 at step 1
  EXPECT_NE(j["before"], 30.0);
  ASSERT_FALSE(j["readers"].empty());  // fc2 and its weight gradient read it at step 2
  EXPECT_EQ(j["readers"][0]["op"], "fc2");
  for (const auto& rd : j["readers"]) EXPECT_TRUE(rd["same"].get<bool>()) << rd.dump();
  EXPECT_FALSE(j["changed_in_memory"].get<bool>());
  j = query("out/every1 writer fc2/weight 3 --step 1 --out q7", 0);
  EXPECT_EQ(j["writer"]["kind"], "in-place update");
  EXPECT_TRUE(j["before"].is_number());
  EXPECT_TRUE(j["after"].is_number());
  EXPECT_NE(j["before"], j["after"]);  // SGD moved it
  ASSERT_FALSE(j["readers"].empty());  // read at step 2 as written
  for (const auto& rd : j["readers"]) EXPECT_TRUE(rd["same"].get<bool>()) << rd.dump();
  j = query("out/every1 writer x 0 --step 3 --out q8", 0);
  EXPECT_EQ(j["writer"]["kind"], "host (fed input)");
  EXPECT_NE(j["before"], j["after"]);  // a new batch each step
}

TEST_F(Query, BadInputExitsWithTwo) {
  for (const std::string args : {"out/every1 nonfinite nosuchtensor", "out/every1 writer fc1 100000",
                                 "out/every1 writer fc1 3 --step 9", "out/every1 exceeds fc1", "out/every1 exceeds fc1 abc",
                                 "out/nothing nonfinite fc1", "out/every1 nonfinite fc1 --rank 3"}) {
    const test::CmdResult r = test::run("query " + args, *dir_);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
    EXPECT_FALSE(r.err.empty()) << args;
  }
}

// A gradient that is non-finite on one rank of two (before the all-reduce): the scan's stop
// condition fires on rank 1 alone, and the job stops together (the ranks all-reduce their stop
// flags each step; rank 0 once waited in step 3's all-reduce until the synchronize timeout).
TEST(QueryRanks, NonFiniteGradientOfOneRankOfTwo) {
  TempDir dir;
  // mlp on two ranks for 4 steps, then `rest`.
  auto two_ranks = [](const std::string& name, const std::string& rest) {
    return "name: " + name + "\nmodel: mlp\nchip: tiny\nmode: training\nranks: 2\nsteps: 4\nseed: 3\n" + rest;
  };
  dir.write("r2.yaml", two_ranks("r2", R"(checkpoints: {every: 1}
training: {optimizer: {type: adam, lr: 0.001}}
probes: {mode: statistics, watch_points: ["*"]}
injections:
  - {kind: inf, op: fc2/matmul/grad/b, element: 7, step: 2, rank: 1, sign: "-"}
)"));
  test::CmdResult r = test::run("run r2.yaml --out out --no-baseline", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = test::run("query out/r2 nonfinite fc2/matmul/weight/gradient --rank 1 --json", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["step"], 2);
  EXPECT_EQ(j["element"], 7);
  EXPECT_EQ(j["written_by"], "fc2/matmul/grad/b");
  EXPECT_EQ(j["value"], "-inf");
  // A stop in a run of its own, on rank 0 alone: both ranks end after step 1, the run passes.
  dir.write("stop.yaml", two_ranks("stop", R"(training: {optimizer: {type: sgd, lr: 0.01}}
probes:
  mode: statistics
  watch_points: [{match: ["fc1/matmul/weight/gradient"], conditions: [{when: "inf_count > 0", actions: [stop]}]}]
injections:
  - {kind: inf, op: fc1/matmul/grad/b, element: 0, step: 1, rank: 0}
)"));
  r = test::run("run stop.yaml --out out2", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto rep = nlohmann::json::parse(test::slurp(dir.path() / "out2" / "stop" / "report.json"));
  ASSERT_EQ(rep["cycles"]["per_step"].size(), 2u) << rep["cycles"].dump();
  for (const auto& steps : rep["cycles"]["per_step"]) EXPECT_EQ(steps.size(), 2u) << rep["cycles"].dump();
}

}  // namespace
}  // namespace probelab::sim
