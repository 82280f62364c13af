// Structure of collective reduction plans: who adds what, in which order, in which step.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "chip_model/collective/collective_plan.h"

namespace probelab::chip {
namespace {

using spec::CollectiveAlgo;
using spec::CollectiveOp;

PlanRequest request(CollectiveOp op, CollectiveAlgo algo, std::uint32_t n, std::uint64_t count,
                    std::uint32_t root = 0) {
  PlanRequest r;
  r.op = op;
  r.algo = algo;
  r.count = count;
  r.root = root;
  r.data_dtype = graph::DType::F16;
  for (std::uint32_t i = 0; i < n; ++i) r.group.push_back(static_cast<std::uint16_t>(i));
  return r;
}

std::uint64_t total_elems(const CollectivePlan& p) {
  std::uint64_t e = 0;
  for (const auto& s : p.steps)
    for (const auto& t : s.transfers) e += t.elems;
  return e;
}

TEST(CollectivePlan, RingAllReduceSumsChunkAlongTheRingAndEndsOnItsOwner) {
  const auto p = build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Ring, 8, 800));
  ASSERT_EQ(p.exprs.size(), 8u);
  EXPECT_EQ(p.steps.size(), 14u);
  for (const auto& s : p.steps) EXPECT_EQ(s.transfers.size(), 8u);
  for (std::uint32_t c = 0; c < 8; ++c) {
    std::vector<std::uint32_t> want;
    for (std::uint32_t j = 1; j <= 8; ++j) want.push_back((c + j) % 8);
    EXPECT_EQ(p.exprs[c].leaf_order(), want) << "chunk " << c;
    EXPECT_EQ(p.exprs[c].final_at, c);
  }
  EXPECT_EQ(p.exprs[0].to_string(p.group), "(((((((r1+r2)+r3)+r4)+r5)+r6)+r7)+r0)");
  // Every rank's chunk c is the same expression: identical bits by construction.
  for (std::uint32_t q = 0; q < 8; ++q) {
    ASSERT_EQ(p.ranks[q].chunks.size(), 8u);
    for (std::uint32_t c = 0; c < 8; ++c) {
      EXPECT_EQ(p.ranks[q].chunks[c].expr, c);
      EXPECT_EQ(p.ranks[q].chunks[c].dst_begin, c * 100u);
    }
  }
  // 2(N-1) steps of S/N per rank.
  EXPECT_EQ(total_elems(p), 2u * 7u * 800u);
}

TEST(CollectivePlan, RingAdditionsRunOnTheRankThatReceivesThePartial) {
  const auto p = build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Ring, 4, 8));
  // Chunk 2 starts on position 3, then 0 adds, then 1, then 2.
  const auto& e = p.exprs[2];
  std::vector<std::uint32_t> at;
  for (const auto& t : e.terms)
    if (t.kind == PlanTerm::Kind::Add) at.push_back(t.position);
  EXPECT_EQ(at, (std::vector<std::uint32_t>{0, 1, 2}));
  // Step 0: position 3 sends its own part of chunk 2 to position 0 (data dtype); step 1: position
  // 0 forwards the partial sum to position 1.
  const auto& t = p.steps[0].transfers[3];
  EXPECT_EQ(t.src, 3u);
  EXPECT_EQ(t.dst, 0u);
  EXPECT_FALSE(t.partial);
  const auto& t1 = p.steps[1].transfers[0];
  EXPECT_EQ(t1.src, 0u);
  EXPECT_EQ(t1.dst, 1u);
  EXPECT_TRUE(t1.partial);
}

TEST(CollectivePlan, TreeAllReduceIsABalancedBinomialTree) {
  const auto p = build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Tree, 8, 64));
  ASSERT_EQ(p.exprs.size(), 1u);
  EXPECT_EQ(p.exprs[0].to_string(p.group), "(((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)))");
  EXPECT_EQ(p.steps.size(), 6u);  // log2(8) up, log2(8) down
  for (std::uint32_t q = 0; q < 8; ++q) EXPECT_EQ(p.ranks[q].chunks.at(0).expr, 0u);
  // Up: 4 + 2 + 1 partial transfers, down: 1 + 2 + 4.
  std::vector<std::size_t> sizes;
  for (const auto& s : p.steps) sizes.push_back(s.transfers.size());
  EXPECT_EQ(sizes, (std::vector<std::size_t>{4, 2, 1, 1, 2, 4}));
}

TEST(CollectivePlan, TreeRootIsRotated) {
  const auto p = build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Tree, 4, 4, 2));
  EXPECT_EQ(p.exprs[0].to_string(p.group), "((r2+r3)+(r0+r1))");
  EXPECT_EQ(p.exprs[0].final_at, 2u);
}

TEST(CollectivePlan, DirectUsesEachRanksOwnOrder) {
  auto r = request(CollectiveOp::AllReduce, CollectiveAlgo::Direct, 3, 10);
  r.direct_orders = {{2, 1, 0}, {}, {1, 0, 2}};
  const auto p = build_plan(r);
  ASSERT_EQ(p.exprs.size(), 3u);
  EXPECT_EQ(p.exprs[0].to_string(p.group), "((r2+r1)+r0)");
  EXPECT_EQ(p.exprs[1].to_string(p.group), "((r0+r1)+r2)");
  EXPECT_EQ(p.exprs[2].to_string(p.group), "((r1+r0)+r2)");
  EXPECT_EQ(p.ranks[0].order, (std::vector<std::uint32_t>{2, 1, 0}));
  for (std::uint32_t q = 0; q < 3; ++q) EXPECT_EQ(p.ranks[q].chunks.at(0).expr, q);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].transfers.size(), 6u);  // N-1 per rank
}

TEST(CollectivePlan, EveryReductionUsesEveryContributionOnce) {
  for (auto algo : {CollectiveAlgo::Ring, CollectiveAlgo::Tree, CollectiveAlgo::Direct})
    for (auto op : {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter})
      for (std::uint32_t n = 1; n <= 9; ++n) {
        const auto p = build_plan(request(op, algo, n, 37, n / 2));
        for (const auto& e : p.exprs) {
          auto leaves = e.leaf_order();
          std::sort(leaves.begin(), leaves.end());
          std::vector<std::uint32_t> all(n);
          std::iota(all.begin(), all.end(), 0u);
          EXPECT_EQ(leaves, all) << spec::collective_algo_name(algo) << " n=" << n;
          for (std::size_t i = 0; i < e.terms.size(); ++i)
            if (e.terms[i].kind == PlanTerm::Kind::Add) {
              EXPECT_LT(e.terms[i].lhs, i);
              EXPECT_LT(e.terms[i].rhs, i);
            }
        }
      }
}

TEST(CollectivePlan, ChunksCoverEachOutputExactly) {
  for (auto algo : {CollectiveAlgo::Ring, CollectiveAlgo::Tree, CollectiveAlgo::Direct})
    for (auto op : {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter, CollectiveOp::AllGather,
                    CollectiveOp::Broadcast})
      for (std::uint32_t n : {1u, 2u, 3u, 8u}) {
        for (std::uint64_t count : {1ull, 5ull, 64ull}) {
          const auto p = build_plan(request(op, algo, n, count, n - 1));
          for (std::uint32_t q = 0; q < n; ++q) {
            std::vector<int> hit(p.output_count(), 0);
            for (const auto& c : p.ranks[q].chunks) {
              ASSERT_LE(c.dst_begin + c.count, p.output_count());
              ASSERT_LE(c.src_begin + c.count, p.input_count());
              for (std::uint64_t i = 0; i < c.count; ++i) ++hit[c.dst_begin + i];
            }
            EXPECT_TRUE(std::all_of(hit.begin(), hit.end(), [](int h) { return h == 1; }))
                << spec::collective_op_name(op) << " " << spec::collective_algo_name(algo) << " n=" << n
                << " count=" << count << " rank " << q;
          }
        }
      }
}

TEST(CollectivePlan, StepCountsAndWireVolumeFollowTheAlgorithms) {
  const std::uint64_t s = 1024;
  const auto ring_ag = build_plan(request(CollectiveOp::AllGather, CollectiveAlgo::Ring, 8, s));
  EXPECT_EQ(ring_ag.steps.size(), 7u);
  EXPECT_EQ(total_elems(ring_ag), 8u * 7u * s);
  const auto ring_rs = build_plan(request(CollectiveOp::ReduceScatter, CollectiveAlgo::Ring, 8, s));
  EXPECT_EQ(ring_rs.steps.size(), 7u);
  EXPECT_EQ(total_elems(ring_rs), 8u * 7u * s);
  const auto ring_bc = build_plan(request(CollectiveOp::Broadcast, CollectiveAlgo::Ring, 8, s, 3));
  EXPECT_EQ(ring_bc.steps.size(), 14u);
  EXPECT_EQ(total_elems(ring_bc), 7u * s);
  const auto tree_bc = build_plan(request(CollectiveOp::Broadcast, CollectiveAlgo::Tree, 8, s, 3));
  EXPECT_EQ(tree_bc.steps.size(), 3u);
  EXPECT_EQ(total_elems(tree_bc), 7u * s);
  const auto tree_ag = build_plan(request(CollectiveOp::AllGather, CollectiveAlgo::Tree, 8, s));
  EXPECT_EQ(tree_ag.steps.size(), 6u);
  EXPECT_EQ(total_elems(tree_ag), 12u * s + 7u * 8u * s);  // (N/2) log2 N blocks up, 7 x N down
  const auto direct_ar = build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Direct, 8, s));
  EXPECT_EQ(total_elems(direct_ar), 8u * 7u * s);
}

TEST(CollectivePlan, PartialSumsTravelInTheSendersAccumulationDtype) {
  auto r = request(CollectiveOp::AllReduce, CollectiveAlgo::Ring, 4, 400);
  r.acc_dtype = graph::DType::F32;
  r.rank_acc_dtypes = {graph::DType::F32, graph::DType::F16, graph::DType::F32, graph::DType::F32};
  const auto p = build_plan(r);
  for (const auto& t : p.steps[0].transfers) EXPECT_EQ(p.wire_bytes(t), 200u);  // own contributions, F16 data
  for (const auto& t : p.steps[1].transfers)
    EXPECT_EQ(p.wire_bytes(t), 100u * (t.src == 1 ? 2u : 4u));
  for (const auto& t : p.steps.back().transfers) EXPECT_EQ(p.wire_bytes(t), 200u);  // F16 data
}

TEST(CollectivePlan, BadRequestsNameTheField) {
  auto expect_error = [](PlanRequest r, const std::string& field) {
    try {
      build_plan(r);
      ADD_FAILURE() << "no error for " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  auto r = request(CollectiveOp::AllReduce, CollectiveAlgo::Ring, 4, 16);
  auto bad = r;
  bad.group = {0, 1, 1, 2};
  expect_error(bad, "group");
  bad = r;
  bad.root = 9;
  expect_error(bad, "root");
  bad = r;
  bad.count = 0;
  expect_error(bad, "count");
  bad = r;
  bad.acc_dtype = graph::DType::I32;
  expect_error(bad, "acc_dtype");
  bad = r;
  bad.algo = CollectiveAlgo::Direct;
  bad.direct_orders = {{0, 1, 1, 3}};
  expect_error(bad, "direct_orders[0]");
}

TEST(CollectivePlan, ARanksProgramGrowsWithItsStepsNotWithTheGroup) {
  // What one rank holds to run a collective: its own steps only.
  auto steps = [](CollectiveAlgo algo, CollectiveOp op, std::uint32_t n) {
    ProgramRequest r;
    r.op = op;
    r.algo = algo;
    r.size = n;
    r.position = n / 3;
    r.count = 1u << 20;
    return build_program(r).steps.size();
  };
  for (std::uint32_t n : {8u, 64u, 1024u}) {
    // Ring: a send and a receive per step, 2(N-1) steps, one finalisation.
    EXPECT_EQ(steps(CollectiveAlgo::Ring, CollectiveOp::AllReduce, n), 4u * (n - 1) + 1);
    // Tree: at most two messages per level.
    std::uint32_t k = 0;
    while ((1u << k) < n) ++k;
    EXPECT_LE(steps(CollectiveAlgo::Tree, CollectiveOp::AllReduce, n), 2u * k + 2);
    // Direct: a send to every peer and one fold.
    EXPECT_EQ(steps(CollectiveAlgo::Direct, CollectiveOp::AllReduce, n), n);
  }
  ProgramRequest bad;
  bad.size = 4;
  bad.position = 4;
  bad.count = 1;
  EXPECT_THROW(build_program(bad), std::invalid_argument);
  bad.position = 0;
  bad.algo = CollectiveAlgo::Direct;
  bad.direct_order = {0, 1, 1, 2};
  EXPECT_THROW(build_program(bad), std::invalid_argument);
}

}  // namespace
}  // namespace probelab::chip

namespace probelab::chip {
namespace {

// The cursor the engines run (ring steps computed when reached) yields exactly the materialised
// program, step for step, for every op, algorithm, position and root, with chunks that are empty
// (count < N), single and uneven.
TEST(ProgramCursor, YieldsTheStepsOfTheBuiltProgram) {
  std::size_t programs = 0, steps = 0;
  for (auto op : {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter, CollectiveOp::AllGather, CollectiveOp::Broadcast})
    for (auto algo : {CollectiveAlgo::Ring, CollectiveAlgo::Tree, CollectiveAlgo::Direct})
      for (std::uint32_t n : {1u, 2u, 3u, 5u, 8u, 13u, 64u})
        for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{n - 1 ? n - 1 : 1}, std::uint64_t{n},
                                    std::uint64_t{n + 1}, std::uint64_t{100}, std::uint64_t{1000}})
          for (std::uint32_t root : {0u, n / 2, n - 1})
            for (std::uint32_t p = 0; p < n; ++p) {
              ProgramRequest req;
              req.op = op;
              req.algo = algo;
              req.size = n;
              req.position = p;
              req.root_pos = root;
              req.count = count;
              if (algo == CollectiveAlgo::Direct && p % 2 == 1)
                for (std::uint32_t i = n; i-- > 0;) req.direct_order.push_back(i);
              const RankProgram want = build_program(req);
              ProgramCursor cur(req);
              std::size_t i = 0;
              for (; cur.step(); cur.next(), ++i) {
                ASSERT_LT(i, want.steps.size()) << "n " << n << " position " << p << " count " << count;
                ASSERT_TRUE(*cur.step() == want.steps[i])
                    << spec::collective_op_name(op) << " " << spec::collective_algo_name(algo) << " n " << n
                    << " position " << p << " root " << root << " count " << count << " step " << i;
              }
              EXPECT_EQ(i, want.steps.size()) << "n " << n << " position " << p << " count " << count;
              EXPECT_EQ(cur.fold_order(), want.fold_order);
              cur.next();  // past the end: stays done
              EXPECT_EQ(cur.step(), nullptr);
              ++programs;
              steps += i;
            }
  EXPECT_GT(programs, 5000u);
  EXPECT_GT(steps, 100000u);
}

TEST(ProgramCursor, RejectsWhatBuildProgramRejects) {
  ProgramRequest req;
  req.size = 4;
  req.position = 4;
  req.count = 8;
  EXPECT_THROW(ProgramCursor{req}, std::invalid_argument);
  req.position = 0;
  req.count = 0;
  EXPECT_THROW(ProgramCursor{req}, std::invalid_argument);
  req.count = 8;
  req.root_pos = 9;
  EXPECT_THROW(ProgramCursor{req}, std::invalid_argument);
}

}  // namespace
}  // namespace probelab::chip
