// L1 residency of the Cube tile plan (chip_model/kernels/tiling.h): which operand a core holds,
// which loads become resident, the order a core visits its tiles, the L1 budget and the fallbacks.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <utility>

#include "chip_model/chip_config.h"
#include "chip_model/kernels/tiling.h"

namespace pc = probelab::chip;
namespace pk = probelab::chip::kernels;

namespace {

pk::CoreTimingParams params(const char* preset) {
  const pc::ChipConfig cfg = pc::chip_preset(preset);
  pk::CoreTimingParams tp;
  tp.cores = cfg.num_cores;
  tp.clock_mhz = cfg.clock_mhz;
  tp.cube_m = cfg.cube_m, tp.cube_n = cfg.cube_n, tp.cube_k = cfg.cube_k;
  tp.mte_bytes_per_cycle = cfg.mte_bytes_per_cycle;
  tp.l1_bytes = cfg.l1_bytes, tp.l0a_bytes = cfg.l0a_bytes, tp.l0b_bytes = cfg.l0b_bytes, tp.l0c_bytes = cfg.l0c_bytes;
  tp.l1_l0a_bytes_per_cycle = cfg.l1_l0a_bytes_per_cycle, tp.l1_l0b_bytes_per_cycle = cfg.l1_l0b_bytes_per_cycle;
  tp.l2_bytes = cfg.l2_bytes, tp.l2_bytes_per_cycle = cfg.l2_read_bytes_per_cycle;
  return tp;
}

pk::OpWork gemm(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count = 1) {
  pk::GemmWork g;
  g.count = count, g.m = m, g.n = n, g.k = k;
  g.a_unique_bytes = static_cast<std::uint64_t>(count * m * k * 2);
  g.b_unique_bytes = static_cast<std::uint64_t>(count * k * n * 2);
  g.a_distinct = g.b_distinct = count;
  pk::OpWork w;
  w.gemms = {g};
  w.out_bytes = static_cast<std::uint64_t>(count * m * n * 2);
  return w;
}

/// Bytes a core moves over the L2/HBM path (resident loads move none).
std::uint64_t moved(const std::vector<pk::TileStep>& steps, int operand) {
  std::uint64_t b = 0;
  for (const pk::TileStep& s : steps)
    if (!s.loads[operand].resident) b += s.loads[operand].bytes;
  return b;
}

/// No panel held: tile t on core t % cores, as before residency existed.
void expect_round_robin(const pk::TilePlan& plan) {
  EXPECT_EQ(plan.holds.at(0), pk::CubeHold::None);
  EXPECT_EQ(plan.resident_loads, 0u);
  for (std::size_t c = 0; c < plan.steps.size(); ++c)
    for (const pk::TileStep& s : plan.steps[c])
      if (s.tile_end) {
        EXPECT_EQ(static_cast<std::size_t>(s.tile) % plan.steps.size(), c);
      }
}

}  // namespace

// 6144 x 256 x 512 on B1: 48 row blocks x 2 column blocks, 4 tiles per core. Holding A would be
// reused over 2 tiles, holding B over 4: B is held, each core walks one column block down 4 rows.
TEST(TilingResidency, TallSkinnyGemmHoldsTheBPanelAndWalksDownTheColumn) {
  const pk::CoreTimingParams tp = params("ascend910b1");
  const pk::TilePlan plan = pk::plan_tiles(gemm(6144, 256, 512), tp, 24, 6144 * 256);
  ASSERT_EQ(plan.holds.size(), 1u);
  EXPECT_EQ(plan.holds[0], pk::CubeHold::B);
  const std::int64_t kt = 512 / 128;  // 128 x 128 tiles, tk 128
  for (std::size_t c = 0; c < plan.steps.size(); ++c) {
    const auto& steps = plan.steps[c];
    ASSERT_EQ(steps.size(), static_cast<std::size_t>(4 * kt)) << "core " << c;
    std::set<std::int64_t> columns;
    for (const pk::TileStep& s : steps)
      if (s.tile_end) columns.insert(s.tile % 2);
    EXPECT_EQ(columns.size(), 1u) << "core " << c << " walks one column block";
    // The B panel (512 x 128 FP16: 128 KiB) comes once; A blocks every tile.
    EXPECT_EQ(moved(steps, 1), 512u * 128 * 2) << "core " << c;
    EXPECT_EQ(moved(steps, 0), 4u * 128 * 512 * 2) << "core " << c;
  }
  EXPECT_EQ(plan.resident_loads, 24u * 3 * kt);
  // Loads run ahead no further than one run (4 tiles x 4 K steps) and within the L1 left by two panels.
  EXPECT_LE(plan.depth, 16u);
  EXPECT_LE(2 * 128 * 1024 + plan.depth * 128 * 128 * 2, tp.l1_bytes);
}

// Every global tile is planned exactly once whatever the order, with its own output tile number.
TEST(TilingResidency, ContiguousSharesCoverEveryTileOnceAndBalanceTheCores) {
  const pk::TilePlan plan = pk::plan_tiles(gemm(2000, 3000, 640, 3), params("ascend910b4"), 20, 3ull * 2000 * 3000);
  EXPECT_NE(plan.holds.at(0), pk::CubeHold::None);
  std::set<std::int64_t> seen;
  std::size_t lo = SIZE_MAX, hi = 0;
  for (const auto& steps : plan.steps) {
    std::size_t tiles = 0;
    for (const pk::TileStep& s : steps)
      if (s.tile_end) {
        EXPECT_TRUE(seen.insert(s.tile).second) << "tile " << s.tile << " planned twice";
        ++tiles;
      }
    lo = std::min(lo, tiles), hi = std::max(hi, tiles);
  }
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), plan.num_tiles);
  EXPECT_LE(hi - lo, 1u);
  // Same work, same plan.
  const pk::TilePlan again = pk::plan_tiles(gemm(2000, 3000, 640, 3), params("ascend910b4"), 20, 3ull * 2000 * 3000);
  ASSERT_EQ(again.total_steps(), plan.total_steps());
  for (std::size_t c = 0; c < plan.steps.size(); ++c)
    for (std::size_t i = 0; i < plan.steps[c].size(); ++i) {
      EXPECT_EQ(again.steps[c][i].tile, plan.steps[c][i].tile);
      EXPECT_EQ(again.steps[c][i].loads[0].resident, plan.steps[c][i].loads[0].resident);
    }
}

// K = 8192: a 128 x 8192 A panel is 2 MiB, a B panel too: nothing fits the 512 KiB L1, and the
// plan is the round robin (tile t on core t % cores) with no resident load.
TEST(TilingResidency, PanelsLargerThanTheL1FallBackToRoundRobin) {
  const pk::TilePlan plan = pk::plan_tiles(gemm(2048, 2048, 8192), params("ascend910b1"), 24, 2048ull * 2048);
  expect_round_robin(plan);
}

// 512 x 512 x 512: 16 tiles on 24 cores, no core gets two: unchanged round robin.
TEST(TilingResidency, SmallGemmKeepsTheRoundRobinPlan) {
  const pk::TilePlan plan = pk::plan_tiles(gemm(512, 512, 512), params("ascend910b1"), 24, 512ull * 512);
  expect_round_robin(plan);
}

// A port that streams both panels faster than the Cube consumes them needs no residency.
TEST(TilingResidency, AWidePortKeepsStreaming) {
  pk::CoreTimingParams tp = params("ascend910b1");
  const pk::TilePlan narrow = pk::plan_tiles(gemm(6144, 6144, 512), tp, 24, 6144ull * 6144);
  EXPECT_EQ(narrow.holds.at(0), pk::CubeHold::A);
  tp.l2_bytes_per_cycle = 256;
  const pk::TilePlan wide = pk::plan_tiles(gemm(6144, 6144, 512), tp, 24, 6144ull * 6144);
  EXPECT_EQ(wide.holds.at(0), pk::CubeHold::None);
}

// A Cube step also moves its blocks from L1 into L0A and L0B (CANN: 512 and 256 B/cycle), the
// held ones included: a 128 x 128 x 128 FP16 step moves 32 KiB into each, 64 and 128 cycles,
// under its 512 Cube cycles.
TEST(TilingResidency, StepsCarryTheirL1ToL0Moves) {
  pk::CoreTimingParams tp = params("ascend910b1");
  const pk::TilePlan plan = pk::plan_tiles(gemm(6144, 6144, 512), tp, 24, 6144ull * 6144);
  std::uint64_t resident = 0;
  for (const pk::TileStep& s : plan.steps[3]) {
    EXPECT_EQ(s.compute_cycles, 512u);
    EXPECT_EQ(s.l0_cycles, 128u);
    resident += s.loads[0].resident;
  }
  EXPECT_GT(resident, 0u);
  // 16 x 16 tiles: a step of depth tk moves 32 tk bytes into L0B, tk / 8 cycles at 256 B/cycle,
  // twice the Cube's tk / 16.
  const pk::TilePlan tiny = pk::plan_tiles(gemm(16, 16, 4096), tp, 24, 256);
  ASSERT_FALSE(tiny.steps[0].empty());
  for (const pk::TileStep& s : tiny.steps[0]) EXPECT_EQ(s.l0_cycles, 2 * s.compute_cycles);
}
