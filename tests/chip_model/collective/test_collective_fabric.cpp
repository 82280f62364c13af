// Multi-chip collectives through the stream engines, links and HBM of N simulated chips.
// One SystemC design per TEST (each runs in its own process).
#include <functional>

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
#include "chip_model/collective/collective_plan.h"
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

  Rig(std::uint32_t n, const pc::ChipConfig& cfg, const pc::ClusterConfig& cluster = {}, pc::FaultHooks* hooks = nullptr) {
    for (std::uint32_t r = 0; r < n; ++r) {
      pc::ChipOptions o;
      o.rank = r;
      o.faults = hooks;
      chips.push_back(std::make_unique<pc::Chip>(fmt::format("chip{}", r).c_str(), cfg, o));
      hosts.push_back(std::make_unique<TestHost>(*chips.back()));
      buses.push_back(std::make_unique<NoBus>(fmt::format("bus{}", r).c_str()));
      buses.back()->socket.bind(chips.back()->host_socket);
    }
    pc::CollectiveFabric::Options fo;
    fo.keep_records = true;
    fabric = std::make_unique<pc::CollectiveFabric>("fabric", pc::ClusterTopology(cfg, cluster, n), fo);
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
  /// Every rank's record of its k-th collective.
  std::vector<pc::CollectiveRecord> records(std::size_t k) {
    std::vector<pc::CollectiveRecord> out;
    for (std::uint32_t r = 0; r < size(); ++r) out.push_back(fabric->engine(r).records().at(k));
    return out;
  }
  std::size_t completed() { return fabric->engine(0).records().size(); }

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

double collective_seconds(const std::vector<pc::CollectiveRecord>& recs) {
  std::uint64_t last_arrival = 0, last_finish = 0;
  for (const auto& r : recs) {
    last_arrival = std::max(last_arrival, r.arrival_ps);
    last_finish = std::max(last_finish, r.finish_ps);
  }
  return static_cast<double>(last_finish - last_arrival) * 1e-12;
}

/// The plan of the collective every rank of `rig` ran, as the request the engines built it from.
pc::CollectivePlan plan_of(const Rig& rig, spec::CollectiveOp op, spec::CollectiveAlgo algo, std::uint64_t count,
                           graph::DType acc, std::uint32_t root = 0) {
  pc::PlanRequest req;
  req.op = op;
  req.algo = algo;
  req.data_dtype = graph::DType::F16;
  req.acc_dtype = acc;
  req.count = count;
  req.root = root;
  for (std::uint32_t r = 0; r < rig.size(); ++r) req.group.push_back(r);
  return pc::build_plan(req);
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
  Rig rig(8, cfg);
  EXPECT_TRUE(rig.fabric->topology().hccs_mesh());
  const auto in = fill_inputs(rig, kCount);
  const std::uint64_t out32 = kOutBase + 0x1000000;
  // FP16 data reduced in FP16, as HCCL does; then the same with FP32 partial sums on the wire.
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, kCount, graph::DType::F16,
                         kInBase, kOutBase));
  rig.collective(1, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, kCount, graph::DType::F32,
                         kInBase, out32));
  sc_core::sc_start();

  ASSERT_EQ(rig.completed(), 2u);
  const double alpha = cfg.link_latency_ns * 1e-9, beta = 1.0 / (cfg.link_bandwidth_gbps * 1e9);
  const double s = static_cast<double>(kBytes);
  const double model16 = 2 * 7 * (alpha + s / 8 * beta);
  // FP32 reduce-scatter: the first step sends FP16 contributions, the next six FP32 partials.
  const double model32 = (alpha + s / 8 * beta) + 6 * (alpha + 2 * s / 8 * beta) + 7 * (alpha + s / 8 * beta);
  const double t16 = collective_seconds(rig.records(0));
  const double t32 = collective_seconds(rig.records(1));
  std::printf("ring allreduce 8 x 1 MiB fp16: simulated %.3f us, alpha-beta model %.3f us\n", t16 * 1e6, model16 * 1e6);
  std::printf("ring allreduce 8 x 1 MiB fp16 data, fp32 acc: simulated %.3f us, model %.3f us\n", t32 * 1e6,
              model32 * 1e6);
  EXPECT_NEAR(t16 / model16, 1.0, 0.10);
  EXPECT_NEAR(t32 / model32, 1.0, 0.10);

  EXPECT_EQ(ranks_differing_from_0(rig, kBytes), 0);
  const auto ref32 = rig.read(0, out32, kBytes);
  for (std::uint32_t r = 1; r < 8; ++r) EXPECT_EQ(rig.read(r, out32, kBytes), ref32) << "r" << r;
  EXPECT_NE(ref32, rig.read(0, kOutBase, kBytes));  // FP16 and FP32 accumulation differ
  // The bits are those of the reduction plan evaluated by the math layer.
  std::vector<std::span<const std::byte>> spans;
  for (const auto& v : in) spans.push_back(std::as_bytes(std::span(v)));
  const auto plan16 = plan_of(rig, spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, kCount, graph::DType::F16);
  const auto plan32 = plan_of(rig, spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, kCount, graph::DType::F32);
  EXPECT_EQ(rig.read(5, kOutBase, kBytes), pc::execute_plan(plan16, spans).outputs[5]);
  EXPECT_EQ(rig.read(2, out32, kBytes), pc::execute_plan(plan32, spans).outputs[2]);
  for (std::uint32_t r = 0; r < 8; ++r) {
    EXPECT_EQ(rig.chips[r]->streams().stream(0).completed, 2u);
    EXPECT_NE(rig.chips[r]->irq().raw() & spec::kIrqCollective, 0u);
    EXPECT_EQ(rig.records(0)[r].messages_sent, 14u);  // 2(N-1) chunks, each to the next rank
  }
}

TEST(CollectiveFabric, EightChipTreeAllReduceFollowsAlphaBetaAndAgreesBitForBit) {
  const pc::ChipConfig cfg;
  Rig rig(8, cfg);
  const auto in = fill_inputs(rig, kCount);
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Tree, kCount, graph::DType::F16,
                         kInBase, kOutBase));
  sc_core::sc_start();
  ASSERT_EQ(rig.completed(), 1u);
  const double alpha = cfg.link_latency_ns * 1e-9, beta = 1.0 / (cfg.link_bandwidth_gbps * 1e9);
  const double model = 2 * 3 * (alpha + static_cast<double>(kBytes) * beta);  // 2 log2(N) whole-buffer steps
  const double t = collective_seconds(rig.records(0));
  std::printf("tree allreduce 8 x 1 MiB: simulated %.3f us, model %.3f us\n", t * 1e6, model * 1e6);
  EXPECT_NEAR(t / model, 1.0, 0.10);
  EXPECT_EQ(ranks_differing_from_0(rig, kBytes), 0);
  std::vector<std::span<const std::byte>> spans;
  for (const auto& v : in) spans.push_back(std::as_bytes(std::span(v)));
  EXPECT_EQ(rig.read(6, kOutBase, kBytes),
            pc::execute_plan(plan_of(rig, spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Tree, kCount,
                                     graph::DType::F16),
                             spans)
                .outputs[6]);
}

TEST(CollectiveFabric, EightChipDirectWithPerRankOrdersDisagrees) {
  const pc::ChipConfig cfg;
  Rig rig(8, cfg);
  const auto in = fill_inputs(rig, kCount);
  // Rank r adds r, r+1, ..., r+7 (mod 8), in FP16: its order is data in its HBM.
  const std::uint64_t order_at = kArgsBase + 0x80000;
  for (std::uint32_t r = 0; r < 8; ++r) {
    std::vector<std::uint32_t> order;
    for (std::uint32_t j = 0; j < 8; ++j) order.push_back((r + j) % 8);
    rig.write(r, order_at, order);
  }
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Direct, kCount, graph::DType::F16,
                         kInBase, kOutBase),
                 [&](std::uint32_t, spec::CollectiveArgs& a) {
                   a.order_mode = static_cast<std::uint8_t>(spec::OrderMode::Explicit);
                   a.order_addr = order_at;
                 });
  sc_core::sc_start();
  ASSERT_EQ(rig.completed(), 1u);
  const auto recs = rig.records(0);
  EXPECT_EQ(ranks_differing_from_0(rig, kBytes), 7);
  EXPECT_EQ(recs[3].order, (std::vector<std::uint32_t>{3, 4, 5, 6, 7, 0, 1, 2}));
  // The plan built from the same orders gives the same bits.
  pc::PlanRequest req;
  req.algo = spec::CollectiveAlgo::Direct;
  req.data_dtype = graph::DType::F16;
  req.acc_dtype = graph::DType::F16;
  req.count = kCount;
  for (std::uint32_t r = 0; r < 8; ++r) {
    req.group.push_back(r);
    req.direct_orders.push_back(recs[r].order);
  }
  std::vector<std::span<const std::byte>> spans;
  for (const auto& v : in) spans.push_back(std::as_bytes(std::span(v)));
  const auto expect = pc::execute_plan(pc::build_plan(req), spans);
  for (std::uint32_t r = 0; r < 8; ++r) EXPECT_EQ(rig.read(r, kOutBase, kBytes), expect.outputs[r]) << "r" << r;
  // N-1 transfers per rank over separate links in parallel: about alpha + S/B, plus the HBM of
  // the receiver absorbing 7 streams at once.
  const double alpha = cfg.link_latency_ns * 1e-9, beta = 1.0 / (cfg.link_bandwidth_gbps * 1e9);
  const double t = collective_seconds(recs);
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
  Rig rig(8, cfg, {}, &hooks);
  const std::uint64_t count = 4096;
  fill_inputs(rig, count);
  // The task asks for ring with FP32 accumulation; the hooks force direct, FP16, jitter.
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, count, graph::DType::F32,
                         kInBase, kOutBase));
  sc_core::sc_start();
  ASSERT_EQ(rig.completed(), 1u);
  const auto recs = rig.records(0);
  EXPECT_EQ(hooks.sites_seen.size(), 8u);
  int reordered = 0;
  for (std::uint32_t p = 0; p < 8; ++p) {
    EXPECT_EQ(recs[p].algo, spec::CollectiveAlgo::Direct);
    EXPECT_TRUE(recs[p].overridden);
    EXPECT_EQ(recs[p].acc_dtype, graph::DType::F16);
    EXPECT_EQ(recs[p].order.front(), p);  // own contribution first
    std::vector<std::uint32_t> plain{p};
    for (std::uint32_t q = 0; q < 8; ++q)
      if (q != p) plain.push_back(q);
    reordered += recs[p].order != plain;
    EXPECT_EQ(recs[p].jitter_seed, 42u);
  }
  EXPECT_GE(reordered, 4);
  EXPECT_GE(ranks_differing_from_0(rig, count * 2), 4);
}

TEST(CollectiveFabric, Fp16OverflowLatchesOnTheChipThatAdds) {
  // Tree over 8 chips: pairs (20000) on r0,r2,r4,r6, quads (40000) on r0,r4, then r0 adds
  // 40000 + 40000 = 80000 > 65504. Only r0's detection circuit sees the overflow.
  const pc::ChipConfig cfg;
  Rig rig(8, cfg);
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
  EXPECT_TRUE(rig.records(0)[0].flags.has(num::Flag::Overflow));
}

TEST(CollectiveFabric, RingTopologyRoutesDirectTrafficOverSharedLinks) {
  pc::ChipConfig cfg;
  cfg.link_count = 2;  // only neighbours are connected
  Rig rig(8, cfg);
  ASSERT_FALSE(rig.fabric->topology().hccs_mesh());
  const std::uint64_t count = 64 * 1024;
  fill_inputs(rig, count);
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Direct, count, graph::DType::F32,
                         kInBase, kOutBase),
                 [](std::uint32_t, spec::CollectiveArgs& a) {
                   a.order_mode = static_cast<std::uint8_t>(spec::OrderMode::GroupOrder);
                 });
  sc_core::sc_start();
  const auto& topo = rig.fabric->topology();
  EXPECT_EQ(topo.route(0, 3).size(), 3u);
  EXPECT_EQ(topo.route(0, 6).size(), 2u);
  // Shortest way round, ties towards increasing ranks: each "up" link carries the transfers of
  // distance 1..4 crossing it (1+2+3+4 = 10), each "down" link those of distance 1..3 (6).
  ASSERT_EQ(topo.num_links(), 16u);
  for (std::size_t i = 0; i < topo.num_links(); ++i) {
    const auto& l = rig.fabric->network().link(i);
    const bool up = l.spec().to == (l.spec().from + 1) % 8;
    EXPECT_EQ(l.stats().transfers, up ? 10u : 6u) << topo.trace_track(i) << " of r" << l.spec().from;
  }
  const double serial = 10.0 * count * 2 / (cfg.link_bandwidth_gbps * 1e9);
  EXPECT_GT(collective_seconds(rig.records(0)), serial);
  EXPECT_EQ(ranks_differing_from_0(rig, count * 2), 0);  // the same order on every rank
  // Chips forward each other's messages over their own links: no processing ahead of time.
  EXPECT_EQ(rig.fabric->network().lookahead_ps(), 0u);
}

TEST(CollectiveFabric, MeshNetworkRunsAheadByTheSmallestLinkLatency) {
  pc::ChipConfig cfg;
  cfg.link_latency_ns = 700;
  pc::ClusterConfig cluster;
  cluster.switch_latency_ns = 450;
  Rig rig(16, cfg, cluster);
  ASSERT_TRUE(rig.fabric->topology().hccs_mesh());
  EXPECT_EQ(rig.fabric->network().lookahead_ps(), 450'000u);
}

TEST(CollectiveFabric, ReduceScatterAllGatherBroadcastDeliverTheRightBlocks) {
  const pc::ChipConfig cfg;
  Rig rig(4, cfg);
  const std::uint64_t m = 1000;
  const auto in = fill_inputs(rig, m * 4);
  const std::uint64_t rs_out = kOutBase, ag_out = kOutBase + 0x100000, bc_out = kOutBase + 0x200000;
  const std::uint64_t rs2_out = kOutBase + 0x300000, ag2_out = kOutBase + 0x400000;
  rig.collective(0, args(spec::CollectiveOp::ReduceScatter, spec::CollectiveAlgo::Ring, m, graph::DType::F32,
                         kInBase, rs_out));
  rig.collective(1, args(spec::CollectiveOp::AllGather, spec::CollectiveAlgo::Tree, m, graph::DType::F32,
                         kInBase, ag_out));
  auto bc = args(spec::CollectiveOp::Broadcast, spec::CollectiveAlgo::Direct, m * 4, graph::DType::F32, kInBase, bc_out);
  bc.root = 2;
  rig.collective(2, bc);
  rig.collective(3, args(spec::CollectiveOp::ReduceScatter, spec::CollectiveAlgo::Tree, m, graph::DType::F32,
                         kInBase, rs2_out));
  auto ag2 = args(spec::CollectiveOp::AllGather, spec::CollectiveAlgo::Tree, m, graph::DType::F32, kInBase, ag2_out);
  ag2.root = 3;  // the tree rooted elsewhere: gathered blocks wrap around the group
  rig.collective(4, ag2);
  sc_core::sc_start();
  ASSERT_EQ(rig.completed(), 5u);
  // ReduceScatter: block r of the reduction, equal to what the plan computes.
  std::vector<std::span<const std::byte>> spans;
  for (const auto& v : in) spans.push_back(std::as_bytes(std::span(v)));
  const auto rs = pc::execute_plan(plan_of(rig, spec::CollectiveOp::ReduceScatter, spec::CollectiveAlgo::Ring, m,
                                           graph::DType::F32), spans);
  const auto rs2 = pc::execute_plan(plan_of(rig, spec::CollectiveOp::ReduceScatter, spec::CollectiveAlgo::Tree, m,
                                            graph::DType::F32), spans);
  for (std::uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(rig.read(r, rs_out, m * 2), rs.outputs[r]);
    EXPECT_EQ(rig.read(r, rs2_out, m * 2), rs2.outputs[r]);
    for (std::uint32_t b = 0; b < 4; ++b) {
      for (std::uint64_t at : {ag_out, ag2_out}) {
        const auto got = rig.read(r, at + b * m * 2, m * 2);
        EXPECT_EQ(0, std::memcmp(got.data(), in[b].data(), m * 2)) << "allgather block " << b << " on r" << r;
      }
    }
    const auto got = rig.read(r, bc_out, m * 8);
    EXPECT_EQ(0, std::memcmp(got.data(), in[2].data(), m * 8)) << "broadcast on r" << r;
    EXPECT_EQ(rig.chips[r]->streams().stream(0).completed, 5u);
  }
  // Collectives on one stream run in order: each starts after the previous one finished.
  for (std::uint32_t r = 0; r < 4; ++r)
    EXPECT_GE(rig.records(1)[r].arrival_ps, rig.records(0)[r].finish_ps);
}

// Two ranks run one AllReduce, rank 1's arguments changed by `change`; in a child (a failed
// simulation leaves its other threads' stacks behind, never unwound): 0 when the run failed with
// an error `named` accepts, 4 for another error, 5 when it did not fail.
void all_reduce_changed_on_r1(Rig& rig, const std::function<void(spec::CollectiveArgs&)>& change) {
  fill_inputs(rig, 16);
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, 16, graph::DType::F32,
                         kInBase, kOutBase),
                 [&](std::uint32_t r, spec::CollectiveArgs& a) {
                   if (r == 1) change(a);
                 });
}

int disagreement(const std::function<void(spec::CollectiveArgs&)>& change,
                 const std::function<bool(const std::string&)>& named) {
  return run_in_child([&] {
    const pc::ChipConfig cfg;
    Rig rig(2, cfg);
    all_reduce_changed_on_r1(rig, change);
    try {
      sc_core::sc_start();  // a task's error stops the run; the chip holds it
      for (const auto& c : rig.chips)
        if (c->error()) std::rethrow_exception(c->error());
    } catch (const std::exception& e) {
      if (named(e.what())) return;
      std::fprintf(stderr, "unexpected error: %s\n", e.what());
      _exit(4);
    }
    _exit(5);  // the run should fail
  });
}

TEST(CollectiveFabric, RanksThatDisagreeOnTheAlgorithmFailTheRun) {
  const int status = disagreement([](spec::CollectiveArgs& a) { a.algorithm = static_cast<std::uint8_t>(spec::CollectiveAlgo::Tree); },
                                  [](const std::string& what) {
                                    return what.find("disagree on the collective") != std::string::npos &&
                                           what.find("ring") != std::string::npos &&
                                           what.find("forced by an injector") != std::string::npos;
                                  });
  EXPECT_EQ(status, 0);  // failed, naming the disagreement and the algorithm
}

// Ranks at different calls (one skipped a collective its peers ran) do not fail the run: each
// waits for ever for a message of its own collective, as real ranks hang until their timeout, and
// blocked() names both, what each runs and what reached it instead (r1, not the broadcast's root,
// sends nothing: r0 only waits).
TEST(CollectiveFabric, RanksAtDifferentCollectivesStayBlocked) {
  const int status = run_in_child([] {
    const pc::ChipConfig cfg;
    Rig rig(2, cfg);
    all_reduce_changed_on_r1(rig, [](spec::CollectiveArgs& a) { a.op = static_cast<std::uint8_t>(spec::CollectiveOp::Broadcast); });
    sc_core::sc_start();  // returns when nothing is left to simulate
    for (const auto& c : rig.chips)
      if (c->error()) _exit(4);
    const auto b = rig.fabric->blocked();
    const bool named = b.size() == 2 && b[0].rank == 0 && b[1].rank == 1 && b[0].waits_for == 1 &&
                       b[1].waits_for == 0 && b[0].collective.starts_with("allreduce ring") &&
                       b[1].collective.starts_with("broadcast ring") && b[0].conflict.empty() &&
                       b[1].conflict == b[0].collective && b[0].seq == 0 && b[1].seq == 0;
    if (!named)
      for (const auto& x : b)
        std::fprintf(stderr, "r%u waits for r%u in %s, got %s\n", x.rank, x.waits_for, x.collective.c_str(),
                     x.conflict.c_str());
    _exit(named ? 0 : 6);
  });
  EXPECT_EQ(status, 0);
}

TEST(CollectiveFabric, TwoServersMeetThroughTheirNicsAndOneSwitch) {
  const pc::ChipConfig cfg;
  const pc::ClusterConfig cluster;  // servers of 8, 25 GB/s RoCE NICs, one switch
  Rig rig(16, cfg, cluster);
  const auto& topo = rig.fabric->topology();
  ASSERT_EQ(topo.servers(), 2u);
  EXPECT_EQ(topo.route(3, 5).size(), 1u);    // HCCS inside the server
  EXPECT_EQ(topo.route(3, 12).size(), 2u);   // NIC, then the switch port of r12
  const std::uint64_t count = 256 * 1024;
  const auto in = fill_inputs(rig, count);
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, count, graph::DType::F32,
                         kInBase, kOutBase));
  sc_core::sc_start();
  EXPECT_EQ(ranks_differing_from_0(rig, count * 2), 0);
  std::vector<std::span<const std::byte>> spans;
  for (const auto& v : in) spans.push_back(std::as_bytes(std::span(v)));
  EXPECT_EQ(rig.read(11, kOutBase, count * 2),
            pc::execute_plan(plan_of(rig, spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, count,
                                     graph::DType::F32), spans)
                .outputs[11]);
  // The ring crosses servers at r7 -> r8 and r15 -> r0: only those NICs carry bytes, 2(N-1)
  // chunks each; the ring moves at the pace of its slowest hop, the NIC.
  std::uint64_t nic_transfers = 0;
  for (std::size_t i = 0; i < topo.num_links(); ++i) {
    const auto& l = rig.fabric->network().link(i);
    if (l.spec().kind != pc::LinkKind::NicTx) continue;
    const bool crossing = l.spec().from == 7 || l.spec().from == 15;
    EXPECT_EQ(l.stats().transfers, crossing ? 30u : 0u) << "nic of r" << l.spec().from;
    nic_transfers += l.stats().transfers;
  }
  EXPECT_EQ(nic_transfers, 60u);
  const double chunk = count * 4.0 / 16;  // FP32 partials (the first step: FP16)
  const double nic_bound = 15 * chunk / (cluster.nic_bandwidth_gbps * 1e9);
  EXPECT_GT(collective_seconds(rig.records(0)), nic_bound);
}

TEST(CollectiveFabric, ManySendersToOneChipQueueOnItsSwitchPort) {
  const pc::ChipConfig cfg;
  const pc::ClusterConfig cluster;
  Rig rig(16, cfg, cluster);
  const std::uint64_t count = 64 * 1024;
  fill_inputs(rig, count);
  // Direct all-gather: every chip sends its block to every other; each chip of server 1 takes
  // 8 blocks from server 0 through its one switch port.
  rig.collective(0, args(spec::CollectiveOp::AllGather, spec::CollectiveAlgo::Direct, count, graph::DType::F32,
                         kInBase, kOutBase));
  sc_core::sc_start();
  const auto& topo = rig.fabric->topology();
  std::uint64_t port_wait = 0;
  for (std::size_t i = 0; i < topo.num_links(); ++i) {
    const auto& l = rig.fabric->network().link(i);
    if (l.spec().kind != pc::LinkKind::SwitchPort) continue;
    EXPECT_EQ(l.stats().transfers, 8u) << "port to r" << l.spec().to;
    EXPECT_EQ(l.stats().bytes, 8 * count * 2) << "port to r" << l.spec().to;
    port_wait += l.stats().wait_ps;
  }
  EXPECT_GT(port_wait, 0u);  // the senders queued behind each other
  const double incast = 8.0 * count * 2 / (cluster.nic_bandwidth_gbps * 1e9);
  EXPECT_GT(collective_seconds(rig.records(0)), incast);
}

/// Time of a direct AllReduce between the peers of 4 servers on a fat tree, one server per leaf.
double fat_tree_seconds(double oversubscription) {
  char path[] = "/tmp/probelab_fattree_XXXXXX";
  const int fd = mkstemp(path);
  close(fd);
  const int status = run_in_child([&] {
    const pc::ChipConfig cfg;
    pc::ClusterConfig cluster;
    cluster.switch_kind = "fat_tree";
    cluster.servers_per_leaf = 1;
    cluster.spines = 2;
    cluster.oversubscription = oversubscription;
    Rig rig(32, cfg, cluster);
    fill_inputs(rig, 64 * 1024);
    rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Direct, 64 * 1024, graph::DType::F32,
                           kInBase, kOutBase),
                   [](std::uint32_t, spec::CollectiveArgs& a) { a.comm_kind = static_cast<std::uint8_t>(spec::CommKindCode::Peers); });
    sc_core::sc_start();
    EXPECT_EQ(rig.fabric->topology().route(0, 8).size(), 4u);  // NIC, leaf uplink, spine downlink, leaf port
    const double t = collective_seconds(rig.records(0));
    FILE* f = std::fopen(path, "wb");
    std::fwrite(&t, sizeof t, 1, f);
    std::fclose(f);
  });
  EXPECT_EQ(status, 0);
  double t = 0;
  if (FILE* f = std::fopen(path, "rb")) {
    EXPECT_EQ(std::fread(&t, sizeof t, 1, f), 1u);
    std::fclose(f);
  }
  std::remove(path);
  return t;
}

TEST(CollectiveFabric, OversubscribedFatTreeUplinksSlowCrossLeafTraffic) {
  const double full = fat_tree_seconds(1.0), over = fat_tree_seconds(4.0);
  std::printf("peers direct allreduce over 4 leaves: %.3f us non-blocking, %.3f us at 4:1\n", full * 1e6, over * 1e6);
  EXPECT_GT(full, 0.0);
  EXPECT_GT(over, 1.5 * full);
}

TEST(CollectiveFabric, ServerAndPeerCommunicatorsReduceTheirOwnGroups) {
  const pc::ChipConfig cfg;
  Rig rig(16, cfg);
  const std::uint64_t count = 1024;
  std::vector<std::vector<num::f16>> in;
  for (std::uint32_t r = 0; r < 16; ++r) {
    in.emplace_back(count, num::to_f16(static_cast<double>(r)).value);
    rig.write(r, kInBase, in.back());
  }
  const std::uint64_t peer_out = kOutBase + 0x100000;
  rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, count, graph::DType::F32,
                         kInBase, kOutBase),
                 [](std::uint32_t, spec::CollectiveArgs& a) { a.comm_kind = static_cast<std::uint8_t>(spec::CommKindCode::Server); });
  rig.collective(1, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Tree, count, graph::DType::F32,
                         kInBase, peer_out),
                 [](std::uint32_t, spec::CollectiveArgs& a) { a.comm_kind = static_cast<std::uint8_t>(spec::CommKindCode::Peers); });
  sc_core::sc_start();
  for (std::uint32_t r = 0; r < 16; ++r) {
    num::f16 server_sum, peer_sum;
    std::memcpy(&server_sum, rig.read(r, kOutBase + 6, 2).data(), 2);
    std::memcpy(&peer_sum, rig.read(r, peer_out + 6, 2).data(), 2);
    const double s0 = r < 8 ? 28.0 : 92.0;          // 0+..+7, 8+..+15
    const double p0 = 2.0 * (r % 8) + 8.0;          // c + (c + 8)
    EXPECT_EQ(server_sum, num::to_f16(s0).value) << "r" << r;
    EXPECT_EQ(peer_sum, num::to_f16(p0).value) << "r" << r;
    EXPECT_EQ(rig.records(0)[r].group_size, 8u);
    EXPECT_EQ(rig.records(1)[r].group_size, 2u);
  }
}

/// Runs the jittered direct AllReduce of 8 chips in a child process (a fresh SystemC kernel) and
/// returns the records' descriptions followed by every rank's output bytes.
std::string jittered_run(std::uint64_t seed) {
  char path[] = "/tmp/probelab_collective_XXXXXX";
  const int fd = mkstemp(path);
  close(fd);
  const int status = run_in_child([&] {
    const pc::ChipConfig cfg;
    OrderHooks hooks(seed);
    Rig rig(8, cfg, {}, &hooks);
    fill_inputs(rig, 1024);
    rig.collective(0, args(spec::CollectiveOp::AllReduce, spec::CollectiveAlgo::Ring, 1024, graph::DType::F32,
                           kInBase, kOutBase));
    sc_core::sc_start();
    std::string out;
    for (const auto& rec : rig.records(0)) out += rec.describe() + "\n";
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
