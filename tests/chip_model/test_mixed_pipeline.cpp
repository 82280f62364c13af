// The tile pipeline of a mixed Cube + Vector kernel on a split chip (ai_core_pipeline.h,
// PipelineOptions::aiv_per_unit): each tile's FP32 result goes from the Cube core's fixpipe
// through a double-buffered workspace to one of its Vector cores, with cross-core flags, and the
// Vector core's epilogue of tile j runs while the Cube core computes tile j + 1. One design per TEST.
#include <gtest/gtest.h>

#include "chip_model/ai_core_pipeline.h"
#include "chip_model/hbm.h"
#include "tests/chip_model/chip_test_util.h"

namespace pc = probelab::chip;
namespace pk = probelab::chip::kernels;
using namespace probelab::chip::testing;

namespace {

constexpr std::uint64_t kCompute = 1000, kPost = 700, kHandoff = 128 * 128 * 4;

/// One Cube core, `tiles` output tiles of one Cube step each (no operand traffic), each with an
/// epilogue of kPost cycles and a 64 KiB FP32 tile to hand over.
pk::TilePlan plan(int tiles) {
  pk::TilePlan p;
  p.steps.resize(1);
  p.num_tiles = tiles;
  for (int t = 0; t < tiles; ++t) {
    pk::TileStep s;
    s.cube = true;
    s.compute_cycles = kCompute;
    s.tile_end = true;
    s.tile = t;
    s.post_cycles = kPost;
    s.handoff_bytes = kHandoff;
    p.steps[0].push_back(s);
  }
  return p;
}

pc::PipelineResult run(std::uint32_t aiv_per_unit, int tiles) {
  pc::ChipConfig cfg = pc::chip_preset("ascend910b1");
  pc::Hbm hbm("hbm", cfg);
  pc::PipelineResult r;
  spawn([&] {
    pc::PipelineOptions o;
    o.clock_mhz = 1000;
    o.mte_gbps = 32;
    o.l2_gbps = 110;
    o.l2_write_gbps = 86;
    o.aiv_per_unit = aiv_per_unit;
    o.flag_ps = 32'000;  // 32 cycles
    r = pc::run_pipeline(plan(tiles), hbm, sc_core::SC_ZERO_TIME, o);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  return r;
}

}  // namespace

TEST(MixedPipeline, EachTileIsHandedToAVectorCoreThroughTheWorkspaceWithFlags) {
  const pc::PipelineResult r = run(2, 6);
  ASSERT_EQ(r.handoffs.size(), 6u);
  ASSERT_EQ(r.aivs.size(), 2u);
  EXPECT_EQ(r.handoff_bytes, 6 * kHandoff);
  const std::uint64_t write_ps = pc::transfer_ps(kHandoff, 86), read_ps = pc::transfer_ps(kHandoff, 110);
  for (std::size_t j = 0; j < r.handoffs.size(); ++j) {
    const auto& h = r.handoffs[j];
    EXPECT_EQ(h.tile, static_cast<std::int64_t>(j));
    EXPECT_EQ(h.aiv, j % 2);                                // tiles alternate over the two AIVs
    EXPECT_EQ(h.set_ps - h.fix_start_ps, write_ps);          // fixpipe -> workspace at the L2 write port
    EXPECT_GE(h.load_start_ps, h.set_ps + 32'000);           // CrossCoreWaitFlag after the flag's latency
    EXPECT_EQ(h.load_end_ps - h.load_start_ps, read_ps);     // the AIV loads the slot at the L2 read port
    EXPECT_EQ(h.vec_end_ps - h.load_end_ps, kPost * 1000);   // then runs the epilogue
  }
  // Pipelined: the AIV's epilogue of tile j overlaps the AIC's compute of tile j + 1.
  for (std::size_t j = 0; j + 1 < r.handoffs.size(); ++j) {
    const std::uint64_t next_compute_start = r.handoffs[j + 1].fix_start_ps - kCompute * 1000;
    EXPECT_LT(next_compute_start, r.handoffs[j].vec_end_ps) << "tile " << j;
  }
  EXPECT_EQ(r.aivs[0].tiles + r.aivs[1].tiles, 6u);
  EXPECT_EQ(r.cores[0].vec_busy_ps, 0u);  // the AIC has no Vector work of its own
}

TEST(MixedPipeline, TwoVectorCoresKeepUpWithTheCubeCore) {
  // Each AIV has two Cube steps' time per tile for its load and epilogue (595 + 700 ns): the
  // AIC never waits, the last tile leaves L0C when its Cube step ends.
  const pc::PipelineResult r = run(2, 8);
  EXPECT_EQ(r.handoffs.back().fix_start_ps, 8 * kCompute * 1000);
}

TEST(MixedPipeline, OneVectorCoreFallsBehindAndTheCubeCoreWaitsForTheWorkspace) {
  // One AIV needs 595 + 700 ns per tile against 1000 ns of Cube: the workspace slots stay full,
  // the fixpipe waits for them, L0C stays full and the Cube waits for it.
  const pc::PipelineResult r = run(1, 8);
  EXPECT_GT(r.handoffs.back().fix_start_ps, 8 * kCompute * 1000 + 500 * 1000);
  for (std::size_t j = 2; j < r.handoffs.size(); ++j)
    EXPECT_GE(r.handoffs[j].fix_start_ps, r.handoffs[j - 2].load_end_ps + 32'000) << "slot of tile " << j;
}

TEST(MixedPipeline, CoupledEpilogueHasNoHandOver) {
  const pc::PipelineResult r = run(0, 8);
  EXPECT_TRUE(r.handoffs.empty());
  EXPECT_TRUE(r.aivs.empty());
  EXPECT_GT(r.cores[0].vec_busy_ps, 0u);  // the epilogue ran on the core's own Vector pipe
}
