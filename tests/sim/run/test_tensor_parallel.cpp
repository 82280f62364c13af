// Tensor parallelism (parallel.tensor) as users run it: the MLP's MatMuls split column-wise over
// the ranks, their outputs gathered by AllGather, the weight shards trained with the collective's
// transposed gradient. Every rank must see the same training (identical losses on all ranks), and
// that training must be the single-device one: each step's loss within kRelTol of the ranks: 1 run
// of the same model, data and optimizer. Measured: bit-identical (column splits keep every dot
// product's reduction order); kRelTol = 2e-3 is about three FP16 ulps of these ~3000 losses.
// A run with another learning rate differs by far more from step 2 on, so the check can fail.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

constexpr double kRelTol = 2e-3;
constexpr int kSteps = 5;

std::string job(const std::string& name, int ranks, const std::string& tensor, const std::string& lr) {
  std::string y = "name: " + name + "\nmodel: mlp_loss_scaled\nmode: training\nranks: " + std::to_string(ranks) +
                  "\nsteps: " + std::to_string(kSteps) + "\nseed: 4\n";
  if (!tensor.empty()) y += "parallel: {tensor: " + tensor + "}\n";
  y += "training:\n  loss: model\n  optimizer: {type: sgd, lr: " + lr +
       "}\n  allreduce: {algorithm: ring, accumulation: fp32}\n";
  return y;
}

// report.json "losses": one list of per-step losses per rank.
std::vector<std::vector<double>> losses(const TempDir& dir, const std::string& name, int ranks,
                                        const std::string& tensor, const std::string& lr = "5.0e-4") {
  dir.write(name + ".yaml", job(name, ranks, tensor, lr));
  const test::CmdResult r =
      test::run("run " + name + ".yaml --out out_" + name, dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const json report = json::parse(test::slurp(dir.path() / ("out_" + name) / name / "report.json"));
  return report.at("losses").get<std::vector<std::vector<double>>>();
}

bool within(double a, double b) { return std::abs(a - b) <= kRelTol * std::abs(b); }

void expect_tensor_parallel_matches(const std::vector<std::vector<double>>& tp,
                                    const std::vector<double>& single, int ranks) {
  ASSERT_EQ(tp.size(), static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    ASSERT_EQ(tp[r].size(), single.size());
    EXPECT_EQ(tp[r], tp[0]) << "rank " << r << " trains differently from rank 0";
    for (std::size_t s = 0; s < single.size(); ++s)
      EXPECT_TRUE(within(tp[r][s], single[s])) << "rank " << r << " step " << s << ": " << tp[r][s]
                                               << " vs single device " << single[s];
  }
}

TEST(TensorParallel, RanksAgreeAndMatchTheSingleDeviceTraining) {
  TempDir dir;
  const auto single = losses(dir, "single", 1, "");
  ASSERT_EQ(single.size(), 1u);
  ASSERT_EQ(single[0].size(), static_cast<std::size_t>(kSteps));
  // Every MatMul over 2 ranks; over 4 ranks the two whose 32 columns divide by 4 (fc3 has 10).
  expect_tensor_parallel_matches(losses(dir, "tp2", 2, "[\"fc*/matmul\"]"), single[0], 2);
  expect_tensor_parallel_matches(losses(dir, "tp4", 4, "[fc1/matmul, fc2/matmul]"), single[0], 4);

  // The comparison can fail: training with another learning rate leaves the tolerance.
  const auto other = losses(dir, "slow", 1, "", "1.0e-9");
  bool differs = false;
  for (std::size_t s = 0; s < single[0].size(); ++s) differs = differs || !within(other[0][s], single[0][s]);
  EXPECT_TRUE(differs) << "the learning rate does not change the losses: the check would not see a wrong gradient";
}

TEST(TensorParallel, MatMulsThatCannotBeSplitAreBadInput) {
  TempDir dir;
  dir.write("bad.yaml", job("bad", 4, "[\"fc*/matmul\"]", "5.0e-4"));  // fc3's 10 columns over 4 ranks
  const test::CmdResult r = test::run("run bad.yaml --out o", dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("parallel.tensor"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fc3/matmul"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace probelab::sim
