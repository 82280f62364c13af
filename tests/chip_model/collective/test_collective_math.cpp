// Reduction math of collectives: bits, orders, accumulation dtypes, error bounds, flags.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "chip_model/collective/collective_math.h"
#include "numerics/arith.h"
#include "numerics/fp16.h"

namespace probelab::chip {
namespace {

using graph::DType;
using spec::CollectiveAlgo;
using spec::CollectiveOp;

constexpr std::uint32_t kRanks = 8;

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

/// Per-rank FP16 inputs, random in [lo, hi).
std::vector<std::vector<num::f16>> random_f16(std::uint64_t seed, std::uint64_t count, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<num::f16>> in(kRanks, std::vector<num::f16>(count));
  for (auto& r : in)
    for (auto& x : r) x = num::to_f16(uniform(rng, lo, hi)).value;
  return in;
}

template <class T>
std::vector<std::span<const std::byte>> spans(const std::vector<std::vector<T>>& in) {
  std::vector<std::span<const std::byte>> s;
  for (const auto& r : in) s.push_back(std::as_bytes(std::span<const T>(r)));
  return s;
}

std::vector<num::f16> as_f16(const std::vector<std::byte>& b) {
  std::vector<num::f16> v(b.size() / 2);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

PlanRequest request(CollectiveOp op, CollectiveAlgo algo, std::uint64_t count, DType acc,
                    DType data = DType::F16) {
  PlanRequest r;
  r.op = op;
  r.algo = algo;
  r.count = count;
  r.data_dtype = data;
  r.acc_dtype = acc;
  for (std::uint32_t i = 0; i < kRanks; ++i) r.group.push_back(static_cast<std::uint16_t>(i));
  return r;
}

/// Rank-dependent orders: rank q adds starting with contribution q, then the rest in group order.
std::vector<std::vector<std::uint32_t>> rotated_orders() {
  std::vector<std::vector<std::uint32_t>> o(kRanks);
  for (std::uint32_t q = 0; q < kRanks; ++q)
    for (std::uint32_t j = 0; j < kRanks; ++j) o[q].push_back((q + j) % kRanks);
  return o;
}

TEST(CollectiveMath, RingAndTreeGiveIdenticalBitsOnEveryRank) {
  const auto in = random_f16(1, 4096, -4.0, 4.0);
  for (auto algo : {CollectiveAlgo::Ring, CollectiveAlgo::Tree})
    for (auto acc : {DType::F16, DType::F32}) {
      const auto out = execute_plan(build_plan(request(CollectiveOp::AllReduce, algo, 4096, acc)), spans(in));
      for (std::uint32_t q = 1; q < kRanks; ++q)
        EXPECT_EQ(out.outputs[q], out.outputs[0])
            << spec::collective_algo_name(algo) << " acc " << graph::dtype_name(acc) << " rank " << q;
    }
}

TEST(CollectiveMath, DirectWithPerRankOrdersDiffersAcrossRanks) {
  const auto in = random_f16(2, 4096, -4.0, 4.0);
  auto r = request(CollectiveOp::AllReduce, CollectiveAlgo::Direct, 4096, DType::F16);
  r.direct_orders = rotated_orders();
  const auto out = execute_plan(build_plan(r), spans(in));
  int differing_ranks = 0;
  for (std::uint32_t q = 1; q < kRanks; ++q) differing_ranks += out.outputs[q] != out.outputs[0];
  EXPECT_EQ(differing_ranks, 7);
  // The same orders on every rank give the same bits again.
  r.direct_orders.clear();
  const auto same = execute_plan(build_plan(r), spans(in));
  for (std::uint32_t q = 1; q < kRanks; ++q) EXPECT_EQ(same.outputs[q], same.outputs[0]);
}

/// Independent scalar evaluation of the documented orders (not read from the plan).
num::f16 fold16(const std::vector<num::f16>& xs, const std::vector<std::uint32_t>& order) {
  num::f16 acc = xs[order[0]];
  for (std::size_t j = 1; j < order.size(); ++j) acc = num::add(acc, xs[order[j]]).value;
  return acc;
}

TEST(CollectiveMath, Fp16AccumulationFollowsTheDocumentedOrderBitForBit) {
  const std::uint64_t count = 800;  // 8 chunks of 100
  const auto in = random_f16(3, count, -100.0, 100.0);
  const auto ring = execute_plan(build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Ring, count, DType::F16)),
                                 spans(in));
  const auto tree = execute_plan(build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Tree, count, DType::F16)),
                                 spans(in));
  auto r = request(CollectiveOp::AllReduce, CollectiveAlgo::Direct, count, DType::F16);
  r.direct_orders = rotated_orders();
  const auto direct = execute_plan(build_plan(r), spans(in));
  const auto ring0 = as_f16(ring.outputs[0]), tree0 = as_f16(tree.outputs[0]), direct5 = as_f16(direct.outputs[5]);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::vector<num::f16> xs;
    for (std::uint32_t q = 0; q < kRanks; ++q) xs.push_back(in[q][i]);
    const std::uint32_t c = static_cast<std::uint32_t>(i / 100);
    std::vector<std::uint32_t> ring_order;
    for (std::uint32_t j = 1; j <= kRanks; ++j) ring_order.push_back((c + j) % kRanks);
    ASSERT_EQ(ring0[i], fold16(xs, ring_order)) << "ring element " << i;
    auto pair = [&](std::uint32_t a, std::uint32_t b) { return num::add(xs[a], xs[b]).value; };
    const num::f16 t = num::add(num::add(pair(0, 1), pair(2, 3)).value, num::add(pair(4, 5), pair(6, 7)).value).value;
    ASSERT_EQ(tree0[i], t) << "tree element " << i;
    ASSERT_EQ(direct5[i], fold16(xs, rotated_orders()[5])) << "direct element " << i;
  }
}

/// Largest |result - exact| over all elements and ranks; exact sums in long double.
double max_error(const CollectiveOutcome& out, const std::vector<std::vector<num::f16>>& in) {
  double worst = 0;
  for (const auto& o : out.outputs) {
    const auto v = as_f16(o);
    for (std::size_t i = 0; i < v.size(); ++i) {
      long double exact = 0;
      for (const auto& r : in) exact += num::to_float(r[i]);
      worst = std::max(worst, static_cast<double>(std::fabs(num::to_float(v[i]) - exact)));
    }
  }
  return worst;
}

TEST(CollectiveMath, Fp16AccumulationSwampsSmallAddendsNearOneWhereFp32DoesNot) {
  // Rank 0 holds 1.0, the others 3e-4 each: half an FP16 ulp at 1.0 is 4.9e-4, so adding the small
  // values one by one to 1.0 in FP16 loses them all; the exact sum is 1.0021.
  const std::uint64_t count = 64;
  std::vector<std::vector<num::f16>> in(kRanks, std::vector<num::f16>(count, num::to_f16(3e-4).value));
  in[0].assign(count, num::to_f16(1.0).value);
  // (Tree pairs the small addends first, ((1+a)+(a+a))+..., and stays within 1e-3 here.)
  for (auto algo : {CollectiveAlgo::Ring, CollectiveAlgo::Direct}) {
    auto r16 = request(CollectiveOp::AllReduce, algo, count, DType::F16);
    auto r32 = request(CollectiveOp::AllReduce, algo, count, DType::F32);
    r16.direct_orders = r32.direct_orders = rotated_orders();
    const double e16 = max_error(execute_plan(build_plan(r16), spans(in)), in);
    const double e32 = max_error(execute_plan(build_plan(r32), spans(in)), in);
    EXPECT_GT(e16, 1e-3) << spec::collective_algo_name(algo);
    EXPECT_LT(e32, 1e-3) << spec::collective_algo_name(algo);
    EXPECT_LE(e32, 0x1.0p-11 + 1e-9);  // one final rounding to FP16 near 1: half an ulp
  }
  // Direct with rank-dependent orders: ranks disagree by > 1e-3 in FP16, agree exactly in FP32.
  for (auto acc : {DType::F16, DType::F32}) {
    auto r = request(CollectiveOp::AllReduce, CollectiveAlgo::Direct, count, acc);
    r.direct_orders = rotated_orders();
    const auto out = execute_plan(build_plan(r), spans(in));
    double gap = 0;
    for (const auto& o : out.outputs)
      gap = std::max(gap, std::fabs(static_cast<double>(num::to_float(as_f16(o)[0])) -
                                    num::to_float(as_f16(out.outputs[0])[0])));
    if (acc == DType::F16) EXPECT_GT(gap, 1e-3);
    else EXPECT_EQ(gap, 0.0);
  }
}

TEST(CollectiveMath, ResultsStayWithinTheAccumulationErrorBound) {
  const std::uint64_t count = 2048;
  std::mt19937_64 rng(4);
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(count));
  for (auto& r : in)
    for (auto& x : r) x = static_cast<float>(uniform(rng, -1000.0, 1000.0));
  for (auto algo : {CollectiveAlgo::Ring, CollectiveAlgo::Tree, CollectiveAlgo::Direct})
    for (auto acc : {DType::F32, DType::F16}) {
      auto r = request(CollectiveOp::AllReduce, algo, count, acc, DType::F32);
      r.direct_orders = rotated_orders();
      const auto out = execute_plan(build_plan(r), spans(in));
      // Recursive summation of N terms: |err| <= gamma_{N} * sum|x| with gamma_k = k u / (1 - k u);
      // the N-th rounding covers the conversion of the inputs (FP16) or of the result.
      const double u = acc == DType::F32 ? 0x1.0p-24 : 0x1.0p-11;
      const double gamma = kRanks * u / (1 - kRanks * u);
      double worst_ratio = 0, total_err = 0;
      for (const auto& o : out.outputs) {
        std::vector<float> v(count);
        std::memcpy(v.data(), o.data(), o.size());
        for (std::uint64_t i = 0; i < count; ++i) {
          long double exact = 0, abs_sum = 0;
          for (const auto& q : in) {
            exact += q[i];
            abs_sum += std::fabs(q[i]);
          }
          const double err = static_cast<double>(std::fabs(v[i] - exact));
          worst_ratio = std::max(worst_ratio, err / (gamma * static_cast<double>(abs_sum)));
          total_err += err;
        }
      }
      EXPECT_LE(worst_ratio, 1.0) << spec::collective_algo_name(algo) << " " << graph::dtype_name(acc);
      EXPECT_GT(total_err, 0.0) << "rounding must be visible";
    }
}

TEST(CollectiveMath, Fp16AccumulationOverflowIsFlaggedOnTheRankThatAdds) {
  // 8 x 10000 = 80000 > 65504. Ring chunk c: partials 20000, ..., 60000, then 70000 overflows on
  // the 6th addition, on position c+7.
  const std::uint64_t count = 8;
  std::vector<std::vector<num::f16>> in(kRanks, std::vector<num::f16>(count, num::to_f16(10000.0).value));
  const auto plan16 = build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Ring, count, DType::F16));
  const auto out16 = execute_plan(plan16, spans(in));
  EXPECT_TRUE(out16.flags().has(num::Flag::Overflow));
  for (std::uint32_t c = 0; c < kRanks; ++c) {
    const std::uint32_t adder = (c + 7) % kRanks;
    EXPECT_TRUE(out16.reports[adder].flags.has(num::Flag::Overflow)) << "position " << adder;
    EXPECT_EQ(out16.reports[adder].first_index(num::Flag::Overflow), c) << "position " << adder;
    EXPECT_TRUE(num::is_inf(as_f16(out16.outputs[3])[c]));
  }
  // FP32 accumulation sums to 80000 exactly; the final conversion to FP16 overflows on the owner.
  const auto out32 = execute_plan(build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Ring, count, DType::F32)),
                                  spans(in));
  for (std::uint32_t c = 0; c < kRanks; ++c) EXPECT_TRUE(out32.reports[c].flags.has(num::Flag::Overflow));
  // Saturation mode delivers 65504 and still raises the flag.
  const auto sat = execute_plan(plan16, spans(in), {num::kSaturationMode});
  EXPECT_TRUE(sat.flags().has(num::Flag::Overflow));
  EXPECT_EQ(as_f16(sat.outputs[0])[0], num::kF16Max);
  // Sums that stay below 65504 raise no overflow.
  std::vector<std::vector<num::f16>> small(kRanks, std::vector<num::f16>(count, num::to_f16(8000.0).value));
  EXPECT_FALSE(execute_plan(plan16, spans(small)).flags().has(num::Flag::Overflow));
}

TEST(CollectiveMath, ReduceScatterGatherBroadcastAndMean) {
  const std::uint64_t m = 50;
  const auto in = random_f16(5, m * kRanks, -2.0, 2.0);
  const auto ar = execute_plan(build_plan(request(CollectiveOp::AllReduce, CollectiveAlgo::Ring, m * kRanks, DType::F16)),
                               spans(in));
  const auto rs = execute_plan(build_plan(request(CollectiveOp::ReduceScatter, CollectiveAlgo::Ring, m, DType::F16)),
                               spans(in));
  for (std::uint32_t q = 0; q < kRanks; ++q)
    EXPECT_TRUE(std::equal(rs.outputs[q].begin(), rs.outputs[q].end(), ar.outputs[0].begin() + q * m * 2));

  std::vector<std::vector<num::f16>> blocks(kRanks, std::vector<num::f16>(m));
  for (std::uint32_t q = 0; q < kRanks; ++q) blocks[q].assign(in[q].begin(), in[q].begin() + m);
  for (auto algo : {CollectiveAlgo::Ring, CollectiveAlgo::Tree, CollectiveAlgo::Direct}) {
    const auto ag = execute_plan(build_plan(request(CollectiveOp::AllGather, algo, m, DType::F16)), spans(blocks));
    for (std::uint32_t q = 0; q < kRanks; ++q) {
      const auto got = as_f16(ag.outputs[q]);
      for (std::uint32_t b = 0; b < kRanks; ++b)
        EXPECT_EQ(std::vector<num::f16>(got.begin() + b * m, got.begin() + (b + 1) * m), blocks[b]);
    }
    auto br = request(CollectiveOp::Broadcast, algo, m, DType::F16);
    br.root = 6;
    const auto bc = execute_plan(build_plan(br), spans(blocks));
    for (std::uint32_t q = 0; q < kRanks; ++q) EXPECT_EQ(as_f16(bc.outputs[q]), blocks[6]);
  }

  std::vector<std::vector<float>> ones(kRanks, std::vector<float>(4));
  for (std::uint32_t q = 0; q < kRanks; ++q) ones[q].assign(4, static_cast<float>(q));
  auto mean = request(CollectiveOp::AllReduce, CollectiveAlgo::Tree, 4, DType::F32, DType::F32);
  mean.reduction = spec::ReduceOp::Mean;
  const auto mo = execute_plan(build_plan(mean), spans(ones));
  float first;
  std::memcpy(&first, mo.outputs[2].data(), 4);
  EXPECT_EQ(first, 3.5f);
}

}  // namespace
}  // namespace probelab::chip
