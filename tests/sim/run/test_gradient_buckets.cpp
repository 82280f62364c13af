// Gradient buckets (training.allreduce.bucket_mb, sim/scenario/gradient_buckets.h): the
// data-parallel gradients all-reduced in buckets, as DDP does, instead of one AllReduce per
// parameter. What must hold: the same gradients where the reduction order per element does not
// depend on how the tensor is cut (direct, every rank adding in group order), the cap respected,
// every parameter's "<param>/gradient/reduced" still there for probes, and the consistency check and
// the collective_order injection working on a bucket.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

// The MLP (8 parameters, 1,994 elements, FP16 on the device) data-parallel on `ranks` chips.
std::string job(int ranks, const std::string& allreduce, int steps = 3) {
  return "model: mlp\nchip: tiny\nmode: training\nranks: " + std::to_string(ranks) + "\nsteps: " + std::to_string(steps) +
         "\nseed: 5\ncheckpoints: {every: 1}\ntraining: {optimizer: {type: sgd, lr: 0.05}, allreduce: " + allreduce + "}\n";
}

json show(const TempDir& dir, const std::string& name, const std::string& body) {
  dir.write(name + ".yaml", "name: " + name + "\n" + body);
  const test::CmdResult r = test::run("show " + name + ".yaml --json", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}

json run(const TempDir& dir, const std::string& name, const std::string& body, int expect = 0) {
  dir.write(name + ".yaml", "name: " + name + "\n" + body);
  const test::CmdResult r = test::run("run " + name + ".yaml --out out --no-baseline", dir);
  EXPECT_EQ(r.code, expect) << r.out << r.err;
  return test::read_json(dir.path() / "out" / name / "report.json");
}

// Every checkpointed file of a run (rank/step/tensor -> bytes).
std::map<std::string, std::string> checkpoints(const TempDir& dir, const std::string& name) {
  std::map<std::string, std::string> out;
  const auto root = dir.path() / "out" / name / "checkpoints";
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().extension() == ".npy")
      out[std::filesystem::relative(e.path(), root).string()] = test::slurp(e.path());
  return out;
}

std::vector<json> ops_of(const json& shown) { return shown.at("snapshots").at("original").at("ops").get<std::vector<json>>(); }

TEST(GradientBuckets, DirectInGroupOrderTrainsBitForBitAsPerParameter) {
  TempDir dir;
  for (const char* acc : {"fp32", "fp16"}) {
    const std::string base = std::string("{algorithm: direct, order: group, accumulation: ") + acc;
    const std::string per = std::string("per_") + acc, bucketed = std::string("bucketed_") + acc;
    const json a = run(dir, per, job(5, base + "}"));
    const json b = run(dir, bucketed, job(5, base + ", bucket_mb: 25}"));
    const auto ca = checkpoints(dir, per), cb = checkpoints(dir, bucketed);
    ASSERT_FALSE(ca.empty());
    EXPECT_EQ(ca.size(), cb.size());
    for (const auto& [file, bytes] : ca) {
      ASSERT_TRUE(cb.count(file)) << file;
      EXPECT_TRUE(cb.at(file) == bytes) << acc << ": " << file << " differs";
    }
    EXPECT_EQ(a.at("losses"), b.at("losses")) << acc;
  }
}

TEST(GradientBuckets, OneBucketHoldsEveryGradientAndProbesStillSeeEachParameter) {
  TempDir dir;
  const json per = show(dir, "per", job(4, "{algorithm: ring}"));
  const json one = show(dir, "one", job(4, "{algorithm: ring, bucket_mb: 25}"));
  EXPECT_EQ(per.at("collectives").size(), 8u) << per.at("collectives").dump();
  ASSERT_EQ(one.at("collectives").size(), 1u) << one.at("collectives").dump();
  EXPECT_EQ(one.at("collectives")[0], "gradient_bucket0/allreduce");
  std::set<std::string> reduced;
  for (const json& t : one.at("snapshots").at("original").at("tensors")) {
    const std::string n = t.at("name");
    if (n.size() > 17 && n.ends_with("/gradient/reduced")) reduced.insert(n);
    if (n == "gradient_bucket0") {
      EXPECT_EQ(t.at("shape"), json::array({1994})) << t.dump();
    }
  }
  EXPECT_EQ(reduced.size(), 8u);
}

TEST(GradientBuckets, TheCapCutsTheGradientsIntoBucketsInBackwardOrder) {
  TempDir dir;
  // 1,200 bytes: 600 FP16 elements. fc2's weight (1,024) goes alone, the rest share buckets.
  const json shown = show(dir, "capped", job(4, "{algorithm: direct, order: group, bucket_mb: 0.00114441}"));
  const auto collectives = shown.at("collectives").get<std::vector<std::string>>();
  EXPECT_GT(collectives.size(), 2u);
  EXPECT_LT(collectives.size(), 8u);
  std::map<std::string, std::int64_t> numel;
  for (const json& t : shown.at("snapshots").at("original").at("tensors")) {
    std::int64_t n = 1;
    for (const json& d : t.at("shape")) n *= d.get<std::int64_t>();
    numel[t.at("name")] = n;
  }
  int buckets = 0;
  std::set<std::string> members;
  for (const json& op : ops_of(shown)) {
    if (op.at("type") != "Concat" || !op.at("name").get<std::string>().starts_with("gradient_bucket")) continue;
    ++buckets;
    EXPECT_LE(numel.at(op.at("outputs")[0]) * 2, 1200) << op.dump();
    for (const json& in : op.at("inputs")) members.insert(in.get<std::string>());
  }
  EXPECT_GE(buckets, 1);
  int alone = 0;
  for (const auto& c : collectives) alone += c.ends_with("/gradient/allreduce");
  EXPECT_EQ(alone + static_cast<int>(members.size()), 8) << shown.at("collectives").dump();
  // Same weights as one AllReduce per parameter.
  run(dir, "capped_run", job(4, "{algorithm: direct, order: group, bucket_mb: 0.00114441}"));
  run(dir, "per_run", job(4, "{algorithm: direct, order: group}"));
  EXPECT_EQ(checkpoints(dir, "capped_run"), checkpoints(dir, "per_run"));
}

TEST(GradientBuckets, RingBucketsAgreeOnEveryRankAndStayCloseToPerParameter) {
  TempDir dir;
  const std::string probes =
      "probes: {mode: statistics, watch_points: ['*/gradient/reduced'], consistency: {enabled: true, reference_rank: 0, "
      "mode: hash}}\nexpectations:\n  - consistency: {consistent: true}\n";
  const json a = run(dir, "ring_per", job(24, "{algorithm: ring}") + probes);
  const json b = run(dir, "ring_bucketed", job(24, "{algorithm: ring, bucket_mb: 1}") + probes);
  EXPECT_TRUE(b.value("passed", false)) << b.at("expectations").dump();
  const auto la = a.at("losses").at(0).get<std::vector<double>>(), lb = b.at("losses").at(0).get<std::vector<double>>();
  ASSERT_EQ(la.size(), lb.size());
  for (std::size_t s = 0; s < la.size(); ++s) EXPECT_NEAR(la[s], lb[s], 1e-5 * std::abs(la[s])) << "step " << s;
}

TEST(GradientBuckets, AnOrderFaultOnOneBucketIsLocalizedToIt) {
  TempDir dir;
  // Two buckets and fc2's weight alone; rank 11 adds the second bucket's contributions in a random order at step 2, in FP16.
  const std::string body = job(16, "{algorithm: direct, order: group, accumulation: fp16, bucket_mb: 0.002}", 4) +
                           "precision: {compute: fp16}\n"
                           "probes: {mode: statistics, watch_points: ['*/updated'], consistency: {enabled: true, "
                           "reference_rank: 0, mode: statistics}}\n"
                           "injections:\n  - {kind: collective_order, op: gradient_bucket1/allreduce, rank: 11, step: 2, "
                           "order: random, seed: 3}\n"
                           "expectations:\n  - consistency: {op: gradient_bucket1/allreduce, step: 2, ranks: [11], "
                           "min_divergence: 1.0e-5}\n  - diagnosis: {op: gradient_bucket1/allreduce, cause: collective_order, top: 1}\n";
  const json r = run(dir, "bucket_fault", body);
  EXPECT_TRUE(r.value("passed", false)) << r.at("expectations").dump();
}

}  // namespace
}  // namespace probelab::sim
