// GEMM sweeps on the AI cores land on the roofline of the chip config:
//   time >= max(flops / peak, bytes / bandwidth), and within 10% of it away from the ridge,
// where peak = cores * cube_m * cube_n * cube_k * 2 FLOP/cycle, bandwidth = min(HBM bandwidth,
// cores * MTE port) and bytes = the GEMM's operands and result moved once (FP16).
// One design per TEST; each TEST runs its sweep as consecutive tasks of one stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "tests/chip_model/ai_core_test_util.h"
#include "tests/chip_model/kernel_test_util.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace ps = probelab::spec;
using namespace probelab::chip::testing;

namespace {

struct Shape3 {
  std::int64_t m, n, k;
};

pc::ChipConfig roofline_config() {
  auto c = pc::chip_preset("tiny_coupled");
  c.num_cores = 4;
  c.clock_mhz = 1000;             // 1 cycle = 1 ns
  c.hbm_bandwidth_gbps = 400.0;   // 400 B/cycle: the binding bandwidth
  c.mte_bytes_per_cycle = 256;    // 4 cores x 256 B/cycle > HBM
  c.l0a_bytes = 64 * 1024;
  c.l0b_bytes = 64 * 1024;
  c.l0c_bytes = 128 * 1024;
  c.ub_bytes = 192 * 1024;
  return c;
}

struct Point {
  Shape3 s;
  double roof_cycles, compute_cycles, memory_cycles, sim_cycles;
};

/// Runs the sweep in one design and returns the points in order.
std::vector<Point> run_sweep(const std::vector<Shape3>& shapes, const pc::ChipConfig& cfg = roofline_config()) {
  AiCoreChip p(cfg);
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  std::vector<ps::TaskDescriptor> tasks;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape3& s = shapes[i];
    const pg::Tensor a = random_f16({s.m, s.k}, 2 * i + 1), b = random_f16({s.k, s.n}, 2 * i + 2);
    const auto ra = hbm.put(a), rb = hbm.put(b);
    tasks.push_back(hbm.kernel(static_cast<std::uint32_t>(i + 1),
                               op_args("MatMul", {ra, rb}, {hbm.out(pg::DType::F16, {s.m, s.n})})));
  }
  spawn([&] {
    p.host.setup_stream(0);
    for (const auto& t : tasks) p.host.submit(0, t);
    p.host.wait_stream(0);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const double peak = static_cast<double>(cfg.num_cores) * cfg.cube_m * cfg.cube_n * cfg.cube_k * 2.0;
  const double bw = std::min(cfg.hbm_bandwidth_gbps * 1e9 / (cfg.clock_mhz * 1e6),
                             static_cast<double>(cfg.num_cores) * cfg.mte_bytes_per_cycle);
  std::vector<Point> pts;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape3& s = shapes[i];
    const pc::OpRecord& r = p.core->records().at(i);
    Point pt{s, 0, 2.0 * s.m * s.n * s.k / peak, 2.0 * (s.m * s.k + s.k * s.n + s.m * s.n) / bw,
            static_cast<double>(r.cycles)};
    pt.roof_cycles = std::max(pt.compute_cycles, pt.memory_cycles);
    std::printf("GEMM %5lld x %5lld x %5lld  intensity %7.1f FLOP/B  roofline %9.0f cycles  simulated %9.0f  (%.3f)\n",
                static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
                2.0 * s.m * s.n * s.k / (2.0 * (s.m * s.k + s.k * s.n + s.m * s.n)), pt.roof_cycles, pt.sim_cycles,
                pt.sim_cycles / pt.roof_cycles);
    std::printf("   cube busy/core %.0f  hbm read %llu  write %llu  l2 %llu  tiles %llu\n",
                static_cast<double>(r.cube_cycles) / r.cores, static_cast<unsigned long long>(r.hbm_read_bytes),
                static_cast<unsigned long long>(r.hbm_write_bytes), static_cast<unsigned long long>(r.l2_read_bytes),
                static_cast<unsigned long long>(r.tiles));
    pts.push_back(pt);
  }
  return pts;
}

}  // namespace

TEST(Roofline, ComputeBoundGemmsRunAtPeakWithin10Percent) {
  // Intensities 2x to 4x the ridge point (peak / bw = 82 FLOP/B).
  const auto pts = run_sweep({{1024, 1024, 1024}, {512, 1024, 2048}, {1024, 512, 768}, {768, 768, 1536}});
  for (const Point& p : pts) {
    EXPECT_GT(p.compute_cycles, 1.9 * p.memory_cycles) << "not a compute-bound shape";
    EXPECT_GE(p.sim_cycles, p.roof_cycles * 0.999) << p.s.m << "x" << p.s.n << "x" << p.s.k;
    EXPECT_LE(p.sim_cycles, p.roof_cycles * 1.10) << p.s.m << "x" << p.s.n << "x" << p.s.k;
  }
}

TEST(Roofline, BandwidthBoundGemmsRunAtHbmBandwidthWithin10Percent) {
  // Skinny GEMMs (GEMV-like): intensities 0.1x to 0.4x the ridge point.
  const auto pts = run_sweep({{16, 2048, 2048}, {32, 1024, 2048}, {16, 4096, 1024}, {16, 1024, 4096}});
  for (const Point& p : pts) {
    EXPECT_GT(p.memory_cycles, 2.5 * p.compute_cycles) << "not a bandwidth-bound shape";
    EXPECT_GE(p.sim_cycles, p.roof_cycles * 0.999) << p.s.m << "x" << p.s.n << "x" << p.s.k;
    EXPECT_LE(p.sim_cycles, p.roof_cycles * 1.10) << p.s.m << "x" << p.s.n << "x" << p.s.k;
  }
}

TEST(Roofline, SweepAcrossTheRidgeNeverBeatsTheRoofline) {
  // Near the ridge both limits add up partially; the model must never be faster than either.
  const auto pts = run_sweep({{128, 1024, 1024}, {256, 1024, 1024}, {384, 768, 1024}, {512, 512, 512}});
  for (const Point& p : pts) {
    EXPECT_GE(p.sim_cycles, p.roof_cycles * 0.999) << p.s.m << "x" << p.s.n << "x" << p.s.k;
    EXPECT_LE(p.sim_cycles, p.roof_cycles * 1.6) << p.s.m << "x" << p.s.n << "x" << p.s.k;
  }
}

TEST(Roofline, Ascend910bCoupledPresetLandsOnItsRoofline) {
  // The coupled layout: 24 cores at 1.8 GHz, 1.6 TB/s HBM, 64 B/cycle MTE ports (ridge 221 FLOP/B).
  const auto pts = run_sweep({{16, 4096, 4096}, {2048, 2048, 2048}}, pc::chip_preset("ascend910b_coupled"));
  EXPECT_GT(pts[0].memory_cycles, 2 * pts[0].compute_cycles);
  EXPECT_GT(pts[1].compute_cycles, 2 * pts[1].memory_cycles);
  for (const Point& p : pts) {
    EXPECT_GE(p.sim_cycles, p.roof_cycles * 0.999) << p.s.m << "x" << p.s.n << "x" << p.s.k;
    EXPECT_LE(p.sim_cycles, p.roof_cycles * 1.10) << p.s.m << "x" << p.s.n << "x" << p.s.k;
  }
}

TEST(Roofline, VectorOpsStreamAtHbmBandwidth) {
  const pc::ChipConfig cfg = roofline_config();
  AiCoreChip p(cfg);
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const pg::Shape s{2048, 1024};
  const pg::Tensor x = random_f16(s, 1), y = random_f16(s, 2);
  const auto add = hbm.kernel(1, op_args("Add", {hbm.put(x), hbm.put(y)}, {hbm.out(pg::DType::F16, s)}));
  const auto relu = hbm.kernel(2, op_args("Relu", {hbm.put(x)}, {hbm.out(pg::DType::F16, s)}));
  spawn([&] {
    p.host.setup_stream(0);
    p.host.submit(0, add);
    p.host.submit(0, relu);
    p.host.wait_stream(0);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const double bw = cfg.hbm_bandwidth_gbps * 1e9 / (cfg.clock_mhz * 1e6);
  const double elems = 2048.0 * 1024.0;
  const double expect[] = {3 * 2 * elems / bw, 2 * 2 * elems / bw};  // bytes read + written
  for (int i = 0; i < 2; ++i) {
    const double sim = static_cast<double>(p.core->records().at(static_cast<std::size_t>(i)).cycles);
    std::printf("%s: %.0f bytes/bandwidth cycles, simulated %.0f (%.3f)\n", i == 0 ? "Add" : "Relu", expect[i], sim,
                sim / expect[i]);
    EXPECT_GE(sim, expect[i] * 0.999);
    EXPECT_LE(sim, expect[i] * 1.10);
  }
}
