// Tensor parallelism (parallel.tensor) as users run it: the MLP's MatMuls split column-wise over
// the ranks, their outputs gathered by AllGather, the weight shards trained with the collective's
// transposed gradient. Every rank must see the same training (identical losses on all ranks), and
// that training must be the single-device one: each step's loss within kRelTol of the ranks: 1 run
// of the same model, data and optimizer. Measured: bit-identical (column splits keep every dot
// product's reduction order); kRelTol = 2e-3 is about three FP16 ulps of these ~3000 losses.
// A run with another learning rate differs by far more from step 2 on, so the check can fail.
// A shard's gradient is its block of the single device's (the gather's gradient is each rank's
// block of dY); a replicated weight's is the same on every rank (the split MatMuls' input
// gradients are all-reduced), so the replicated weights need no gradient all-reduce.
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>
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

// The gradients between split MatMuls are the single device's on every rank, as Megatron's
// all-reduce of a column-parallel layer's input gradient makes them: the gradient of fc1's ReLU
// output (reached through fc2's split input gradient) and of fc2's GELU (through fc3's), and the
// LayerNorm's three gradients before them, at every step. FP16: the split dot products round
// differently, kGradTol (measured: up to 3e-4 of the L2 norm). Without the all-reduce each rank
// holds its own part (measured: the parts' norms differ from the whole by 25-60 %).
constexpr double kGradTol = 2e-3;

using StatsKey = std::tuple<std::string, std::string, int>;  // op, edge, step
std::map<StatsKey, json> dumped_statistics(const std::filesystem::path& dump) {
  std::map<StatsKey, json> out;
  const json doc = json::parse(test::slurp(dump));
  for (const json& e : doc.at("entries"))
    if (e.at("payload") == "statistics")
      out[{e.at("op").get<std::string>(), e.at("edge").get<std::string>(), e.at("step").get<int>()}] = e.at("statistics");
  return out;
}

TEST(TensorParallel, GradientsBetweenSplitMatMulsAreTheSingleDevices) {
  TempDir dir;
  const std::string probes = "probes: {mode: statistics, watch_points: [\"*\"]}\n";
  dir.write("one.yaml", job("one", 1, "", "5.0e-4") + probes);
  dir.write("tp.yaml", job("tp", 2, "[\"fc*/matmul\"]", "5.0e-4") + probes);
  const test::CmdResult r = test::run("run one.yaml tp.yaml --no-baseline --out o", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto single = dumped_statistics(dir.path() / "o/one/dump/rank0/dump.json");
  int compared = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const auto tp = dumped_statistics(dir.path() / ("o/tp/dump/rank" + std::to_string(rank) + "/dump.json"));
    for (const auto& [key, st] : tp) {
      const auto& [op, edge, step] = key;
      if (op != "fc1/relu/grad" && op != "fc2/gelu/grad" && op != "fc1/norm/grad") continue;
      ASSERT_TRUE(single.count(key)) << op << " " << edge << " step " << step;
      for (const char* stat : {"l2", "max_abs"}) {
        const double a = st.at(stat).get<double>(), b = single.at(key).at(stat).get<double>();
        EXPECT_LE(std::abs(a - b), kGradTol * std::abs(b)) << "rank " << rank << " " << op << " " << edge << " step "
                                                           << step << " " << stat << ": " << a << " vs " << b;
        ++compared;
      }
    }
    // The all-reduce is not a no-op: each rank's part of fc2's input gradient is not the whole.
    for (int step = 0; step < kSteps; ++step) {
      const StatsKey part{"fc2/matmul/grad/a", "out0", step}, whole{"fc2/matmul/grad/a/tp_reduce", "out0", step};
      ASSERT_TRUE(tp.count(part) && tp.count(whole)) << "step " << step;
      const double p = tp.at(part).at("l2").get<double>(), w = tp.at(whole).at("l2").get<double>();
      EXPECT_GT(std::abs(p - w), 0.1 * w) << "rank " << rank << " step " << step << ": part " << p << ", whole " << w;
    }
  }
  EXPECT_EQ(compared, 2 * kSteps * 5 * 2);  // 2 ranks, 5 steps, 5 tensors (norm has 3), 2 statistics
}

// A transformer's projections ([batch, seq, d] @ [d, n]: outputs of rank 3) split over the ranks:
// the LLaMA-style block's q/k/v and SwiGLU projections over 2 ranks, FP16. Inference gives the
// single device's output bit for bit on every rank (each output column is the same dot product);
// in training every rank sees the same losses.
std::string llama_job(const std::string& name, int ranks, bool training) {
  std::string y = "name: " + name + "\nmodel: {name: llama_block, dims: {batch: 2, seq: 16}}\nmode: " +
                  (training ? "training" : "inference") + "\nranks: " + std::to_string(ranks) +
                  "\nsteps: 3\nseed: 3\nprecision: {compute: fp16}\n";
  if (ranks > 1)
    y += "parallel: {tensor: [\"*/q_proj/MatMul\", \"*/k_proj/MatMul\", \"*/v_proj/MatMul\", \"*/gate_proj/MatMul\", "
         "\"*/up_proj/MatMul\"]}\n";
  if (training)
    y += "training: {loss: auto, optimizer: {type: sgd, lr: 1.0e-4}, allreduce: {algorithm: ring, accumulation: fp32}}\n";
  return y;
}

TEST(TensorParallel, TransformerProjectionsSplitOverTheRanks) {
  TempDir dir;
  for (const auto& [name, ranks] : {std::pair<std::string, int>{"one", 1}, {"two", 2}}) {
    dir.write(name + ".yaml", llama_job(name, ranks, false));
    const test::CmdResult r = test::run("run " + name + ".yaml --no-baseline --out out_" + name, dir);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
  }
  const std::string single = test::slurp(dir.path() / "out_one/one/outputs/rank0/hidden_states.npy");
  ASSERT_FALSE(single.empty());
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(test::slurp(dir.path() / ("out_two/two/outputs/rank" + std::to_string(r) + "/hidden_states.npy")), single)
        << "rank " << r;
  dir.write("train.yaml", llama_job("train", 2, true));
  const test::CmdResult t = test::run("run train.yaml --no-baseline --out out_train", dir);
  ASSERT_EQ(t.code, 0) << t.out << t.err;
  const auto l = json::parse(test::slurp(dir.path() / "out_train/train/report.json")).at("losses");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0], l[1]);
  EXPECT_EQ(l[0].size(), 3u);
}

// Dynamic loss scaling's check that the ranks' parameters agree compares what every rank holds
// whole: a tensor-parallel shard is its rank's own (not compared), a ZeRO-1 shard counts as the
// parameter gathered back. With found_inf all-reduced every rank skips rank 1's overflow step and
// they agree; without, rank 1 alone skips and its replicated weights fall behind.
std::string scaled_job(const std::string& name, const std::string& parallel, bool all_reduce) {
  return "name: " + name + "\nmodel: mlp_loss_scaled\nmode: training\nranks: 2\nsteps: 4\nseed: 52\n" + parallel +
         "training:\n  loss: model\n  optimizer: {type: sgd, lr: 0.05}\n" +
         (parallel.empty() ? "  sharding: zero1\n" : "") +
         "  loss_scaling: {scale_op: scaled_loss, initial: 1024, growth_interval: 1000, all_reduce: " +
         (all_reduce ? "true" : "false") + "}\ninjections:\n  - {kind: status_rank_overflow, op: fc1/matmul, step: 2, rank: 1}\n";
}

bool ranks_agree(const TempDir& dir, const std::string& name) {
  const json r = json::parse(test::slurp(dir.path() / "o" / name / "report.json"));
  const auto& digests = r.at("loss_scaling").at("param_digests");
  EXPECT_EQ(digests.size(), 2u) << name;
  return r.at("loss_scaling").at("ranks_agree").get<bool>();
}

TEST(TensorParallel, LossScalingComparesWhatEveryRankHoldsWhole) {
  TempDir dir;
  const std::string tp = "parallel: {tensor: [\"fc*/matmul\"]}\n";
  dir.write("tp.yaml", scaled_job("tp", tp, true));
  dir.write("tp_alone.yaml", scaled_job("tp_alone", tp, false));
  dir.write("zero.yaml", scaled_job("zero", "", true));
  const test::CmdResult r = test::run("run tp.yaml tp_alone.yaml zero.yaml --no-baseline --out o", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(ranks_agree(dir, "tp"));
  EXPECT_FALSE(ranks_agree(dir, "tp_alone"));
  EXPECT_TRUE(ranks_agree(dir, "zero"));
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
