// The cluster scenarios (scenarios/cluster/*.yaml): collectives at rank counts, communicators,
// element counts and topologies the bundled suite does not use. Each runs through the probelab
// executable with every expectation held; the values of the fault-free run are checked here
// against an evaluation of the reduction orders chip_model/collective/collective_plan.h documents,
// written independently of the chip model (FP16 additions of FP16 values are exact in binary64,
// so rounding the binary64 sum once gives the FP16 adder's result).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/npy.h"
#include "tests/sim/scenario_suite.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;
using Values = std::vector<double>;

const std::filesystem::path kDir = test::source_root() / "scenarios" / "cluster";

double f16(double v) { return graph::Tensor::from_f64({1}, std::vector<double>{v}, graph::DType::F16).to_f64().at(0); }

/// Every element of `dst` += `src` in the FP16 accumulator.
void add_f16(Values& dst, const Values& src) {
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = f16(dst[i] + src[i]);
}

/// Ring AllReduce (sum): chunk c of about count/N elements (the first count % N one larger) is
/// summed in position order c+1, c+2, ..., c (mod N).
Values ring_sum(const std::vector<Values>& x) {
  const std::size_t n = x.size(), count = x[0].size(), q = count / n, r = count % n;
  auto begin = [&](std::size_t c) { return c * q + std::min(c, r); };
  Values out(count);
  for (std::size_t c = 0; c < n; ++c)
    for (std::size_t i = begin(c); i < begin(c + 1); ++i) {
      double acc = x[(c + 1) % n][i];
      for (std::size_t k = 2; k <= n; ++k) acc = f16(acc + x[(c + k) % n][i]);
      out[i] = acc;
    }
  return out;
}

/// Binomial tree on v = (p - root) mod N: in step k, v with v mod 2^(k+1) == 2^k sends its
/// partial to v - 2^k, which adds it to its own; the root divides a mean.
Values tree(const std::vector<Values>& x, std::size_t root, bool mean) {
  const std::size_t n = x.size();
  std::vector<Values> part(n);
  for (std::size_t p = 0; p < n; ++p) part[(p + n - root) % n] = x[p];
  for (std::size_t step = 1; step < n; step *= 2)
    for (std::size_t v = step; v < n; v += 2 * step) add_f16(part[v - step], part[v]);
  if (mean)
    for (double& e : part[0]) e = f16(e / static_cast<double>(n));
  return part[0];
}

/// Direct in group order: ((x0 + x1) + x2) + ...
Values direct(const std::vector<Values>& x) {
  Values acc = x[0];
  for (std::size_t p = 1; p < x.size(); ++p) add_f16(acc, x[p]);
  return acc;
}

class ClusterScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(ClusterScenario, PassesAndNamesOnlyTheFault) {
  TempDir dir;
  const json r = test::run_scenario_report(kDir / (GetParam() + ".yaml"), dir);
  ASSERT_TRUE(r.is_object());
  ASSERT_FALSE(r["expectations"].empty());
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  for (const auto& i : r["injections"]) EXPECT_TRUE(i["fired"].get<bool>()) << i.dump();
  if (r["status"] == "hang") {  // a dead link: the messages lost were all on it, sent by its rank
    const json& inj = r["injections"].at(0).at("descriptor");
    ASSERT_EQ(inj.at("kind"), "link_down");
    ASSERT_FALSE(r["hang"]["lost"].empty());
    for (const auto& l : r["hang"]["lost"]) {
      EXPECT_EQ(l["src"], inj["src"]) << l.dump();
      EXPECT_GE(l["cycle"].get<std::uint64_t>(), inj["cycle"].get<std::uint64_t>()) << l.dump();
    }
    return;
  }
  EXPECT_EQ(r["status"], "ok");
  // A fault on one rank of one collective at one step: that rank alone diverges first, and later
  // divergences (a hierarchical all-gather carrying the rank's block) stay at that step and on
  // that rank's server. Servers: 4 chips, or 3 in the hierarchical scenario.
  if (!r["injections"].empty()) {
    const json& d = r["consistency"]["divergences"];
    ASSERT_FALSE(d.empty());
    ASSERT_EQ(d[0]["ranks"].size(), 1u) << d.dump();
    const std::uint32_t chips = GetParam() == "hierarchical_three_chip_servers" ? 3 : 4;
    const std::uint32_t server = d[0]["ranks"][0].get<std::uint32_t>() / chips;
    for (const auto& x : d) {
      EXPECT_EQ(x["step"], d[0]["step"]) << d.dump();
      for (const auto& rank : x["ranks"]) EXPECT_EQ(rank.get<std::uint32_t>() / chips, server) << d.dump();
    }
    if (GetParam() == "server_comm_one_rank_order") {
      EXPECT_EQ(d.size(), 1u) << d.dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Suite, ClusterScenario, ::testing::ValuesIn(test::yaml_stems(kDir)), test::scenario_test_name);

TEST(ClusterScenarioValues, RingTreeAndSubgroupSumsFollowTheDocumentedOrder) {
  TempDir dir;
  const json r = test::run_scenario_report(kDir / "ring_tree_fp16_uneven.yaml", dir);
  ASSERT_TRUE(r.is_object());
  const std::filesystem::path dump = dir.path() / "out" / "ring_tree_fp16_uneven" / "dump";
  auto read = [&](std::uint32_t rank, std::uint32_t step, const std::string& op) {
    const graph::Tensor t = graph::read_npy(
        (dump / ("rank" + std::to_string(rank)) / ("step" + std::to_string(step)) / (op + ".out0.npy")).string());
    EXPECT_EQ(t.dtype(), graph::DType::F16) << op;
    return t.to_f64();
  };
  constexpr std::uint32_t kRanks = 12, kChips = 4;
  for (std::uint32_t step = 0; step < 2; ++step) {
    SCOPED_TRACE(step);
    std::vector<Values> x, y;
    for (std::uint32_t rank = 0; rank < kRanks; ++rank) {
      x.push_back(read(rank, step, "xin"));
      y.push_back(read(rank, step, "yin"));
    }
    const Values ring = ring_sum(x), small = ring_sum(y), mean = tree(x, 5, true);
    // FP16 sums of 12 values near 600 round: the orders must matter for this check to mean anything.
    EXPECT_NE(ring, tree(x, 0, false));
    for (std::uint32_t rank = 0; rank < kRanks; ++rank) {
      SCOPED_TRACE(rank);
      EXPECT_EQ(read(rank, step, "ring_sum"), ring);
      EXPECT_EQ(read(rank, step, "ring_small"), small);
      EXPECT_EQ(read(rank, step, "tree_mean"), mean);
      const std::uint32_t server = rank / kChips, chip = rank % kChips;
      std::vector<Values> same_server(x.begin() + server * kChips, x.begin() + (server + 1) * kChips), peers;
      for (std::uint32_t s = 0; s < kRanks / kChips; ++s) peers.push_back(x[s * kChips + chip]);
      EXPECT_EQ(read(rank, step, "server_sum"), direct(same_server));
      EXPECT_EQ(read(rank, step, "peers_tree"), tree(peers, 1, false));
    }
  }
}

}  // namespace
}  // namespace probelab::sim
