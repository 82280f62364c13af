// A resumed run reads each rank's checkpoint once: the runner's check that it fits the model reads
// it (sim/run/resume_fit.h) and the simulation starts from what was read; the resumed steps lose
// what they lost in the run that wrote the checkpoints.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/run/checkpoint_store.h"
#include "sim/run/runner.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(ResumeOnce, TheSimulationStartsFromTheCheckpointsTheRunnerRead) {
  test::TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  const fs::path file = dir.write("train.yaml", R"(name: train
model: tinynet.yaml
chip: tiny
mode: training
training: {loss: mse, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
seed: 3
steps: 4
ranks: 2
checkpoints: {every: 1}
)");
  RunOptions ro;
  ro.out_root = dir.path() / "out";
  ro.baseline = false;
  ro.trace = false;
  const auto quiet = [](const std::string&) {};
  Runner first(ro);
  first.prepare({file});
  const json original = first.run(quiet).at(0).report;
  ASSERT_EQ(original.value("status", ""), "ok") << original.dump();

  const fs::path ckpt = dir.path() / "out/train/checkpoints";
  Scenario s = read_checkpoint_scenario(ckpt, LoadOptions{});
  s.name = "resumed";
  s.resume = Scenario::Resume{2, ckpt};
  ro.out_root = dir.path() / "resumed";
  Runner resumed(ro);
  resumed.add(s);  // reads both ranks' step-2 checkpoints
  // From here on no checkpoint tensor can be read again.
  std::size_t spoiled = 0;
  for (const auto& e : fs::recursive_directory_iterator(ckpt))
    if (e.path().extension() == ".npy") {
      std::ofstream(e.path(), std::ios::trunc) << "not a tensor";
      ++spoiled;
    }
  ASSERT_GT(spoiled, 0u);
  const json rep = resumed.run(quiet).at(0).report;
  ASSERT_EQ(rep.value("status", ""), "ok") << rep.value("error", std::string());
  ASSERT_EQ(rep["losses"].size(), 2u);
  for (std::size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(rep["losses"][r].size(), 2u) << rep["losses"];
    for (std::size_t k = 0; k < 2; ++k) EXPECT_EQ(rep["losses"][r][k], original["losses"][r][k + 2]) << "rank " << r;
  }
}

}  // namespace
}  // namespace probelab::sim
