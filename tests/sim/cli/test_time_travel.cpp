// `probelab run` with checkpoints and `probelab replay`: a resumed run is bit-identical to the
// original when nothing changes or only probes change, and names the difference when a setting
// that changes values does; bad replay input exits with 2.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

std::string training(const std::string& name, const std::string& optimizer) {
  return "name: " + name + R"(
model: tinynet.yaml
chip: tiny
mode: training
training: {loss: mse, optimizer: )" + optimizer + R"(}
seed: 3
steps: 4
checkpoints: {every: 1}
probes:
  mode: statistics
  watch_points: ["fc*"]
)";
}

TEST(TimeTravel, CheckpointsThenReplayIsBitIdenticalWithProbesChanged) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("sgd.yaml", training("sgd", "{type: sgd, lr: 0.05, momentum: 0.9}"));
  test::CmdResult r = test::run("run sgd.yaml --out out", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const fs::path run = dir.path() / "out" / "sgd";
  const nlohmann::json rep = test::read_json(run / "report.json");
  ASSERT_TRUE(rep["checkpoints"].is_object()) << rep.dump();
  EXPECT_EQ(rep["checkpoints"]["taken"], 4);
  EXPECT_GT(rep["checkpoints"]["bytes"].get<std::uint64_t>(), 0u);
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(fs::exists(run / "checkpoints" / "rank0" / ("step" + std::to_string(k)) / "checkpoint.json"));

  // Same settings, then other probes (full capture of everything): identical either way.
  for (const std::string sets : {"", " --set probes.mode=full --set 'probes.watch_points=[\"*\"]'"}) {
    r = test::run("replay out/sgd --from-step 2 --out replay_a" + sets, dir);
    EXPECT_EQ(r.code, 0) << sets << "\n" << r.out << r.err;
    const nlohmann::json j = test::read_json(dir.path() / "replay_a" / "sgd" / "replay.json");
    EXPECT_TRUE(j["identical"].get<bool>()) << j.dump(2);
    EXPECT_EQ(j["compared"]["losses"], 2);
    EXPECT_GT(j["compared"]["checkpoint_tensors"].get<int>(), 0);  // the step-3 state
    EXPECT_GT(j["compared"]["outputs"].get<int>(), 0);
  }
  // The full-capture replay really captured: its dumps exist for steps 2 and 3 only.
  const nlohmann::json dump = test::read_json(dir.path() / "replay_a" / "sgd" / "dump" / "rank0" / "dump.json");
  ASSERT_FALSE(dump["entries"].empty());
  for (const auto& e : dump["entries"]) EXPECT_GE(e["step"].get<int>(), 2);

  // A value-changing setting: the replay names the difference and exits 1.
  r = test::run("replay out/sgd --from-step 1 --out replay_b --set training.optimizer.lr=0.04", dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const nlohmann::json d = test::read_json(dir.path() / "replay_b" / "sgd" / "replay.json");
  EXPECT_FALSE(d["identical"].get<bool>());
  EXPECT_FALSE(d["differences"].empty());
}

TEST(TimeTravel, ReplayKeepsTheRunsSeedUnlessSetSeedGivesAnother) {
  // The run's seed came from --seed (scenario.yaml says 3): a plain replay uses it and repeats
  // the run; --set seed=99 replays steps 1.. with seed 99's data, reports that seed and names the
  // differences (it was once ignored: seed 5 and "bit-identical").
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("sgd.yaml", training("sgd", "{type: sgd, lr: 0.05}"));
  test::CmdResult r = test::run("run sgd.yaml --out out --seed 5", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = test::run("replay out/sgd --from-step 1 --out same", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(test::read_json(dir.path() / "same" / "sgd" / "report.json")["seed"], 5);
  r = test::run("replay out/sgd --from-step 1 --out other --set seed=99", dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(test::read_json(dir.path() / "other" / "sgd" / "report.json")["seed"], 99);
  const nlohmann::json d = test::read_json(dir.path() / "other" / "sgd" / "replay.json");
  EXPECT_FALSE(d["identical"].get<bool>());
  bool loss = false;
  for (const auto& x : d["differences"]) loss = loss || x["what"] == "loss";
  EXPECT_TRUE(loss) << d.dump(1);
}

TEST(TimeTravel, AdamStateAndStepCountSurviveTheCheckpoint) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("adam.yaml", training("adam", "{type: adam, lr: 0.01}"));
  ASSERT_EQ(test::run("run adam.yaml --out out", dir).code, 0);
  for (int k : {1, 3}) {
    const test::CmdResult r = test::run("replay out/adam --from-step " + std::to_string(k) + " --out rep" + std::to_string(k), dir);
    EXPECT_EQ(r.code, 0) << k << ": " << r.out << r.err;
  }
}

TEST(TimeTravel, DelayedScalingStateRidesInTheCheckpoints) {
  // FP8 with delayed scaling: the amax history and scale live in HBM as graph tensors, so a
  // replay from a later step restores them and repeats the steps bit for bit (with the initial
  // scale instead, step 3 would quantize differently).
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("fp8.yaml", training("fp8", "{type: sgd, lr: 0.05}") + R"(quantization:
  ops: ["fc*"]
  weights: e4m3
  activations: {format: e4m3, scaling: delayed, amax_history: 2, algorithm: max}
)");
  ASSERT_EQ(test::run("run fp8.yaml --out out", dir).code, 0);
  const fs::path ck = dir.path() / "out" / "fp8" / "checkpoints" / "rank0" / "step3";
  EXPECT_TRUE(fs::exists(ck / "fc1.quant_state.activations.npy"));
  const test::CmdResult r = test::run("replay out/fp8 --from-step 3 --out rep --set probes.mode=full", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json j = test::read_json(dir.path() / "rep" / "fp8" / "replay.json");
  EXPECT_TRUE(j["identical"].get<bool>()) << j.dump(2);
  const nlohmann::json q = test::read_json(dir.path() / "rep" / "fp8" / "report.json")["quantization"];
  ASSERT_TRUE(q.is_object());
  EXPECT_EQ(q["layers"][0]["activations"]["scaling"], "delayed");
  EXPECT_NE(q["layers"][0]["activations"]["per_step"][0]["scale"], 1.0);  // the restored scale, not the initial one
}

TEST(TimeTravel, BadReplayInputExitsWithTwo) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("sgd.yaml", training("sgd", "{type: sgd, lr: 0.05}"));
  std::string plain = training("plain", "{type: sgd, lr: 0.05}");
  plain.replace(plain.find("checkpoints: {every: 1}\n"), 24, "");
  dir.write("plain.yaml", plain);
  ASSERT_EQ(test::run("run sgd.yaml plain.yaml --out out", dir).code, 0);
  test::CmdResult r = test::run("replay out/sgd --from-step 7", dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--from-step"), std::string::npos) << r.err;
  r = test::run("replay out/plain --from-step 1", dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("checkpoints"), std::string::npos) << r.err;
  EXPECT_EQ(test::run("replay out/nothing --from-step 1", dir).code, 2);
  dir.write("bad.yaml", plain + "checkpoints: {every: 0}\n");
  EXPECT_EQ(test::run("run bad.yaml", dir).code, 2);
}

}  // namespace
}  // namespace probelab::sim
