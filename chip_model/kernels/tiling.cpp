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

}  // namespace

CubeTiling choose_cube_tiling(const GemmWork& g, const CoreTimingParams& p) {
  const std::uint64_t in = std::max<std::uint32_t>(g.in_bytes, 1);
  const std::uint64_t unique = g.a_unique_bytes + g.b_unique_bytes;
  const bool reuse = unique <= p.l2_bytes;
  const std::int64_t fp32 = g.in_bytes == 4 ? 2 : 1;
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
      const double cube = static_cast<double>(ceil_div(tm, p.cube_m) * ceil_div(tn, p.cube_n) *
                                              ceil_div(std::max<std::int64_t>(g.k, 1), p.cube_k) * fp32);
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

void plan_cube(const OpWork& w, const CoreTimingParams& p, std::uint32_t cores, TilePlan& plan) {
  std::uint64_t unique = 0, gemm_out = 0;
  for (const GemmWork& g : w.gemms) {
    unique += g.a_unique_bytes + g.b_unique_bytes;
    gemm_out += static_cast<std::uint64_t>(g.count * g.m * g.n);
  }
  plan.reuse = unique + w.out_bytes <= p.l2_bytes;
  const std::uint64_t extra_in = w.in_bytes > unique ? w.in_bytes - unique : 0;  // bias, norm params, ...
  const std::uint64_t epilogue = vector_cycles(w, p) + stats_cycles(w, p);
  std::int64_t tile = 0;
  std::uint64_t elem = 0;
  std::int64_t block_base = 0;
  std::int64_t total_tiles = 0;
  std::vector<CubeTiling> tilings;
  std::uint64_t step_bytes = 1;
  for (const GemmWork& g : w.gemms) {
    tilings.push_back(choose_cube_tiling(g, p));
    const CubeTiling& t = tilings.back();
    total_tiles += g.count * ceil_div(g.m, t.tm) * ceil_div(g.n, t.tn);
    step_bytes = std::max<std::uint64_t>(step_bytes, static_cast<std::uint64_t>((t.tm + t.tn) * t.tk) * g.in_bytes);
  }
  plan.depth = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(p.l1_bytes / step_bytes, 2, 16));
  const auto nt_all = static_cast<std::uint64_t>(std::max<std::int64_t>(total_tiles, 1));
  for (std::size_t gi = 0; gi < w.gemms.size(); ++gi) {
    const GemmWork& g = w.gemms[gi];
    const CubeTiling& t = tilings[gi];
    const std::int64_t MT = ceil_div(g.m, t.tm), NT = ceil_div(g.n, t.tn), KT = std::max<std::int64_t>(1, ceil_div(g.k, t.tk));
    const std::uint64_t in = g.in_bytes;
    const double a_scale = g.a_distinct * g.m * g.k > 0
                               ? static_cast<double>(g.a_unique_bytes) / static_cast<double>(g.a_distinct * g.m * g.k * in)
                               : 0.0;
    const double b_scale = g.b_distinct * g.k * g.n > 0
                               ? static_cast<double>(g.b_unique_bytes) / static_cast<double>(g.b_distinct * g.k * g.n * in)
                               : 0.0;
    const std::int64_t a_blocks = g.a_distinct * MT * KT;
    const std::int64_t fp32 = in == 4 ? 2 : 1;
    plan.gemm_maps.push_back({tile, g.m, g.n, t.tm, t.tn, g.count, elem});
    for (std::int64_t i = 0; i < g.count; ++i)
      for (std::int64_t mi = 0; mi < MT; ++mi)
        for (std::int64_t ni = 0; ni < NT; ++ni, ++tile) {
          const std::int64_t tm = std::min(t.tm, g.m - mi * t.tm), tn = std::min(t.tn, g.n - ni * t.tn);
          auto& core_steps = plan.steps[static_cast<std::size_t>(tile % cores)];
          for (std::int64_t kk = 0; kk < KT; ++kk) {
            const std::int64_t tk = std::max<std::int64_t>(0, std::min(t.tk, g.k - kk * t.tk));
            TileStep s;
            s.cube = true;
            TileLoad& la = s.loads[s.num_loads++];
            la.bytes = static_cast<std::uint64_t>(tm * tk) * in;
            la.hbm_bytes = static_cast<std::uint64_t>(static_cast<double>(la.bytes) * a_scale + 0.5);
            la.block = plan.reuse ? block_base + ((i % g.a_distinct) * MT + mi) * KT + kk : -1;
            la.addr = g.a_addr + static_cast<std::uint64_t>(((i % g.a_distinct) * g.m + mi * t.tm) * g.k + kk * t.tk) * in;
            const auto a_block = static_cast<std::uint64_t>(((i % g.a_distinct) * MT + mi) * KT + kk);
            la.l2_addr = g.a_addr + prefix(g.a_unique_bytes, a_block, static_cast<std::uint64_t>(a_blocks));
            la.l2_len = share(g.a_unique_bytes, a_block, static_cast<std::uint64_t>(a_blocks));
            TileLoad& lb = s.loads[s.num_loads++];
            lb.bytes = static_cast<std::uint64_t>(tk * tn) * in;
            lb.hbm_bytes = static_cast<std::uint64_t>(static_cast<double>(lb.bytes) * b_scale + 0.5);
            lb.block = plan.reuse ? block_base + a_blocks + ((i % g.b_distinct) * KT + kk) * NT + ni : -1;
            lb.addr = g.b_addr + static_cast<std::uint64_t>(((i % g.b_distinct) * g.k + kk * t.tk) * g.n + ni * t.tn) * in;
            const auto b_block = static_cast<std::uint64_t>(((i % g.b_distinct) * KT + kk) * NT + ni);
            const auto b_blocks = static_cast<std::uint64_t>(g.b_distinct * KT * NT);
            lb.l2_addr = g.b_addr + prefix(g.b_unique_bytes, b_block, b_blocks);
            lb.l2_len = share(g.b_unique_bytes, b_block, b_blocks);
            if (kk == 0 && extra_in > 0) {
              TileLoad& lx = s.loads[s.num_loads++];
              lx.bytes = lx.hbm_bytes = share(extra_in, static_cast<std::uint64_t>(tile), nt_all);
              lx.addr = w.in_addr;
            }
            s.compute_cycles = static_cast<std::uint64_t>(ceil_div(tm, p.cube_m) * ceil_div(tn, p.cube_n) *
                                                          ceil_div(tk, p.cube_k) * fp32);
            if (kk == KT - 1) {
              s.tile_end = true;
              s.tile = tile;
              const auto tiles_u = static_cast<std::uint64_t>(tile);
              s.post_cycles = share(epilogue, tiles_u, nt_all);
              s.store_bytes = share(w.out_bytes, tiles_u, nt_all);
              s.store_addr = w.out_addr + prefix(w.out_bytes, tiles_u, nt_all);
              s.handoff_bytes = static_cast<std::uint64_t>(tm * tn) * 4;
            }
            core_steps.push_back(s);
          }
        }
    block_base += a_blocks + g.b_distinct * KT * NT;
    elem += static_cast<std::uint64_t>(g.count * g.m * g.n);
  }
  plan.num_tiles = tile;
  plan.num_blocks = block_base;
  plan.gemm_layout = gemm_out == plan.out_elems;
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
