// Multi-chip collectives through the stream engines, links and HBM of N simulated chips.
// One SystemC design per TEST (each runs in its own process).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <tlm_utils/simple_initiator_socket.h>

#include "chip_model/collective/collective_fabric.h"
#include "chip_model/collective/collective_math.h"
#include "numerics/fp16.h"
#include "chip_model/spec/irq.h"
#include "tests/chip_model/chip_test_util.h"

namespace pc = probelab::chip;
namespace spec = probelab::spec;
namespace graph = probelab::graph;
namespace num = probelab::num;
using namespace probelab::chip::testing;

namespace {

constexpr std::uint64_t kArgsBase = 0x200000, kInBase = 0x1000000, kOutBase = 0x8000000;

/// The PCIe side of a chip, unused here (the hosts below use the register backdoor).
struct NoBus : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<NoBus> socket{"socket"};
  explicit NoBus(sc_core::sc_module_name n) : sc_module(n) {}
};

/// N chips, their hosts and the fabric; every chip runs its tasks on stream 0.
struct Rig {
  std::vector<std::unique_ptr<NoBus>> buses;
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
      buses.push_back(std::make_unique<NoBus>(fmt::format("bus{}", r).c_str()));
      buses.back()->socket.bind(chips.back()->host_socket);
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
  const std::uint64_t out32 = kOutBase + 0x1000000;
  // FP16 data reduced in FP16, as HCCL does; then the same with FP32 partial sums on the wire.
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, kCount, graph::DType::F16,
                         kInBase, kOutBase));
  rig.collective(1, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, kCount, graph::DType::F32,
                         kInBase, out32));
  sc_core::sc_start();

  ASSERT_EQ(rig.fabric->history().size(), 2u);
  const double alpha = cfg.link_latency_ns * 1e-9, beta = 1.0 / (cfg.link_bandwidth_gbps * 1e9);
  const double s = static_cast<double>(kBytes);
  const double model16 = 2 * 7 * (alpha + s / 8 * beta);
  const double model32 = 7 * (alpha + 2 * s / 8 * beta) + 7 * (alpha + s / 8 * beta);  // FP32 reduce-scatter
  const double t16 = collective_seconds(*rig.fabric->history()[0]);
  const double t32 = collective_seconds(*rig.fabric->history()[1]);
  std::printf("ring allreduce 8 x 1 MiB fp16: simulated %.3f us, alpha-beta model %.3f us\n", t16 * 1e6, model16 * 1e6);
  std::printf("ring allreduce 8 x 1 MiB fp16 data, fp32 acc: simulated %.3f us, model %.3f us\n", t32 * 1e6,
              model32 * 1e6);
  EXPECT_NEAR(t16 / model16, 1.0, 0.10);
  EXPECT_NEAR(t32 / model32, 1.0, 0.10);

  EXPECT_EQ(ranks_differing_from_0(rig, kBytes), 0);
  const auto ref32 = rig.read(0, out32, kBytes);
  for (std::uint32_t r = 1; r < 8; ++r) EXPECT_EQ(rig.read(r, out32, kBytes), ref32) << "r" << r;
  EXPECT_NE(ref32, rig.read(0, kOutBase, kBytes));  // FP16 and FP32 accumulation differ
  // The bits are those of the reduction plan executed by the math layer.
  std::vector<std::span<const std::byte>> spans;
  for (const auto& v : in) spans.push_back(std::as_bytes(std::span(v)));
  const auto expect = pc::execute_plan(rig.fabric->history()[0]->plan, spans);
  EXPECT_EQ(rig.read(5, kOutBase, kBytes), expect.outputs[5]);
  for (std::uint32_t r = 0; r < 8; ++r) {
    EXPECT_EQ(rig.chips[r]->streams().stream(0).completed, 2u);
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

/// An injector stand-in: per-rank overrides through the collective hook.
class OrderHooks : public pc::FaultHooks {
 public:
  explicit OrderHooks(std::uint64_t seed = 42) : seed_(seed) {}
  std::uint32_t sites() const override { return pc::kFaultCollective; }
  void on_collective(const pc::FaultSite& site, pc::CollectiveOverride& o) override {
    sites_seen.push_back(site.rank);
    o.algorithm = static_cast<std::uint32_t>(spec::CollectiveAlgo::Direct);
    o.acc_dtype = graph::DType::F16;
    o.arrival_jitter_ps = 5'000'000;  // up to 5 us per incoming transfer
    o.jitter_seed = seed_;
  }
  std::vector<std::uint32_t> sites_seen;

 private:
  std::uint64_t seed_;
};

TEST(CollectiveFabric, InjectedJitterReordersDirectArrivalsAndRanksDrift) {
  const pc::ChipConfig cfg;
  OrderHooks hooks;
  Rig rig(8, cfg, pc::FabricConfig::from_chip_config(cfg, 8), &hooks);
  const std::uint64_t count = 4096;
  fill_inputs(rig, count);
  // The task asks for ring with FP32 accumulation; the hooks force direct, FP16, jitter.
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, count, graph::DType::F32,
                         kInBase, kOutBase));
  sc_core::sc_start();
  ASSERT_EQ(rig.fabric->history().size(), 1u);
  const auto& rec = *rig.fabric->history()[0];
  EXPECT_EQ(hooks.sites_seen.size(), 8u);
  EXPECT_EQ(rec.plan.algo, spec::CollectiveAlgo::Direct);
  int reordered = 0;
  for (std::uint32_t p = 0; p < 8; ++p) {
    EXPECT_EQ(rec.overridden[p], 1);
    EXPECT_EQ(rec.plan.acc_dtypes[p], graph::DType::F16);
    EXPECT_EQ(rec.plan.ranks[p].order, rec.arrival_order[p]) << "rank " << p;
    EXPECT_EQ(rec.arrival_order[p].front(), p);  // own contribution first
    std::vector<std::uint32_t> plain{p};
    for (std::uint32_t q = 0; q < 8; ++q)
      if (q != p) plain.push_back(q);
    reordered += rec.arrival_order[p] != plain;
  }
  EXPECT_GE(reordered, 4);
  EXPECT_GE(ranks_differing_from_0(rig, count * 2), 4);
  EXPECT_EQ(rec.jitter_seed, 42u);
}

TEST(CollectiveFabric, Fp16OverflowLatchesOnTheChipThatAdds) {
  // Tree over 8 chips: pairs (20000) on r0,r2,r4,r6, quads (40000) on r0,r4, then r0 adds
  // 40000 + 40000 = 80000 > 65504. Only r0's detection circuit sees the overflow.
  const pc::ChipConfig cfg;
  Rig rig(8, cfg, pc::FabricConfig::from_chip_config(cfg, 8));
  const std::uint64_t count = 256;
  for (std::uint32_t r = 0; r < 8; ++r) {
    std::vector<num::f16> v(count, num::to_f16(10000.0).value);
    v[7] = num::to_f16(1.0).value;  // this element stays finite
    rig.write(r, kInBase, v);
  }
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Tree, count, graph::DType::F16,
                         kInBase, kOutBase));
  sc_core::sc_start();
  auto& det0 = rig.chips[0]->detection();
  EXPECT_TRUE(det0.latched(spec::kExcOverflow));
  EXPECT_EQ(det0.latch(spec::kExcOverflow).hit.element, 0u);
  EXPECT_EQ(det0.latch(spec::kExcOverflow).task_id, 10u);
  EXPECT_NE(det0.latch(spec::kExcOverflow).hit.detail & spec::kExcDetailCollective, 0u);
  EXPECT_NE(det0.float_status() & spec::kFsOverflow, 0u);
  for (std::uint32_t r = 1; r < 8; ++r)
    EXPECT_FALSE(rig.chips[r]->detection().latched(spec::kExcOverflow)) << "r" << r;
  const auto out = rig.read(3, kOutBase, count * 2);
  num::f16 x0, x7;
  std::memcpy(&x0, out.data(), 2);
  std::memcpy(&x7, out.data() + 14, 2);
  EXPECT_TRUE(num::is_inf(x0));
  EXPECT_EQ(x7, num::to_f16(8.0).value);
  EXPECT_TRUE(rig.fabric->history()[0]->flags[0].has(num::Flag::Overflow));
}

TEST(CollectiveFabric, RingTopologyRoutesDirectTrafficOverSharedLinks) {
  pc::ChipConfig cfg;
  cfg.link_count = 2;  // only neighbours are connected
  const auto fc = pc::FabricConfig::from_chip_config(cfg, 8);
  ASSERT_EQ(fc.topology, pc::Topology::Ring);
  Rig rig(8, cfg, fc);
  const std::uint64_t count = 64 * 1024;
  fill_inputs(rig, count);
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Direct, count, graph::DType::F32,
                         kInBase, kOutBase),
                 [](std::uint32_t, spec::CollectiveArgs& a) {
                   a.order_mode = static_cast<std::uint8_t>(spec::OrderMode::GroupOrder);
                 });
  sc_core::sc_start();
  EXPECT_EQ(rig.fabric->route(0, 3).size(), 3u);
  EXPECT_EQ(rig.fabric->route(0, 6).size(), 2u);
  // Shortest way round, ties towards increasing ranks: each "up" link carries the transfers of
  // distance 1..4 crossing it (1+2+3+4 = 10), each "down" link those of distance 1..3 (6).
  const auto links = rig.fabric->links();
  ASSERT_EQ(links.size(), 16u);
  for (const auto* l : links) {
    const bool up = l->dst() == (l->src() + 1) % 8;
    EXPECT_EQ(l->stats().transfers, up ? 10u : 6u) << l->name();
  }
  const double serial = 10.0 * count * 2 / (cfg.link_bandwidth_gbps * 1e9);
  EXPECT_GT(collective_seconds(*rig.fabric->history()[0]), serial);
  EXPECT_EQ(ranks_differing_from_0(rig, count * 2), 0);  // the same order on every rank
}

TEST(CollectiveFabric, ReduceScatterAllGatherBroadcastDeliverTheRightBlocks) {
  const pc::ChipConfig cfg;
  Rig rig(4, cfg, pc::FabricConfig::from_chip_config(cfg, 4));
  const std::uint64_t m = 1000;
  const auto in = fill_inputs(rig, m * 4);
  const std::uint64_t rs_out = kOutBase, ag_out = kOutBase + 0x100000, bc_out = kOutBase + 0x200000;
  rig.collective(0, args(spec::CollectiveOp::ReduceScatter, spec::CollectiveAlgo::Ring, m, graph::DType::F32,
                         kInBase, rs_out));
  rig.collective(1, args(spec::CollectiveOp::AllGather, spec::CollectiveAlgo::Tree, m, graph::DType::F32,
                         kInBase, ag_out));
  auto bc = args(spec::CollectiveOp::Broadcast, spec::CollectiveAlgo::Direct, m * 4, graph::DType::F32, kInBase, bc_out);
  bc.root = 2;
  rig.collective(2, bc);
  sc_core::sc_start();
  ASSERT_EQ(rig.fabric->history().size(), 3u);
  // ReduceScatter: block r of the reduction, equal to what the plan computes.
  std::vector<std::span<const std::byte>> spans;
  for (const auto& v : in) spans.push_back(std::as_bytes(std::span(v)));
  const auto rs = pc::execute_plan(rig.fabric->history()[0]->plan, spans);
  for (std::uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(rig.read(r, rs_out, m * 2), rs.outputs[r]);
    for (std::uint32_t b = 0; b < 4; ++b) {
      const auto got = rig.read(r, ag_out + b * m * 2, m * 2);
      EXPECT_EQ(0, std::memcmp(got.data(), in[b].data(), m * 2)) << "allgather block " << b << " on r" << r;
    }
    const auto got = rig.read(r, bc_out, m * 8);
    EXPECT_EQ(0, std::memcmp(got.data(), in[2].data(), m * 8)) << "broadcast on r" << r;
    EXPECT_EQ(rig.chips[r]->streams().stream(0).completed, 3u);
  }
  // Collectives on one stream run in order: each starts after the previous one finished.
  const auto& h = rig.fabric->history();
  EXPECT_GE(*std::min_element(h[1]->arrival_ps.begin(), h[1]->arrival_ps.end()),
            *std::min_element(h[0]->finish_ps.begin(), h[0]->finish_ps.end()));
}

TEST(CollectiveFabric, RanksThatDisagreeOnTheAlgorithmFailTheRun) {
  const pc::ChipConfig cfg;
  Rig rig(2, cfg, pc::FabricConfig::from_chip_config(cfg, 2));
  fill_inputs(rig, 16);
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, 16, graph::DType::F32,
                         kInBase, kOutBase),
                 [](std::uint32_t r, spec::CollectiveArgs& a) {
                   if (r == 1) a.algorithm = static_cast<std::uint8_t>(spec::CollectiveAlgo::Tree);
                 });
  try {
    sc_core::sc_start();
    ADD_FAILURE() << "the run should fail";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("disagree on the algorithm"), std::string::npos) << e.what();
  }
}

/// Runs the jittered direct AllReduce of 8 chips in a child process (a fresh SystemC kernel) and
/// returns the record's description followed by every rank's output bytes.
std::string jittered_run(std::uint64_t seed) {
  char path[] = "/tmp/probelab_collective_XXXXXX";
  const int fd = mkstemp(path);
  close(fd);
  const int status = run_in_child([&] {
    const pc::ChipConfig cfg;
    OrderHooks hooks(seed);
    Rig rig(8, cfg, pc::FabricConfig::from_chip_config(cfg, 8), &hooks);
    fill_inputs(rig, 1024);
    rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, 1024, graph::DType::F32,
                           kInBase, kOutBase));
    sc_core::sc_start();
    std::string out = rig.fabric->history().at(0)->describe();
    for (std::uint32_t r = 0; r < 8; ++r) {
      const auto b = rig.read(r, kOutBase, 2048);
      out.append(reinterpret_cast<const char*>(b.data()), b.size());
    }
    FILE* f = std::fopen(path, "wb");
    std::fwrite(out.data(), 1, out.size(), f);
    std::fclose(f);
  });
  EXPECT_EQ(status, 0);
  std::string got;
  if (FILE* f = std::fopen(path, "rb")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) got.append(buf, n);
    std::fclose(f);
  }
  std::remove(path);
  return got;
}

TEST(CollectiveFabric, SameJitterSeedGivesSameOrdersAndBitsAnotherSeedDoesNot) {
  const std::string a = jittered_run(42), b = jittered_run(42), c = jittered_run(43);
  ASSERT_GT(a.size(), 8u * 2048u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a.find("jitter seed 42"), std::string::npos);
}

}  // namespace
