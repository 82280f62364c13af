// The PMU (spec::kRegPmuBase) against hand-computed values on small kernels: a bandwidth-bound
// copy and a compute-bound GEMM on a 4-core, 1 GHz chip whose HBM (400 B/cycle) binds before the
// cores' MTE ports (4 x 256 B/cycle). Counters are read through the register file as a driver
// would; one design per TEST.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "tests/chip_model/ai_core_test_util.h"
#include "tests/chip_model/kernel_test_util.h"
#include "chip_model/perf_monitor.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace ps = probelab::spec;
using namespace probelab::chip::testing;

namespace {

pc::ChipConfig pmu_config() {
  auto c = pc::chip_preset("tiny_coupled");
  c.num_cores = 4;
  c.clock_mhz = 1000;            // 1 cycle = 1 ns
  c.hbm_bandwidth_gbps = 400.0;  // 400 B/cycle
  c.mte_bytes_per_cycle = 256;
  c.l0a_bytes = 64 * 1024;
  c.l0b_bytes = 64 * 1024;
  c.l0c_bytes = 128 * 1024;
  c.ub_bytes = 192 * 1024;
  return c;
}

/// The whole bank: low word of each counter first (it latches the high words), then the high.
std::array<std::uint64_t, ps::kPmuCounters> read_bank(TestHost& host) {
  std::array<std::uint64_t, ps::kPmuCounters> c{};
  for (std::uint32_t i = 0; i < ps::kPmuCounters; ++i) {
    const std::uint64_t lo = host.rd(ps::pmu_reg(i));
    c[i] = lo | (std::uint64_t{host.rd(ps::pmu_reg(i) + 4)} << 32);
  }
  return c;
}

}  // namespace

TEST(PerfCounters, CopyMovesItsBytesAtHbmBandwidth) {
  const pc::ChipConfig cfg = pmu_config();
  AiCoreChip p(cfg);
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const pg::Shape s{2048, 1024};
  const auto copy = hbm.kernel(1, op_args("Identity", {hbm.put(random_f16(s, 1))}, {hbm.out(pg::DType::F16, s)}));
  std::array<std::uint64_t, ps::kPmuCounters> before{}, after{};
  spawn([&] {
    p.host.setup_stream(0);
    before = read_bank(p.host);
    p.host.submit(0, copy);
    p.host.wait_stream(0);
    after = read_bank(p.host);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const std::uint64_t bytes = 2048ull * 1024 * 2;  // FP16 tensor, read once and written once
  EXPECT_EQ(before[ps::kPmuKernelOps], 0u);
  EXPECT_EQ(after[ps::kPmuKernelOps], 1u);
  EXPECT_EQ(after[ps::kPmuHbmReadBytes], bytes);
  EXPECT_EQ(after[ps::kPmuHbmWriteBytes], bytes);
  EXPECT_EQ(after[ps::kPmuCubeBusy], 0u);
  EXPECT_EQ(after[ps::kPmuCubeFlops], 0u);
  const pc::OpRecord& r = p.core->records().at(0);
  EXPECT_EQ(after[ps::kPmuKernelCycles], r.cycles);
  EXPECT_EQ(after[ps::kPmuMteBusy], r.mte_cycles);
  EXPECT_EQ(after[ps::kPmuCycle], p.chip.cycle_now());
  // 2 x 4 MiB at 400 B/cycle = 20972 cycles; the model may be up to 10% slower, never faster.
  const double achieved = 2.0 * bytes / static_cast<double>(r.cycles);
  std::printf("copy: %llu cycles, %.1f B/cycle of 400, MTE busy %llu, HBM stall %llu\n",
              static_cast<unsigned long long>(r.cycles), achieved, static_cast<unsigned long long>(r.mte_cycles),
              static_cast<unsigned long long>(after[ps::kPmuHbmStall]));
  EXPECT_LE(achieved, 400.0 * 1.001);
  EXPECT_GE(achieved, 400.0 / 1.10);
  // HBM binds: the four MTEs are busy nearly the whole op, but their ports (1024 B/cycle together)
  // would move the bytes in 8192 cycles; the rest is stall.
  const std::uint64_t port_cycles = 2 * bytes / cfg.mte_bytes_per_cycle;  // summed over cores
  EXPECT_GE(static_cast<double>(r.mte_cycles), 0.9 * 4 * static_cast<double>(r.cycles));
  EXPECT_NEAR(static_cast<double>(after[ps::kPmuHbmStall]), static_cast<double>(r.mte_cycles - port_cycles), 4.0);
  EXPECT_GT(after[ps::kPmuHbmStall], after[ps::kPmuMteBusy] / 2);
}

TEST(PerfCounters, GemmKeepsTheCubeBusyAndCountsItsFlops) {
  const pc::ChipConfig cfg = pmu_config();
  AiCoreChip p(cfg);
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const std::int64_t n = 1024;
  const auto gemm = hbm.kernel(1, op_args("MatMul", {hbm.put(random_f16({n, n}, 1)), hbm.put(random_f16({n, n}, 2))},
                                          {hbm.out(pg::DType::F16, {n, n})}));
  std::array<std::uint64_t, ps::kPmuCounters> after{};
  spawn([&] {
    p.host.setup_stream(0);
    p.host.submit(0, gemm);
    p.host.wait_stream(0);
    after = read_bank(p.host);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const std::uint64_t flops = 2ull * n * n * n;
  EXPECT_EQ(after[ps::kPmuCubeFlops], flops);
  // 16x16x16 MACs per cycle per core: n^3 / 4096 Cube cycles of work, summed over cores.
  EXPECT_EQ(after[ps::kPmuCubeBusy], static_cast<std::uint64_t>(n * n * n / 4096));
  const pc::OpRecord& r = p.core->records().at(0);
  const double util = static_cast<double>(after[ps::kPmuCubeBusy]) / (4.0 * static_cast<double>(r.cycles));
  std::printf("gemm: %llu cycles, Cube utilization %.3f\n", static_cast<unsigned long long>(r.cycles), util);
  EXPECT_GE(util, 0.9);
  EXPECT_LE(util, 1.0);
  // Each operand and the result cross HBM at least once; the L2 may serve re-reads.
  EXPECT_GE(after[ps::kPmuHbmReadBytes] + after[ps::kPmuL2ReadBytes], 2ull * n * n * 2);
  EXPECT_EQ(after[ps::kPmuHbmWriteBytes], static_cast<std::uint64_t>(n * n * 2));
}

TEST(PerfCounters, CountOnlyWorkDoneByTheReadAndClear) {
  const pc::ChipConfig cfg = pmu_config();
  AiCoreChip p(cfg);
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const pg::Shape s{2048, 1024};
  const auto relu = hbm.kernel(1, op_args("Relu", {hbm.put(random_f16(s, 3))}, {hbm.out(pg::DType::F16, s)}));
  std::uint64_t mid_ops = 99, mid_bytes = 99, end_ops = 0, cleared_ops = 99, cleared_cycle = 0;
  spawn([&] {
    p.host.setup_stream(0);
    p.host.submit(0, relu);
    sc_core::wait(5, sc_core::SC_US);  // the op takes about 21 us
    mid_ops = p.host.rd(ps::pmu_reg(ps::kPmuKernelOps));
    mid_bytes = p.host.rd(ps::pmu_reg(ps::kPmuHbmReadBytes));
    p.host.wait_stream(0);
    end_ops = p.host.rd(ps::pmu_reg(ps::kPmuKernelOps));
    p.host.wr(ps::kRegPmuClear, 1);
    cleared_ops = p.host.rd(ps::pmu_reg(ps::kPmuKernelOps));
    cleared_cycle = p.host.rd(ps::pmu_reg(ps::kPmuCycle));
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  EXPECT_EQ(mid_ops, 0u);
  EXPECT_EQ(mid_bytes, 0u);
  EXPECT_EQ(end_ops, 1u);
  EXPECT_EQ(cleared_ops, 0u);
  EXPECT_GT(cleared_cycle, 20000u);  // the cycle counter is not cleared
}

TEST(PerfMonitor, WorkDoneByTheKernelTimeIsFoldedAndReadsSeeTheSameTotals) {
  // A long run adds work for every op; what was done by the kernel's time is folded into the
  // totals at once, so only the work in flight waits (before, every add waited for the next
  // register read: unbounded with no PMU reader). Reads see exactly what a monitor that folds
  // nothing early sees.
  pc::PerfMonitor folding, lazy;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    const std::uint64_t done = i * 10 + 25;  // each unit of work ends 25 ps after it is added
    folding.add(done, ps::kPmuKernelOps, 1, i * 10);
    lazy.add(done, ps::kPmuKernelOps, 1, 0);
    EXPECT_LE(folding.in_flight(), 3u);
  }
  EXPECT_EQ(lazy.in_flight(), 1000u);
  for (std::uint64_t t : {9990u, 9999u, 10014u, 10015u, 10024u, 20000u}) {
    const auto a = folding.at(t), b = lazy.at(t);
    EXPECT_EQ(a, b) << "at " << t;
    EXPECT_EQ(a[ps::kPmuKernelOps], std::min<std::uint64_t>(1000, (t - 25) / 10 + 1)) << "at " << t;
  }
  EXPECT_EQ(folding.in_flight(), 0u);
}
