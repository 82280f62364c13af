// Tiling of an op's work (kernel.h OpWork) into the per-core tile steps the AI core pipeline
// times. Pure arithmetic, no SystemC.
//
// Cube ops. Each GEMM of a batch is cut into output tiles tm x tn (the FP32 accumulators of one
// tile fill at most half of L0C, so the next tile computes while the previous one drains) and
// each output tile into K steps of tk (an A block tm x tk fills at most half of L0A, a B block
// tk x tn half of L0B: double buffering). One step = MTE loads of its A and B blocks, then
// ceil(tm/cube_m) * ceil(tn/cube_n) * ceil(tk/cube_k) Cube cycles (FP32 operands: twice that),
// or the L1 -> L0A / L0B moves of the blocks if they take longer (TileStep::l0_cycles).
// The MTE stages operands in L1, so a core's loads may run up to `depth` steps ahead of its
// Cube (depth = L1 bytes / bytes of one step, between 2 and 16; 2 is plain double buffering),
// which hides the HBM latency and first-touch misses behind compute.
// After a tile's last step, the Vector unit runs the tile's share of the epilogue (and of the
// in-kernel statistics pass, OpWork::stats_bytes), and the MTE
// stores the tile's share of the op's output bytes. Tile sizes (multiples of 16) are chosen to
// minimise an estimate of the makespan over the cores: waves of tiles x max(Cube cycles, load
// cycles), loads at the L2 port rate except the first-touch share at the HBM port rate; this
// keeps all cores busy on skinny GEMMs and the Cube fed on big ones.
//
// Vector ops stream: the op's bytes are cut into tiles of at most half the UB (double buffering),
// at least one per core when the op is big enough (>= 4 KiB per tile), rounded up to a multiple
// of the core count; each tile loads and stores its share of the op's bytes and spends its share
// of the Vector cycles (elements * passes * 4 bytes / vector_bytes_per_cycle); the in-kernel
// statistics pass, if any, follows as the tile's epilogue.
//
// Distribution without L1 residency: global tile t (in GEMM-instance, tile-row, tile-column
// order) runs on core t % cores as that core's (t / cores)-th tile. Global tile numbers stay in
// that order with residency too; only which core visits a tile, and when, changes.
//
// Data reuse (L1). As Ascend C's Matmul keeps operand blocks in L1 across neighbouring output
// tiles (MatmulTiling stepM/stepN, depthA1/depthB1), a core may hold one operand's panel (A: tm x
// K, the row block; B: K x tn, the column block) resident in its L1 while it walks the output
// tiles that share it; the panel's K blocks are loaded with the first of those tiles and cost
// nothing over the L2/HBM path afterwards (TileLoad::resident). A GEMM holds a panel when
// streaming both panels of a tile over the L2 read port (l2_bytes_per_cycle) would take longer
// than the tile's Cube cycles (on CANN's 910B figures, 110 B/cycle against the 128 B/cycle of a
// 128 x 128 tile); the held operand is the one that moves fewer bytes per tile (run = the tiles sharing a panel, at most a core's share),
// provided two panels (double buffered: the next run's panel loads while the current one is in
// use) plus two blocks of the other operand fit the L1 (CoreTimingParams::l1_bytes, the chip
// config's l1_size) and a panel is used by at least two tiles of a core. With a held operand the
// tiles are visited GEMM, instance, held block, other block, and each core takes a contiguous
// share of that sequence (floor or ceil of tiles / cores, as round robin gives); the loads then
// run ahead of the Cube by depth = (L1 - two panels) / the walking operand's block bytes steps,
// never more than the shortest run (so at most two panels are resident). Otherwise (K too long
// for the L1, fewer than two tiles per core on every panel) the plan is the round robin below.
//
// Data reuse (L2). Blocks are identified per operand matrix; the first load of a block by any
// core in an op comes from HBM (its share of the operand's unique HBM bytes), later loads of the
// same block hit the chip's L2 and move at the L2 port rate only — provided the op's unique
// bytes fit in the L2; otherwise every load goes to HBM.
#pragma once

#include <cstdint>
#include <vector>

#include "chip_model/kernels/kernel.h"

namespace probelab::chip::kernels {

/// A tensor's bytes in HBM.
struct AddrRange {
  std::uint64_t addr = 0, bytes = 0;
};

/// The core parameters the timing model uses (from ChipConfig plus the L2 figures).
struct CoreTimingParams {
  std::uint32_t cores = 1;
  std::uint32_t clock_mhz = 1000;
  std::uint32_t cube_m = 16, cube_n = 16, cube_k = 16;
  std::uint32_t vector_bytes_per_cycle = 256;
  std::uint32_t mte_bytes_per_cycle = 64;   // HBM <-> core port
  std::uint64_t l1_bytes = 512 << 10;
  std::uint64_t l0a_bytes = 64 << 10, l0b_bytes = 64 << 10, l0c_bytes = 128 << 10, ub_bytes = 192 << 10;
  /// L1 -> L0A / L0B rates (MTE1; CANN's l1_to_l0_a_rate / l1_to_l0_b_rate).
  std::uint32_t l1_l0a_bytes_per_cycle = 512, l1_l0b_bytes_per_cycle = 256;
  /// Chip L2 (Ascend 910B: 192 MB, public spec) and its per-core read port (estimate: 256
  /// bytes/cycle, enough to feed the Cube at full rate from 128 x 128 tiles with margin).
  std::uint64_t l2_bytes = 192ull << 20;
  std::uint32_t l2_bytes_per_cycle = 256;
  bool operator==(const CoreTimingParams&) const = default;
};

/// One MTE load of a step.
struct TileLoad {
  std::int64_t block = -1;     // reuse key (see above); -1: streamed, always from HBM
  std::uint64_t bytes = 0;     // bytes moved into the core
  std::uint64_t hbm_bytes = 0; // bytes fetched from HBM when the block misses
  std::uint64_t addr = 0;
  /// Cube operand loads: the slice of the operand's HBM range this block stands for (the blocks
  /// of one operand cut its range into disjoint slices), looked up in a shared L2. 0: none.
  std::uint64_t l2_addr = 0, l2_len = 0;
  /// The block is part of a panel the core holds in its L1 (see above): no L2/HBM traffic.
  bool resident = false;
};

/// One pipeline step of one core.
struct TileStep {
  TileLoad loads[3];
  std::uint8_t num_loads = 0;
  bool cube = false;             // compute pipe: Cube (true) or Vector
  std::uint64_t compute_cycles = 0;
  /// Cube steps: cycles to move the step's A and B blocks from L1 into L0A and L0B (separate
  /// paths, so the slower of the two), resident or not. The L0 buffers are double buffered, so
  /// these moves overlap the previous step's Cube work: a step takes max(compute, l0) cycles.
  std::uint64_t l0_cycles = 0;
  bool tile_end = false;         // last step of an output tile: epilogue + store follow
  std::uint64_t post_cycles = 0; // Vector epilogue cycles of the tile (tile_end only)
  std::uint64_t store_bytes = 0; // (tile_end only)
  std::uint64_t store_addr = 0;
  std::int64_t tile = -1;        // global tile index (tile_end only)
  /// Cube tiles (tile_end only): the tile's FP32 result bytes (tm x tn x 4), what a mixed Cube +
  /// Vector kernel on a split chip hands from the Cube core to a Vector core.
  std::uint64_t handoff_bytes = 0;
};

struct CubeTiling {
  std::int64_t tm = 16, tn = 16, tk = 16;
};

/// The operand a core holds resident in its L1 across output tiles (see above).
enum class CubeHold : std::uint8_t { None, A, B };

/// The tiling of one GEMM shape (see above). Throws std::runtime_error if buffers are too small.
CubeTiling choose_cube_tiling(const GemmWork& g, const CoreTimingParams& p);

struct TilePlan {
  std::vector<std::vector<TileStep>> steps;  // per core (index into the granted cores)
  std::int64_t num_tiles = 0;
  std::int64_t num_blocks = 0;              // reuse keys used
  std::uint32_t depth = 2;                  // input buffers per core (loads run that many steps ahead)
  bool reuse = true;                        // L2 holds the op's operands
  std::vector<CubeHold> holds;              // per GEMM of the op: the operand held in L1
  std::uint64_t resident_loads = 0;         // steps whose held block was already in L1
  std::uint64_t out_elems = 0;              // logical output elements covered by the tiles
  /// Tile of output element e: GEMM layout (count x M x N row-major) when `gemm_layout`, else
  /// proportional (tile = e * num_tiles / out_elems).
  bool gemm_layout = false;
  struct GemmMap {
    std::int64_t first_tile = 0, m = 0, n = 0, tm = 1, tn = 1, count = 0;
    std::uint64_t first_elem = 0;
  };
  std::vector<GemmMap> gemm_maps;
  std::int64_t tile_of_element(std::uint64_t e) const;
  std::uint64_t total_steps() const;
};

/// Plans `w` over `cores` cores. `out_elems` = element count of the op's output 0.
TilePlan plan_tiles(const OpWork& w, const CoreTimingParams& p, std::uint32_t cores, std::uint64_t out_elems);

}  // namespace probelab::chip::kernels
