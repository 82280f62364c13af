// Tiling of op work into per-core pipeline steps (see tiling.h).
#include "chip_model/kernels/tiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace probelab::chip::kernels {
namespace {

__extension__ typedef unsigned __int128 u128;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }
std::int64_t round_up16(std::int64_t x) { return std::max<std::int64_t>(16, ceil_div(x, 16) * 16); }

std::vector<std::int64_t> tile_candidates(std::int64_t dim) {
  const std::int64_t top = std::min<std::int64_t>(round_up16(dim), 1024);
  std::vector<std::int64_t> c;
  for (std::int64_t t = 16; t <= top; t *= 2) c.push_back(t);
  if (c.back() != top) c.push_back(top);
  return c;
}

/// Share [lo, hi) of `total` for part i of n parts (integer, parts sum to total).
std::uint64_t share(std::uint64_t total, std::uint64_t i, std::uint64_t n) {
  const auto lo = static_cast<u128>(total) * i / n;
  const auto hi = static_cast<u128>(total) * (i + 1) / n;
  return static_cast<std::uint64_t>(hi - lo);
}
std::uint64_t prefix(std::uint64_t total, std::uint64_t i, std::uint64_t n) {
  return static_cast<std::uint64_t>(static_cast<u128>(total) * i / n);
}

std::uint64_t vector_cycles(const OpWork& w, const CoreTimingParams& p) {
  const double bytes = static_cast<double>(w.vector_elems) * w.vector_passes * 4.0;
  return static_cast<std::uint64_t>(bytes / p.vector_bytes_per_cycle + 0.999999);
}

/// In-kernel statistics: one Vector pass over the tensors' bytes (as a capture task's scan).
std::uint64_t stats_cycles(const OpWork& w, const CoreTimingParams& p) {
  const std::uint64_t v = std::max<std::uint32_t>(p.vector_bytes_per_cycle, 1);
  return (w.stats_bytes + v - 1) / v;
}

/// Cycles of one tm x tn output tile over K: the Cube's, or the L1 -> L0A / L0B moves of its
/// blocks if slower (TileStep::l0_cycles).
double tile_cycles(std::int64_t tm, std::int64_t tn, std::int64_t k, std::uint32_t in_bytes, const CoreTimingParams& p) {
  const std::int64_t kk = std::max<std::int64_t>(k, 1);
  const std::int64_t fp32 = in_bytes == 4 ? 2 : 1;
  const double l0 = static_cast<double>(kk) * in_bytes *
                    std::max(static_cast<double>(tm) / std::max<std::uint32_t>(p.l1_l0a_bytes_per_cycle, 1),
                             static_cast<double>(tn) / std::max<std::uint32_t>(p.l1_l0b_bytes_per_cycle, 1));
  return std::max(l0, static_cast<double>(ceil_div(tm, p.cube_m) * ceil_div(tn, p.cube_n) * ceil_div(kk, p.cube_k) * fp32));
}

}  // namespace

CubeTiling choose_cube_tiling(const GemmWork& g, const CoreTimingParams& p) {
  const std::uint64_t in = std::max<std::uint32_t>(g.in_bytes, 1);
  const std::uint64_t unique = g.a_unique_bytes + g.b_unique_bytes;
  const bool reuse = unique <= p.l2_bytes;
  CubeTiling best;
  double best_est = -1;
  std::int64_t best_area = 0;
  for (std::int64_t tm : tile_candidates(g.m))
    for (std::int64_t tn : tile_candidates(g.n)) {
      if (static_cast<std::uint64_t>(tm * tn) * 4 > p.l0c_bytes / 2) continue;
      const std::uint64_t ka = (p.l0a_bytes / 2) / (static_cast<std::uint64_t>(tm) * in);
      const std::uint64_t kb = (p.l0b_bytes / 2) / (static_cast<std::uint64_t>(tn) * in);
      std::int64_t tk = static_cast<std::int64_t>(std::min(ka, kb)) / 16 * 16;
      if (tk < 16) continue;
      tk = std::min(tk, round_up16(g.k));
      const std::int64_t tiles = g.count * ceil_div(g.m, tm) * ceil_div(g.n, tn);
      const std::int64_t waves = ceil_div(tiles, p.cores);
      const double cube = tile_cycles(tm, tn, g.k, g.in_bytes, p);
      // Bytes a tile moves into the core; the first-touch share comes over the (slower) HBM port.
      const double bytes = static_cast<double>(g.k) * static_cast<double>(tm + tn) * static_cast<double>(in);
      const double miss = reuse ? std::min(1.0, static_cast<double>(unique) / (bytes * static_cast<double>(tiles))) : 1.0;
      const double load = bytes * ((1 - miss) / p.l2_bytes_per_cycle + miss / p.mte_bytes_per_cycle);
      const double est = static_cast<double>(waves) * std::max(cube, load);
      const std::int64_t area = tm * tn;
      if (best_est < 0 || est < best_est * (1 - 1e-9) || (est <= best_est * (1 + 1e-9) && area > best_area)) {
        best = {tm, tn, tk};
        best_est = est;
        best_area = area;
      }
    }
  if (best_est < 0)
    throw std::runtime_error(fmt::format("Cube tiling: L0 buffers too small for a 16x16x16 step (L0A {} B, L0B {} B, "
                                         "L0C {} B, {} bytes per element)",
                                         p.l0a_bytes, p.l0b_bytes, p.l0c_bytes, in));
  return best;
}

std::int64_t TilePlan::tile_of_element(std::uint64_t e) const {
  if (num_tiles <= 0) return -1;
  if (gemm_layout)
    for (const GemmMap& g : gemm_maps) {
      const std::uint64_t span = static_cast<std::uint64_t>(g.count * g.m * g.n);
      if (e < g.first_elem || e >= g.first_elem + span) continue;
      const std::uint64_t local = e - g.first_elem;
      const auto mn = static_cast<std::uint64_t>(g.m * g.n);
      const auto i = static_cast<std::int64_t>(local / mn);
      const auto r = static_cast<std::int64_t>(local % mn);
      const std::int64_t mt = ceil_div(g.m, g.tm), nt = ceil_div(g.n, g.tn);
      return g.first_tile + (i * mt + (r / g.n) / g.tm) * nt + (r % g.n) / g.tn;
    }
  if (out_elems == 0) return 0;
  return static_cast<std::int64_t>(static_cast<u128>(std::min(e, out_elems - 1)) * num_tiles / out_elems);
}

std::uint64_t TilePlan::total_steps() const {
  std::uint64_t n = 0;
  for (const auto& s : steps) n += s.size();
  return n;
}

namespace {

void plan_vector(const OpWork& w, const CoreTimingParams& p, std::uint32_t cores, TilePlan& plan) {
  const std::uint64_t bytes = w.in_bytes + w.out_bytes;
  const std::uint64_t half_ub = std::max<std::uint64_t>(p.ub_bytes / 2, 1);
  auto tiles = static_cast<std::int64_t>(std::max<std::uint64_t>(1, (bytes + half_ub - 1) / half_ub));
  tiles = std::max<std::int64_t>(tiles, std::min<std::int64_t>(cores, static_cast<std::int64_t>(bytes / 4096)));
  if (tiles > static_cast<std::int64_t>(cores)) tiles = ceil_div(tiles, cores) * cores;
  const std::uint64_t cycles = vector_cycles(w, p);
  const std::uint64_t stats = stats_cycles(w, p);
  const auto n = static_cast<std::uint64_t>(tiles);
  for (std::uint64_t t = 0; t < n; ++t) {
    TileStep s;
    s.num_loads = 1;
    s.loads[0].bytes = s.loads[0].hbm_bytes = share(w.in_bytes, t, n);
    s.loads[0].addr = w.in_addr + prefix(w.in_bytes, t, n);
    s.cube = false;
    s.compute_cycles = share(cycles, t, n);
    s.post_cycles = share(stats, t, n);
    s.tile_end = true;
    s.store_bytes = share(w.out_bytes, t, n);
    s.store_addr = w.out_addr + prefix(w.out_bytes, t, n);
    s.tile = static_cast<std::int64_t>(t);
    plan.steps[t % cores].push_back(s);
  }
  plan.num_tiles = tiles;
}

/// Where one output tile of the visiting sequence sits.
struct TileRef {
  std::size_t gemm = 0;
  std::int64_t i = 0, mi = 0, ni = 0, tile = 0;
};

/// The operand a core keeps resident in its L1 while it walks the output tiles of one GEMM (see
/// tiling.h): none when streaming both panels over the L2 port keeps up with the Cube; else the
/// one that moves fewer bytes per tile over the L2/HBM path, provided two of its panels (double
/// buffering) and two blocks of the other operand fit the L1, and a core's share of the op's
/// tiles lets it reuse the panel at least once.
CubeHold choose_hold(const GemmWork& g, const CubeTiling& t, const CoreTimingParams& p, std::int64_t tiles_per_core) {
  const std::int64_t MT = ceil_div(g.m, t.tm), NT = ceil_div(g.n, t.tn);
  const std::int64_t k = std::max<std::int64_t>(g.k, 1), kt = ceil_div(k, t.tk);
  const auto in = static_cast<std::int64_t>(g.in_bytes);
  const auto fits = [&](std::int64_t panel_dim, std::int64_t other_dim) {
    return static_cast<std::uint64_t>((2 * panel_dim * kt * t.tk + 2 * other_dim * t.tk) * in) <= p.l1_bytes;
  };
  // Bytes per tile over the L2/HBM path with a panel reused over `run` tiles.
  const auto per_tile = [&](std::int64_t held, std::int64_t other, std::int64_t run) {
    return static_cast<double>(k * other) + static_cast<double>(k * held) / static_cast<double>(run);
  };
  // Streaming both panels keeps the Cube fed over the L2 port: no residency (round robin spreads
  // the first touches of the operands over the op instead of bursting them at each run's start).
  const double cube = tile_cycles(t.tm, t.tn, k, g.in_bytes, p);
  if (per_tile(t.tm, t.tn, 1) * static_cast<double>(in) / std::max<std::uint32_t>(p.l2_bytes_per_cycle, 1) <= cube)
    return CubeHold::None;
  const std::int64_t run_a = std::min(NT, tiles_per_core), run_b = std::min(MT, tiles_per_core);
  const bool a_ok = run_a >= 2 && fits(t.tm, t.tn), b_ok = run_b >= 2 && fits(t.tn, t.tm);
  if (!a_ok && !b_ok) return CubeHold::None;
  if (a_ok && (!b_ok || per_tile(t.tm, t.tn, run_a) <= per_tile(t.tn, t.tm, run_b))) return CubeHold::A;
  return CubeHold::B;
}

void plan_cube(const OpWork& w, const CoreTimingParams& p, std::uint32_t cores, TilePlan& plan) {
  std::uint64_t unique = 0, gemm_out = 0;
  for (const GemmWork& g : w.gemms) {
    unique += g.a_unique_bytes + g.b_unique_bytes;
    gemm_out += static_cast<std::uint64_t>(g.count * g.m * g.n);
  }
  plan.reuse = unique + w.out_bytes <= p.l2_bytes;
  const std::uint64_t extra_in = w.in_bytes > unique ? w.in_bytes - unique : 0;  // bias, norm params, ...
  const std::uint64_t epilogue = vector_cycles(w, p) + stats_cycles(w, p);
  std::int64_t total_tiles = 0;
  std::vector<CubeTiling> tilings;
  for (const GemmWork& g : w.gemms) {
    tilings.push_back(choose_cube_tiling(g, p));
    total_tiles += g.count * ceil_div(g.m, tilings.back().tm) * ceil_div(g.n, tilings.back().tn);
  }
  const std::int64_t per_core = ceil_div(total_tiles, cores);
  bool any_hold = false;
  // L1 budget: two held panels + the staged blocks of the walking operand; else whole steps.
  std::uint64_t step_bytes = 1, panel_bytes = 0;
  for (std::size_t gi = 0; gi < w.gemms.size(); ++gi) {
    const GemmWork& g = w.gemms[gi];
    const CubeTiling& t = tilings[gi];
    const CubeHold hold = choose_hold(g, t, p, per_core);
    plan.holds.push_back(hold);
    any_hold = any_hold || hold != CubeHold::None;
    const std::uint64_t a_step = static_cast<std::uint64_t>(t.tm * t.tk) * g.in_bytes;
    const std::uint64_t b_step = static_cast<std::uint64_t>(t.tk * t.tn) * g.in_bytes;
    step_bytes = std::max(step_bytes, hold == CubeHold::A ? b_step : hold == CubeHold::B ? a_step : a_step + b_step);
    const auto kt = static_cast<std::uint64_t>(std::max<std::int64_t>(1, ceil_div(g.k, t.tk)));
    if (hold != CubeHold::None) panel_bytes = std::max(panel_bytes, kt * (hold == CubeHold::A ? a_step : b_step));
  }

  // The visiting sequence: GEMM, instance, then the held operand's blocks outermost.
  std::vector<TileRef> seq;
  seq.reserve(static_cast<std::size_t>(total_tiles));
  std::vector<std::int64_t> first_tile, first_block;
  std::int64_t tile = 0, block_base = 0;
  std::uint64_t elem = 0;
  for (std::size_t gi = 0; gi < w.gemms.size(); ++gi) {
    const GemmWork& g = w.gemms[gi];
    const CubeTiling& t = tilings[gi];
    const std::int64_t MT = ceil_div(g.m, t.tm), NT = ceil_div(g.n, t.tn), KT = std::max<std::int64_t>(1, ceil_div(g.k, t.tk));
    first_tile.push_back(tile);
    first_block.push_back(block_base);
    plan.gemm_maps.push_back({tile, g.m, g.n, t.tm, t.tn, g.count, elem});
    const bool by_column = plan.holds[gi] == CubeHold::B;
    for (std::int64_t i = 0; i < g.count; ++i)
      for (std::int64_t o = 0; o < (by_column ? NT : MT); ++o)
        for (std::int64_t u = 0; u < (by_column ? MT : NT); ++u) {
          const std::int64_t mi = by_column ? u : o, ni = by_column ? o : u;
          seq.push_back({gi, i, mi, ni, tile + (i * MT + mi) * NT + ni});
        }
    tile += g.count * MT * NT;
    block_base += g.a_distinct * MT * KT + g.b_distinct * KT * NT;
    elem += static_cast<std::uint64_t>(g.count * g.m * g.n);
  }
  plan.num_tiles = tile;
  plan.num_blocks = block_base;
  plan.gemm_layout = gemm_out == plan.out_elems;

  // Distribution: round robin without residency; with it, each core takes a contiguous share of
  // the sequence (floor or ceil of tiles / cores, as round robin), so neighbouring tiles of a
  // row (column) block run on the same core.
  const auto n_seq = static_cast<std::uint64_t>(seq.size());
  std::vector<std::vector<std::size_t>> order(cores);
  for (std::uint64_t pos = 0, c = 0; pos < n_seq; ++pos) {
    if (any_hold)
      while (pos >= prefix(n_seq, c + 1, cores)) ++c;
    order[any_hold ? c : pos % cores].push_back(static_cast<std::size_t>(pos));
  }

  const auto nt_all = static_cast<std::uint64_t>(std::max<std::int64_t>(total_tiles, 1));
  std::size_t min_run_steps = 0;
  for (std::uint32_t c = 0; c < cores; ++c) {
    auto& core_steps = plan.steps[c];
    const TileRef* prev = nullptr;
    std::size_t run_steps = 0;
    for (std::size_t pos : order[c]) {
      const TileRef& r = seq[pos];
      const GemmWork& g = w.gemms[r.gemm];
      const CubeTiling& t = tilings[r.gemm];
      const CubeHold hold = plan.holds[r.gemm];
      const std::int64_t MT = ceil_div(g.m, t.tm), NT = ceil_div(g.n, t.tn), KT = std::max<std::int64_t>(1, ceil_div(g.k, t.tk));
      const std::uint64_t in = g.in_bytes;
      // The held panel is resident when the previous tile of this core used the same one.
      const bool same_gemm = prev != nullptr && prev->gemm == r.gemm;
      const bool resident =
          same_gemm && ((hold == CubeHold::A && prev->i % g.a_distinct == r.i % g.a_distinct && prev->mi == r.mi) ||
                        (hold == CubeHold::B && prev->i % g.b_distinct == r.i % g.b_distinct && prev->ni == r.ni));
      if (hold != CubeHold::None && !resident) {
        if (run_steps > 0 && (min_run_steps == 0 || run_steps < min_run_steps)) min_run_steps = run_steps;
        run_steps = 0;
      }
      run_steps += static_cast<std::size_t>(KT);
      prev = &r;
      const double a_scale = g.a_distinct * g.m * g.k > 0
                                 ? static_cast<double>(g.a_unique_bytes) / static_cast<double>(g.a_distinct * g.m * g.k * in)
                                 : 0.0;
      const double b_scale = g.b_distinct * g.k * g.n > 0
                                 ? static_cast<double>(g.b_unique_bytes) / static_cast<double>(g.b_distinct * g.k * g.n * in)
                                 : 0.0;
      const std::int64_t a_blocks = g.a_distinct * MT * KT;
      const std::int64_t fp32 = in == 4 ? 2 : 1;
      const std::int64_t tm = std::min(t.tm, g.m - r.mi * t.tm), tn = std::min(t.tn, g.n - r.ni * t.tn);
      const std::int64_t ia = r.i % g.a_distinct, ib = r.i % g.b_distinct, base = first_block[r.gemm];
      for (std::int64_t kk = 0; kk < KT; ++kk) {
        const std::int64_t tk = std::max<std::int64_t>(0, std::min(t.tk, g.k - kk * t.tk));
        TileStep s;
        s.cube = true;
        TileLoad& la = s.loads[s.num_loads++];
        la.bytes = static_cast<std::uint64_t>(tm * tk) * in;
        la.hbm_bytes = static_cast<std::uint64_t>(static_cast<double>(la.bytes) * a_scale + 0.5);
        la.block = plan.reuse ? base + (ia * MT + r.mi) * KT + kk : -1;
        la.addr = g.a_addr + static_cast<std::uint64_t>((ia * g.m + r.mi * t.tm) * g.k + kk * t.tk) * in;
        const auto a_block = static_cast<std::uint64_t>((ia * MT + r.mi) * KT + kk);
        la.l2_addr = g.a_addr + prefix(g.a_unique_bytes, a_block, static_cast<std::uint64_t>(a_blocks));
        la.l2_len = share(g.a_unique_bytes, a_block, static_cast<std::uint64_t>(a_blocks));
        la.resident = resident && hold == CubeHold::A;
        TileLoad& lb = s.loads[s.num_loads++];
        lb.bytes = static_cast<std::uint64_t>(tk * tn) * in;
        lb.hbm_bytes = static_cast<std::uint64_t>(static_cast<double>(lb.bytes) * b_scale + 0.5);
        lb.block = plan.reuse ? base + a_blocks + (ib * KT + kk) * NT + r.ni : -1;
        lb.addr = g.b_addr + static_cast<std::uint64_t>((ib * g.k + kk * t.tk) * g.n + r.ni * t.tn) * in;
        const auto b_block = static_cast<std::uint64_t>((ib * KT + kk) * NT + r.ni);
        const auto b_blocks = static_cast<std::uint64_t>(g.b_distinct * KT * NT);
        lb.l2_addr = g.b_addr + prefix(g.b_unique_bytes, b_block, b_blocks);
        lb.l2_len = share(g.b_unique_bytes, b_block, b_blocks);
        lb.resident = resident && hold == CubeHold::B;
        if (kk == 0 && extra_in > 0) {
          TileLoad& lx = s.loads[s.num_loads++];
          lx.bytes = lx.hbm_bytes = share(extra_in, static_cast<std::uint64_t>(r.tile), nt_all);
          lx.addr = w.in_addr;
        }
        s.compute_cycles = static_cast<std::uint64_t>(ceil_div(tm, p.cube_m) * ceil_div(tn, p.cube_n) *
                                                      ceil_div(tk, p.cube_k) * fp32);
        s.l0_cycles = static_cast<std::uint64_t>(
            std::max(ceil_div(static_cast<std::int64_t>(la.bytes), std::max<std::int64_t>(p.l1_l0a_bytes_per_cycle, 1)),
                     ceil_div(static_cast<std::int64_t>(lb.bytes), std::max<std::int64_t>(p.l1_l0b_bytes_per_cycle, 1))));
        if (kk == KT - 1) {
          s.tile_end = true;
          s.tile = r.tile;
          const auto tiles_u = static_cast<std::uint64_t>(r.tile);
          s.post_cycles = share(epilogue, tiles_u, nt_all);
          s.store_bytes = share(w.out_bytes, tiles_u, nt_all);
          s.store_addr = w.out_addr + prefix(w.out_bytes, tiles_u, nt_all);
          s.handoff_bytes = static_cast<std::uint64_t>(tm * tn) * 4;
        }
        if (s.loads[0].resident || s.loads[1].resident) ++plan.resident_loads;
        core_steps.push_back(s);
      }
    }
    if (run_steps > 0 && any_hold && (min_run_steps == 0 || run_steps < min_run_steps)) min_run_steps = run_steps;
  }
  // Loads run up to `depth` steps ahead of the Cube. With held panels: no further than one panel
  // ahead (depth <= the shortest run), so at most two panels are ever resident.
  const std::uint64_t staging = p.l1_bytes > 2 * panel_bytes ? p.l1_bytes - 2 * panel_bytes : 0;
  std::uint64_t depth = std::clamp<std::uint64_t>(staging / step_bytes, 2, 16);
  if (any_hold && min_run_steps > 0) depth = std::max<std::uint64_t>(2, std::min<std::uint64_t>(depth, min_run_steps));
  plan.depth = static_cast<std::uint32_t>(depth);
}

}  // namespace

TilePlan plan_tiles(const OpWork& w, const CoreTimingParams& p, std::uint32_t cores, std::uint64_t out_elems) {
  if (cores == 0) throw std::invalid_argument("plan_tiles: no cores");
  TilePlan plan;
  plan.steps.resize(cores);
  plan.out_elems = out_elems;
  if (w.gemms.empty()) plan_vector(w, p, cores, plan);
  else plan_cube(w, p, cores, plan);
  return plan;
}

}  // namespace probelab::chip::kernels
