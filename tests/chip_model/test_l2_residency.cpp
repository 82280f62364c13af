// The shared L2 on a chip (l2_model = shared, the presets from CANN's files): a working set that
// stays in the L2 streams at the L2 ports' rate, one that does not comes from HBM again; stores
// stay in the L2 and are written back when evicted; the traffic is on the trace's "l2" track.
// The op-reuse model of ascend910b keeps nothing between ops. One design per TEST.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/chip_model/ai_core_test_util.h"
#include "tests/chip_model/kernel_test_util.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace ps = probelab::spec;
using namespace probelab::chip::testing;

namespace {

/// Relu(x) twice on one stream: the second op reads what the first read. Returns both records.
std::vector<pc::OpRecord> relu_twice(const pc::ChipConfig& cfg, const pg::Shape& s, pc::Trace* trace = nullptr) {
  AiCoreChip p(cfg, trace);
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const auto x = hbm.put(random_f16(s, 3));
  const auto t1 = hbm.kernel(1, op_args("Relu", {x}, {hbm.out(pg::DType::F16, s)}));
  const auto t2 = hbm.kernel(2, op_args("Relu", {x}, {hbm.out(pg::DType::F16, s)}));
  spawn([&] {
    p.host.setup_stream(0);
    p.host.submit(0, t1);
    p.host.submit(0, t2);
    p.host.wait_stream(0);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  return p.core->records();
}

double read_gbps(const pc::ChipConfig& cfg, const pc::OpRecord& r, double bytes) {
  return bytes / (static_cast<double>(r.cycles) / (cfg.clock_mhz * 1e6)) / 1e9;
}

}  // namespace

TEST(L2Residency, ResidentWorkingSetStreamsAtTheL2PortsOnAscend910b1) {
  const pc::ChipConfig cfg = pc::chip_preset("ascend910b1");
  ASSERT_EQ(cfg.l2_model, "shared");
  const pg::Shape s{2048, 2048};  // 8 MiB in, 8 MiB out: fits the 192 MiB L2
  const double bytes = 2.0 * 2048 * 2048;
  const auto rec = relu_twice(cfg, s);
  ASSERT_EQ(rec.size(), 2u);
  const double hbm_gbps = read_gbps(cfg, rec[0], bytes), l2_gbps = read_gbps(cfg, rec[1], bytes);
  std::printf("ascend910b1 Relu 8 MiB: first (HBM-resident) %.0f GB/s of input, second (L2-resident) %.0f GB/s\n",
              hbm_gbps, l2_gbps);
  EXPECT_EQ(rec[0].hbm_read_bytes, static_cast<std::uint64_t>(bytes));  // all misses
  EXPECT_EQ(rec[1].hbm_read_bytes, 0u);                                // all hits
  EXPECT_EQ(rec[1].l2_read_bytes, static_cast<std::uint64_t>(bytes));
  EXPECT_EQ(rec[1].l2_write_bytes, static_cast<std::uint64_t>(bytes));
  EXPECT_EQ(rec[1].hbm_write_bytes, 0u);  // the outputs stay in the L2 (write-back)
  // The first op reads from HBM: at most its bandwidth. The second streams from the L2 ports:
  // 48 AIV x min(110 read, 86 write) B/cycle x 1.85 GHz = 7.6 TB/s, less the pipeline's fill
  // (one tile's load) and drain over 4 tiles per Vector core.
  EXPECT_LE(hbm_gbps, cfg.hbm_bandwidth_gbps * 1.001);
  const double l2_bound = cfg.vector_cores * 86.0 * cfg.clock_mhz / 1e3;
  EXPECT_LE(l2_gbps, l2_bound * 1.001);
  EXPECT_GE(l2_gbps, l2_bound * 0.70);
  EXPECT_GT(l2_gbps, 3 * hbm_gbps);
}

TEST(L2Residency, WorkingSetLargerThanTheL2ComesFromHbmAgainAndDirtyLinesAreWrittenBack) {
  pc::ChipConfig cfg = pc::chip_preset("ascend910b1");
  cfg.l2_bytes = 4u << 20;  // 4 MiB L2, 8 MiB in + 8 MiB out per op: LRU thrashes
  const pg::Shape s{2048, 2048};
  const double bytes = 2.0 * 2048 * 2048;
  const auto rec = relu_twice(cfg, s);
  const double first = read_gbps(cfg, rec[0], bytes), second = read_gbps(cfg, rec[1], bytes);
  std::printf("ascend910b1 with a 4 MiB L2, Relu 8 MiB: first %.0f GB/s, second %.0f GB/s; written back %llu bytes\n",
              first, second, static_cast<unsigned long long>(rec[1].l2_writeback_bytes));
  EXPECT_EQ(rec[1].hbm_read_bytes, static_cast<std::uint64_t>(bytes));  // nothing of x survived
  EXPECT_LT(rec[1].l2_read_bytes, bytes / 100);  // only the rest of lines a neighbour tile fetched
  // The first op's outputs, dirty in the L2, are evicted by the second op's lines and written back.
  EXPECT_GE(rec[1].l2_writeback_bytes, static_cast<std::uint64_t>(bytes / 2));
  EXPECT_EQ(rec[1].hbm_write_bytes, rec[1].l2_writeback_bytes);
  // So the second op moves its reads and those write-backs through HBM, at its bandwidth.
  const double hbm_traffic_gbps =
      static_cast<double>(rec[1].hbm_read_bytes + rec[1].hbm_write_bytes) / (static_cast<double>(rec[1].cycles) / (cfg.clock_mhz * 1e6)) / 1e9;
  std::printf("  second op: HBM reads + write-backs at %.0f GB/s\n", hbm_traffic_gbps);
  EXPECT_LE(second, first * 1.001);
  EXPECT_LE(hbm_traffic_gbps, cfg.hbm_bandwidth_gbps * 1.001);
  EXPECT_GE(hbm_traffic_gbps, cfg.hbm_bandwidth_gbps * 0.80);
}

TEST(L2Residency, TrafficIsOnTheL2Track) {
  pc::Trace trace(true);
  const auto rec = relu_twice(pc::chip_preset("ascend910b2"), pg::Shape{512, 512}, &trace);
  std::vector<const pc::Trace::Event*> l2;
  bool resident_counter = false;
  for (const auto& e : trace.events()) {
    if (e.phase == 'X' && e.track == "l2") l2.push_back(&e);
    if (e.phase == 'C' && e.name == "l2 resident") resident_counter = true;
  }
  ASSERT_EQ(l2.size(), 2u);
  auto arg = [](const pc::Trace::Event& e, const char* k) {
    for (const auto& [name, v] : e.args)
      if (name == k) return std::get<std::uint64_t>(v);
    ADD_FAILURE() << "no arg " << k;
    return std::uint64_t{0};
  };
  EXPECT_EQ(arg(*l2[0], "miss_bytes"), 512u * 512 * 2);
  EXPECT_EQ(arg(*l2[1], "hit_bytes"), 512u * 512 * 2);
  EXPECT_EQ(arg(*l2[1], "write_bytes"), 512u * 512 * 2);
  EXPECT_TRUE(resident_counter);
  EXPECT_EQ(rec[1].hbm_read_bytes, 0u);
}

TEST(L2Residency, OpReuseModelKeepsNothingBetweenOps) {
  const pc::ChipConfig cfg = pc::chip_preset("ascend910b_coupled");
  ASSERT_EQ(cfg.l2_model, "op_reuse");
  const auto rec = relu_twice(cfg, pg::Shape{2048, 2048});
  EXPECT_EQ(rec[0].hbm_read_bytes, rec[1].hbm_read_bytes);
  EXPECT_EQ(rec[1].l2_read_bytes, 0u);
  EXPECT_EQ(rec[1].l2_write_bytes, 0u);
  EXPECT_NEAR(static_cast<double>(rec[1].cycles), static_cast<double>(rec[0].cycles), 0.02 * rec[0].cycles);
}
