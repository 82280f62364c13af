// Multi-chip collectives through the stream engines, links and HBM of N simulated chips.
// One SystemC design per TEST (each runs in its own process).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "chip_model/collective_fabric.h"
#include "chip_model/collective_math.h"
#include "chip_model/numerics/fp16.h"
#include "chip_model/spec/irq.h"
#include "chip_test_util.h"

namespace pc = probelab::chip;
namespace spec = probelab::spec;
namespace graph = probelab::graph;
namespace num = probelab::num;
using namespace probelab::chip::testing;

namespace {

constexpr std::uint64_t kArgsBase = 0x200000, kInBase = 0x1000000, kOutBase = 0x8000000;

/// N chips, their hosts and the fabric; every chip runs its tasks on stream 0.
struct Rig {
  std::vector<std::unique_ptr<pc::Chip>> chips;
  std::vector<std::unique_ptr<TestHost>> hosts;
  std::unique_ptr<pc::CollectiveFabric> fabric;
  std::vector<std::vector<spec::TaskDescriptor>> tasks;

  Rig(std::uint32_t n, const pc::ChipConfig& cfg, const pc::FabricConfig& fc, pc::FaultHooks* hooks = nullptr) {
    for (std::uint32_t r = 0; r < n; ++r) {
      pc::ChipOptions o;
      o.rank = r;
      o.faults = hooks;
      chips.push_back(std::make_unique<pc::Chip>(fmt::format("chip{}", r).c_str(), cfg, o));
      hosts.push_back(std::make_unique<TestHost>(*chips.back()));
    }
    fabric = std::make_unique<pc::CollectiveFabric>("fabric", n, fc);
    for (auto& c : chips) fabric->attach(*c);
    tasks.resize(n);
    spawn([this] {
      for (std::size_t r = 0; r < chips.size(); ++r) {
        hosts[r]->setup_stream(0);
        for (const auto& t : tasks[r]) hosts[r]->submit(0, t);
      }
    });
  }
  std::uint32_t size() const { return static_cast<std::uint32_t>(chips.size()); }

  /// Queues collective `k` (args block k) on every chip; `edit(rank, args)` adjusts per rank.
  void collective(std::uint32_t k, spec::CollectiveArgs a,
                  const std::function<void(std::uint32_t, spec::CollectiveArgs&)>& edit = {}) {
    for (std::uint32_t r = 0; r < size(); ++r) {
      auto mine = a;
      if (edit) edit(r, mine);
      const std::uint64_t at = kArgsBase + k * 0x1000;
      poke(chips[r]->hbm(), at, mine);
      tasks[r].push_back(task(spec::TaskKind::Collective, 10 + k, at, sizeof(spec::CollectiveArgs)));
    }
  }
  template <class T>
  void write(std::uint32_t r, std::uint64_t addr, const std::vector<T>& v) {
    chips[r]->hbm().debug_write(addr, std::as_bytes(std::span<const T>(v)));
  }
  std::vector<std::byte> read(std::uint32_t r, std::uint64_t addr, std::size_t bytes) {
    std::vector<std::byte> b(bytes);
    chips[r]->hbm().debug_read(addr, b);
    return b;
  }
};

spec::CollectiveArgs args(spec::CollectiveOp op, spec::CollectiveAlgo algo, std::uint64_t count,
                          graph::DType acc, std::uint64_t in, std::uint64_t out) {
  spec::CollectiveArgs a;
  a.op = static_cast<std::uint8_t>(op);
  a.algorithm = static_cast<std::uint8_t>(algo);
  a.acc_dtype = static_cast<std::uint8_t>(acc);
  a.count = count;
  a.input.addr = in;
  a.output.addr = out;
  a.input.dtype = a.output.dtype = static_cast<std::uint8_t>(graph::DType::F16);
  return a;
}

std::vector<num::f16> random_f16(std::uint64_t seed, std::size_t n, double scale) {
  std::mt19937_64 rng(seed);
  std::vector<num::f16> v(n);
  for (auto& x : v) x = num::to_f16(scale * (static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2 - 1)).value;
  return v;
}

/// Random FP16 inputs on every rank at kInBase; returns them.
std::vector<std::vector<num::f16>> fill_inputs(Rig& rig, std::size_t count, double scale = 4.0) {
  std::vector<std::vector<num::f16>> in;
  for (std::uint32_t r = 0; r < rig.size(); ++r) {
    in.push_back(random_f16(100 + r, count, scale));
    rig.write(r, kInBase, in.back());
  }
  return in;
}

double collective_seconds(const pc::CollectiveRecord& rec) {
  const auto last_arrival = *std::max_element(rec.arrival_ps.begin(), rec.arrival_ps.end());
  const auto last_finish = *std::max_element(rec.finish_ps.begin(), rec.finish_ps.end());
  return static_cast<double>(last_finish - last_arrival) * 1e-12;
}

int ranks_differing_from_0(Rig& rig, std::size_t bytes) {
  const auto ref = rig.read(0, kOutBase, bytes);
  int d = 0;
  for (std::uint32_t r = 1; r < rig.size(); ++r) d += rig.read(r, kOutBase, bytes) != ref;
  return d;
}

constexpr std::uint64_t kCount = 512 * 1024;  // 1 MiB of FP16 per rank
constexpr std::size_t kBytes = kCount * 2;

TEST(CollectiveFabric, EightChipRingAllReduceFollowsAlphaBetaAndAgreesBitForBit) {
  const pc::ChipConfig cfg;  // Ascend 910B-class defaults: 56 GB/s links, 1 us latency
  Rig rig(8, cfg, pc::FabricConfig::from_chip_config(cfg, 8));
  EXPECT_EQ(rig.fabric->config().topology, pc::Topology::FullMesh);
  const auto in = fill_inputs(rig, kCount);
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, kCount, graph::DType::F32,
                         kInBase, kOutBase));
  sc_core::sc_start();

  ASSERT_EQ(rig.fabric->history().size(), 1u);
  const auto& rec = *rig.fabric->history()[0];
  const double alpha = cfg.link_latency_ns * 1e-9, beta = 1.0 / (cfg.link_bandwidth_gbps * 1e9);
  const double model = 2 * 7 * (alpha + static_cast<double>(kBytes) / 8 * beta);
  const double t = collective_seconds(rec);
  std::printf("ring allreduce 8 x 1 MiB: simulated %.3f us, alpha-beta model %.3f us\n", t * 1e6, model * 1e6);
  EXPECT_NEAR(t / model, 1.0, 0.10);

  EXPECT_EQ(ranks_differing_from_0(rig, kBytes), 0);
  // The bits are those of the reduction plan executed by the math layer.
  std::vector<std::span<const std::byte>> spans;
  for (const auto& v : in) spans.push_back(std::as_bytes(std::span(v)));
  const auto expect = pc::execute_plan(rec.plan, spans);
  EXPECT_EQ(rig.read(5, kOutBase, kBytes), expect.outputs[5]);
  for (std::uint32_t r = 0; r < 8; ++r) {
    EXPECT_EQ(rig.chips[r]->streams().stream(0).completed, 1u);
    EXPECT_NE(rig.chips[r]->irq().raw() & spec::kIrqCollective, 0u);
  }
}

TEST(CollectiveFabric, EightChipTreeAllReduceFollowsAlphaBetaAndAgreesBitForBit) {
  const pc::ChipConfig cfg;
  Rig rig(8, cfg, pc::FabricConfig::from_chip_config(cfg, 8));
  fill_inputs(rig, kCount);
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Tree, kCount, graph::DType::F16,
                         kInBase, kOutBase));
  sc_core::sc_start();
  ASSERT_EQ(rig.fabric->history().size(), 1u);
  const double alpha = cfg.link_latency_ns * 1e-9, beta = 1.0 / (cfg.link_bandwidth_gbps * 1e9);
  const double model = 2 * 3 * (alpha + static_cast<double>(kBytes) * beta);  // 2 log2(N) whole-buffer steps
  const double t = collective_seconds(*rig.fabric->history()[0]);
  std::printf("tree allreduce 8 x 1 MiB: simulated %.3f us, model %.3f us\n", t * 1e6, model * 1e6);
  EXPECT_NEAR(t / model, 1.0, 0.10);
  EXPECT_EQ(ranks_differing_from_0(rig, kBytes), 0);
}

TEST(CollectiveFabric, EightChipDirectWithPerRankOrdersDisagrees) {
  const pc::ChipConfig cfg;
  Rig rig(8, cfg, pc::FabricConfig::from_chip_config(cfg, 8));
  fill_inputs(rig, kCount);
  // Rank r adds r, r+1, ..., r+7 (mod 8), in FP16.
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Direct, kCount, graph::DType::F16,
                         kInBase, kOutBase),
                 [](std::uint32_t r, spec::CollectiveArgs& a) {
                   a.order_mode = static_cast<std::uint8_t>(spec::OrderMode::Explicit);
                   for (std::uint32_t j = 0; j < 8; ++j) a.order[j] = static_cast<std::uint16_t>((r + j) % 8);
                 });
  sc_core::sc_start();
  ASSERT_EQ(rig.fabric->history().size(), 1u);
  const auto& rec = *rig.fabric->history()[0];
  EXPECT_EQ(ranks_differing_from_0(rig, kBytes), 7);
  EXPECT_EQ(rec.plan.ranks[3].order, (std::vector<std::uint32_t>{3, 4, 5, 6, 7, 0, 1, 2}));
  // N-1 transfers per rank over separate links in parallel: about alpha + S/B, plus the HBM of
  // the receiver absorbing 7 streams at once.
  const double alpha = cfg.link_latency_ns * 1e-9, beta = 1.0 / (cfg.link_bandwidth_gbps * 1e9);
  const double t = collective_seconds(rec);
  EXPECT_GT(t, alpha + static_cast<double>(kBytes) * beta);
  EXPECT_LT(t, 1.2 * (alpha + static_cast<double>(kBytes) * beta));
}

}  // namespace
