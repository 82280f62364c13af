#include <cmath>

#include <gtest/gtest.h>

#include "probes/consistency.h"

using namespace probelab;
using probes::ConsistencyOptions;
using probes::SyncSample;

namespace {

SyncSample tensor_sample(std::uint32_t rank, std::uint32_t step, std::string op, std::uint32_t order, std::vector<float> v,
                         bool is_input = false) {
  SyncSample s;
  s.rank = rank;
  s.step = step;
  s.op = std::move(op);
  s.order = order;
  s.tensor = s.op + ":0";
  s.is_input = is_input;
  s.data = graph::Tensor::from_f32({static_cast<std::int64_t>(v.size())}, v, graph::DType::F32);
  return s;
}

SyncSample hash_sample(std::uint32_t rank, std::uint32_t step, std::string op, std::uint32_t order, std::uint64_t h) {
  SyncSample s;
  s.rank = rank;
  s.step = step;
  s.op = std::move(op);
  s.order = order;
  s.tensor = s.op + ":0";
  s.hash = h;
  return s;
}

}  // namespace

TEST(Consistency, IdenticalRanksAreConsistent) {
  std::vector<SyncSample> s;
  for (std::uint32_t r = 0; r < 4; ++r)
    for (std::uint32_t step = 0; step < 3; ++step) s.push_back(tensor_sample(r, step, "allreduce", 5, {1, 2, 3}));
  auto res = probes::check_consistency(s, {});
  EXPECT_TRUE(res.checked);
  EXPECT_TRUE(res.consistent);
  EXPECT_EQ(res.ranks, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(res.comparisons, 9u);
  EXPECT_FALSE(res.first);
}

TEST(Consistency, FirstDivergenceAmountAndGrowth) {
  std::vector<SyncSample> s;
  // two collectives per step; ranks 2 and 3 drift on the second one from step 1, growing
  for (std::uint32_t step = 0; step < 4; ++step) {
    for (std::uint32_t r = 0; r < 4; ++r) {
      s.push_back(tensor_sample(r, step, "ar_fc1", 3, {1, 2}));
      float drift = (r >= 2 && step >= 1) ? 1e-3f * static_cast<float>(step * step) * static_cast<float>(r - 1) : 0.0f;
      s.push_back(tensor_sample(r, step, "ar_fc2", 7, {1.0f + drift, 2.0f}));
      // inputs of collectives differ per rank by design (data parallel): ignored by default
      s.push_back(tensor_sample(r, step, "ar_fc2", 7, {static_cast<float>(r), 0}, true));
    }
  }
  ConsistencyOptions o;
  o.tolerance = 5e-4;
  auto res = probes::check_consistency(s, o);
  EXPECT_FALSE(res.consistent);
  ASSERT_TRUE(res.first);
  EXPECT_EQ(res.first->step, 1u);
  EXPECT_EQ(res.first->op, "ar_fc2");
  EXPECT_FALSE(res.first->is_input);
  EXPECT_EQ(res.first->ranks, (std::vector<std::uint32_t>{2, 3}));
  EXPECT_NEAR(res.first->max_abs_diff, 2e-3, 1e-6);  // rank 3: 1e-3 * 1 * 2
  EXPECT_EQ(res.first->basis, "tensor");
  ASSERT_EQ(res.growth.size(), 4u);
  EXPECT_EQ(res.growth[0].second, 0.0);
  EXPECT_NEAR(res.growth[3].second, 1.8e-2, 1e-5);
  EXPECT_TRUE(res.growing);
  EXPECT_EQ(res.divergences.size(), 3u);  // steps 1, 2, 3

  // comparing inputs too makes step 0's input the first divergence
  o.compare_inputs = true;
  auto with_inputs = probes::check_consistency(s, o);
  ASSERT_TRUE(with_inputs.first);
  EXPECT_EQ(with_inputs.first->step, 0u);
  EXPECT_TRUE(with_inputs.first->is_input);
}

TEST(Consistency, HashesStatisticsReferenceRankAndMissingSamples) {
  std::vector<SyncSample> s{hash_sample(0, 0, "ar", 1, 0xAA), hash_sample(1, 0, "ar", 1, 0xAA), hash_sample(2, 0, "ar", 1, 0xAB),
                            hash_sample(0, 1, "ar", 1, 0xCC), hash_sample(2, 1, "ar", 1, 0xCC)};
  auto res = probes::check_consistency(s, {});
  ASSERT_TRUE(res.first);
  EXPECT_EQ(res.first->ranks, std::vector<std::uint32_t>{2});
  EXPECT_TRUE(std::isnan(res.first->max_abs_diff));  // bits differ, size unknown
  EXPECT_EQ(res.first->basis, "hash");
  ASSERT_EQ(res.missing.size(), 1u);
  EXPECT_NE(res.missing[0].find("rank 1 has no sample for step 1"), std::string::npos);

  // reference rank 2: ranks 0 and 1 both differ from it and agree with each other, so the
  // reference is the odd one at step 0 (it is named, not the two that agree)
  ConsistencyOptions o;
  o.reference_rank = 2;
  auto r2 = probes::check_consistency(s, o);
  EXPECT_EQ(r2.first->ranks, (std::vector<std::uint32_t>{2}));
  EXPECT_TRUE(std::isnan(r2.first->rank_diffs.at(0)));
  // ... but not when the others disagree among themselves (each is named), nor with one other
  // rank only (which of two is wrong is undecided: the other is named, as before)
  std::vector<SyncSample> split{hash_sample(0, 0, "ar", 1, 0xAA), hash_sample(1, 0, "ar", 1, 0xAB),
                                hash_sample(2, 0, "ar", 1, 0xAC)};
  EXPECT_EQ(probes::check_consistency(split, o).first->ranks, (std::vector<std::uint32_t>{0, 1}));
  std::vector<SyncSample> pair{hash_sample(0, 0, "ar", 1, 0xAA), hash_sample(2, 0, "ar", 1, 0xAB)};
  EXPECT_EQ(probes::check_consistency(pair, o).first->ranks, (std::vector<std::uint32_t>{0}));

  // statistics
  SyncSample a, b;
  a.rank = 0, b.rank = 1;
  a.op = b.op = "ar";
  spec::CaptureStats sa, sb;
  sa.count = sb.count = 4;
  sa.mean = sa.finite_mean = 1.0, sb.mean = sb.finite_mean = 1.25;
  sa.max = sb.max = sa.finite_max = sb.finite_max = 2;
  a.stats = sa;
  b.stats = sb;
  std::vector<SyncSample> st{a, b};
  auto r3 = probes::check_consistency(st, {});
  ASSERT_TRUE(r3.first);
  EXPECT_DOUBLE_EQ(r3.first->max_abs_diff, 0.25);
  EXPECT_EQ(r3.first->basis, "statistics");
  ConsistencyOptions loose;
  loose.tolerance = 0.5;
  EXPECT_TRUE(probes::check_consistency(st, loose).consistent);

  // the reference rank itself missing everywhere
  ConsistencyOptions o9;
  o9.reference_rank = 9;
  auto r4 = probes::check_consistency(s, o9);
  EXPECT_FALSE(r4.missing.empty());
  EXPECT_FALSE(r4.first);
}

TEST(Consistency, EachRankIsComparedWithItsOwnGroupsReference) {
  // Two groups of a sub-communicator: {0, 1, 2, 3} (holds the reference rank 0) and {4, 5, 6, 7}
  // (its reference is its lowest rank, 4). Rank 6 is out of line in the second group.
  std::vector<SyncSample> s;
  for (std::uint32_t r = 0; r < 8; ++r) {
    SyncSample x = hash_sample(r, 0, "ar", 1, r == 6 ? 0xBB : 0xA0 + r / 4);
    x.group = r / 4;
    s.push_back(x);
  }
  auto res = probes::check_consistency(s, {});
  ASSERT_TRUE(res.first);
  EXPECT_EQ(res.first->ranks, (std::vector<std::uint32_t>{6}));
  EXPECT_EQ(res.first->references, (std::vector<std::uint32_t>{4}));
  // The second group's reference out of line: 5, 6 and 7 agree, so rank 4 is named, as its own reference.
  s[6].hash = 0xA1;
  s[4].hash = 0xBB;
  res = probes::check_consistency(s, {});
  ASSERT_TRUE(res.first);
  EXPECT_EQ(res.first->ranks, (std::vector<std::uint32_t>{4}));
  EXPECT_EQ(res.first->references, (std::vector<std::uint32_t>{4}));
  // One rank out of line in each group: each with its group's reference.
  s[4].hash = 0xA1;
  s[2].hash = 0xCC;
  s[5].hash = 0xCC;
  res = probes::check_consistency(s, {});
  ASSERT_TRUE(res.first);
  EXPECT_EQ(res.first->ranks, (std::vector<std::uint32_t>{2, 5}));
  EXPECT_EQ(res.first->references, (std::vector<std::uint32_t>{0, 4}));
}
