// The packed-B cache (numerics/gemm_b_cache.cpp) never changes a result: GEMMs that repeat an
// operand (a recurrent cell's weights at every step) give the bits and flags of the same product
// by a fresh copy of it, also when its values change in place between calls (a NaN, a subnormal,
// one ulp), when the Mode changes, and when more operands rotate than the cache holds.
#include <gtest/gtest.h>

#include "numerics/detail/gemm_internal.h"
#include "tests/numerics/gemm_util.h"

namespace probelab::num::testing {
namespace {

// The product by a copy of B laid out with a leading dimension no call used before (its own
// key: packed afresh, never taken from the cache).
GemmRun fresh(const Mat& A, const Mat& B, const GemmOptions& o) {
  static std::int64_t extra = 0;
  Mat copy = B;
  copy.ld = B.ld + ++extra;
  copy.data.assign(static_cast<std::size_t>((B.trans ? B.cols : B.rows) * copy.ld), 0xFFFF);
  for (std::int64_t r = 0; r < B.rows; ++r)
    for (std::int64_t c = 0; c < B.cols; ++c) copy.at(r, c) = B.at(r, c);
  return run(A, copy, OutType::F32, o);
}

void expect_same(const GemmRun& got, const GemmRun& want, const std::string& what) {
  EXPECT_EQ(got.out, want.out) << what;
  expect_report(got.rep, want.rep, what);
}

TEST(GemmBCache, RepeatedOperandsGiveTheFreshResult) {
  for (const bool trans : {false, true}) {
    for (const Accum acc : {Accum::Fp32, Accum::Fp16Rn}) {
      const Mat A = random_mat(5, 40, InType::F16, false, 11);
      Mat B = random_mat(40, 37, InType::F16, trans, 12);
      GemmOptions o;
      o.accum = acc;
      const std::string what = std::string(trans ? "B^T " : "B ") + (acc == Accum::Fp32 ? "fp32" : "fp16rn");
      const GemmRun want = fresh(A, B, o);
      for (int i = 0; i < 4; ++i) expect_same(run(A, B, OutType::F32, o), want, what + " repeat " + std::to_string(i));
      // The same patterns in another buffer (an op's operand read afresh from memory).
      for (int i = 0; i < 3; ++i) {
        const Mat copy = B;
        expect_same(run(A, copy, OutType::F32, o), want, what + " copy " + std::to_string(i));
      }
      // Values changed in place, at the same address: one ulp, then a NaN, then a subnormal.
      B.at(17, 3) = static_cast<std::uint16_t>(B.at(17, 3) + 1);
      expect_same(run(A, B, OutType::F32, o), fresh(A, B, o), what + " one ulp");
      B.at(39, 36) = 0x7E00;
      expect_same(run(A, B, OutType::F32, o), fresh(A, B, o), what + " NaN");
      B.at(39, 36) = 0x0003;
      const GemmRun sub = run(A, B, OutType::F32, o);
      expect_same(sub, fresh(A, B, o), what + " subnormal");
      EXPECT_TRUE(sub.rep.flags.has(Flag::DenormalIn)) << what;
      // The same bytes read under another Mode: subnormal inputs flushed.
      GemmOptions ftz = o;
      ftz.mode.denormal = DenormalMode::FlushToZero;
      expect_same(run(A, B, OutType::F32, ftz), fresh(A, B, ftz), what + " flush to zero");
      expect_same(run(A, B, OutType::F32, ftz), fresh(A, B, ftz), what + " flush to zero again");
      expect_same(run(A, B, OutType::F32, o), sub, what + " back to preserve");
    }
  }
}

TEST(GemmBCache, MoreOperandsThanEntriesRotate) {
  const Mat A = random_mat(4, 24, InType::F16, false, 21);
  std::vector<Mat> Bs;
  std::vector<GemmRun> want;
  for (int i = 0; i < 11; ++i) {
    Bs.push_back(random_mat(24, 18 + i, InType::F16, i % 2 == 1, 30 + static_cast<std::uint64_t>(i)));
    want.push_back(fresh(A, Bs.back(), {}));
  }
  for (int round = 0; round < 5; ++round)
    for (std::size_t i = 0; i < Bs.size(); ++i)
      expect_same(run(A, Bs[i], OutType::F32, {}), want[i], "operand " + std::to_string(i) + " round " + std::to_string(round));
  // Two operands alternating (a GRU's gate blocks), one of them changing every time.
  Mat changing = Bs[0];
  for (int step = 0; step < 6; ++step) {
    changing.at(step, step) = static_cast<std::uint16_t>(changing.at(step, step) ^ 0x0400);
    expect_same(run(A, changing, OutType::F32, {}), fresh(A, changing, {}), "changing step " + std::to_string(step));
    expect_same(run(A, Bs[1], OutType::F32, {}), want[1], "steady step " + std::to_string(step));
  }
}

// A step of a model: twelve weights used once each (a ResNet's convolutions, a decoder block's
// projections), between them 30 operands that never come back (activations) and two that come
// back four times in a row and then never (the key/value heads grouped-query attention shares).
// From the third step on every weight is taken from the cache (the second packs it, the first
// only remembers it), the results still those of a fresh packing.
TEST(GemmBCache, AModelsWeightsArePackedOncePerRun) {
  const Mat A = random_mat(4, 32, InType::F16, false, 51);
  std::vector<Mat> weights;
  std::vector<GemmRun> want;
  for (int i = 0; i < 12; ++i) {
    weights.push_back(random_mat(32, 20 + i, InType::F16, i % 3 == 0, 60 + static_cast<std::uint64_t>(i)));
    want.push_back(fresh(A, weights.back(), {}));
  }
  std::uint64_t seed = 1000;
  for (int step = 0; step < 5; ++step) {
    const detail::BCacheStats before = detail::b_cache_stats();
    std::uint64_t weight_hits = 0;
    for (int i = 0; i < 12; ++i) {
      for (int j = 0; j < 3; ++j) {  // activations, new every time
        const Mat act = random_mat(32, 16, InType::F16, false, ++seed);
        run(A, act, OutType::F32, {});
      }
      if (i % 6 == 0) {  // a burst: the same operand four times in a row
        const Mat kv = random_mat(32, 16, InType::F16, false, ++seed);
        const GemmRun first = run(A, kv, OutType::F32, {});
        for (int r = 0; r < 3; ++r) expect_same(run(A, kv, OutType::F32, {}), first, "burst");
      }
      const std::uint64_t hits = detail::b_cache_stats().hits;
      expect_same(run(A, weights[static_cast<std::size_t>(i)], OutType::F32, {}), want[static_cast<std::size_t>(i)],
                  "weight " + std::to_string(i) + " step " + std::to_string(step));
      weight_hits += detail::b_cache_stats().hits - hits;
    }
    if (step >= 2) {
      EXPECT_EQ(weight_hits, 12u) << "step " << step;
    }
    EXPECT_GT(detail::b_cache_stats().calls, before.calls);
  }
  EXPECT_LE(detail::b_cache_stats().cached_elems, std::uint64_t{1} << 22);
}

TEST(GemmBCache, OperandsOverTheSizeLimitArePackedEveryTime) {
  // 1100 x 1000 patterns: more than an entry may hold; repeated, and changed in place.
  const Mat A = random_mat(2, 1100, InType::F16, false, 41);
  Mat B = random_mat(1100, 1000, InType::F16, false, 42, 1.0f, 0);
  const GemmRun want = fresh(A, B, {});
  for (int i = 0; i < 3; ++i) expect_same(run(A, B, OutType::F32, {}), want, "repeat " + std::to_string(i));
  B.at(700, 500) = 0x7E00;
  expect_same(run(A, B, OutType::F32, {}), fresh(A, B, {}), "NaN");
}

}  // namespace
}  // namespace probelab::num::testing
