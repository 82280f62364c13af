// Multi-core tile pipeline timing (see ai_core_pipeline.h).
#include "chip_model/ai_core_pipeline.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <span>

#include "chip_model/clock.h"
#include "chip_model/hbm.h"
#include "chip_model/l2_cache.h"

namespace probelab::chip {
namespace {

constexpr std::uint64_t kUnknown = std::numeric_limits<std::uint64_t>::max();

struct CoreState {
  const std::vector<kernels::TileStep>* steps = nullptr;
  std::vector<std::uint64_t> load_end, comp_end;
  std::vector<std::size_t> tile_first;   // first step of each local tile
  std::vector<std::size_t> step_tile;    // local tile of each step
  std::vector<std::size_t> tile_last;    // last step of each local tile
  std::vector<std::uint64_t> vec_end, store_end;
  std::size_t next_load = 0, next_comp = 0, next_store = 0;
  std::uint64_t vec_free = 0;
  // Mixed kernels: the fixpipe, each AIV's vector pipe and MTE, when each workspace slot frees.
  std::uint64_t fix_free = 0;
  std::vector<std::uint64_t> aiv_free, aiv_store_free, slot_free, l0c_free;
  std::uint64_t load_issue_free = 0, store_issue_free = 0;  // MTE ready for the next request
  // store_ready() / load_ready() of the next store and load, kUnknown when none is issuable.
  std::uint64_t store_at = kUnknown, load_at = kUnknown;

  std::size_t n() const { return steps->size(); }
  std::uint64_t load_ready(std::uint64_t t0, std::size_t depth) const {
    const std::size_t i = next_load;
    if (i >= depth && comp_end[i - depth] == kUnknown) return kUnknown;
    std::uint64_t r = std::max(t0, load_issue_free);
    if (i >= depth) r = std::max(r, comp_end[i - depth]);
    return r;
  }
  std::uint64_t store_ready() const {
    const std::size_t j = next_store;
    if (vec_end[j] == kUnknown) return kUnknown;
    return std::max(vec_end[j], aiv_store_free.empty() ? store_issue_free : aiv_store_free[j % aiv_store_free.size()]);
  }
};

/// The per-op working storage of run_pipeline, kept between ops so that its vectors keep their
/// capacity: every field is reset before use (states[0, busy.size()) fully), so what an earlier
/// op left there never reaches a result.
struct Scratch {
  std::vector<CoreState> states;  // the first busy.size() are this op's
  std::vector<std::size_t> busy;
  std::vector<CoreState*> cs;
  // Op-reuse L2 model: block b was loaded by this op iff touched[b] == epoch (a new epoch per op,
  // so the blocks need no clearing; all are cleared when the counter wraps).
  std::vector<std::uint32_t> touched;
  std::uint32_t epoch = 0;

  /// Starts an op over `blocks` blocks, none touched.
  void new_epoch(std::size_t blocks) {
    if (++epoch == 0) {
      std::fill(touched.begin(), touched.end(), 0u);
      epoch = 1;
    }
    if (touched.size() < blocks) touched.resize(blocks, 0u);
  }
};

/// A Scratch for one run_pipeline call, returned to this thread's pool when the call ends. A
/// call may wait() inside its SC_THREAD while another one runs (on the same host thread), so each
/// call holds its own.
class ScratchLease {
 public:
  ScratchLease() {
    if (pool().empty()) {
      scratch_ = std::make_unique<Scratch>();
    } else {
      scratch_ = std::move(pool().back());
      pool().pop_back();
    }
  }
  ~ScratchLease() { pool().push_back(std::move(scratch_)); }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  Scratch& operator*() const { return *scratch_; }

 private:
  static std::vector<std::unique_ptr<Scratch>>& pool() {
    thread_local std::vector<std::unique_ptr<Scratch>> free;
    return free;
  }
  std::unique_ptr<Scratch> scratch_;
};

/// Calls f(addr, bytes) for the pieces of [off, off + len) of `ranges` laid end to end.
template <class F>
void for_pieces(std::span<const AddrRange> ranges, std::uint64_t off, std::uint64_t len, F&& f) {
  for (const AddrRange& r : ranges) {
    if (len == 0) return;
    if (off >= r.bytes) {
      off -= r.bytes;
      continue;
    }
    const std::uint64_t n = std::min(len, r.bytes - off);
    f(r.addr + off, n);
    len -= n;
    off = 0;
  }
}

std::uint64_t base_of(std::span<const AddrRange> ranges) { return ranges.empty() ? 0 : ranges.front().addr; }

void track(std::uint64_t& first, std::uint64_t& last, std::uint64_t& busy, std::uint64_t s, std::uint64_t e) {
  if (busy == 0 && first == 0) first = s;
  first = std::min(first, s);
  last = std::max(last, e);
  busy += e - s;
}

}  // namespace

PipelineResult run_pipeline(const kernels::TilePlan& plan, Hbm& hbm, const sc_core::sc_time& start,
                            const PipelineOptions& opt) {
  const ChipClock clock(opt.clock_mhz);
  const std::uint64_t t0 = ChipClock::to_ps(start);
  const std::uint64_t ahead = ChipClock::to_ps(opt.sync_ahead);
  PipelineResult res;
  res.start_ps = res.end_ps = t0;
  res.tile_done_ps.assign(static_cast<std::size_t>(std::max<std::int64_t>(plan.num_tiles, 0)), t0);
  res.units = plan.steps.size();
  const ScratchLease lease;
  Scratch& scratch = *lease;
  if (!opt.l2) scratch.new_epoch(static_cast<std::size_t>(std::max<std::int64_t>(plan.num_blocks, 0)));
  std::vector<std::uint32_t>& touched = scratch.touched;
  const std::uint32_t epoch = scratch.epoch;

  // State only for the cores with work (in core order): a small op tiles over a few of the 24-48
  // units, and only these are set up and searched for the next action.
  std::vector<std::size_t>& busy = scratch.busy;
  busy.clear();
  for (std::size_t c = 0; c < plan.steps.size(); ++c)
    if (!plan.steps[c].empty()) busy.push_back(c);
  res.cores.resize(busy.empty() ? 0 : busy.back() + 1);
  if (scratch.states.size() < busy.size()) scratch.states.resize(busy.size());
  const std::span<CoreState> states(scratch.states.data(), busy.size());
  std::vector<CoreState*>& cs = scratch.cs;  // by core; null: no work
  cs.assign(plan.steps.size(), nullptr);
  for (std::size_t b = 0; b < busy.size(); ++b) {
    const std::size_t c = busy[b];
    CoreState& s = states[b];
    cs[c] = &s;
    s.steps = &plan.steps[c];
    s.load_end.assign(s.n(), kUnknown);
    s.comp_end.assign(s.n(), kUnknown);
    s.step_tile.resize(s.n());  // fully written below
    s.tile_first.clear();
    s.tile_last.clear();
    s.next_load = s.next_comp = s.next_store = 0;
    bool open = false;
    for (std::size_t i = 0; i < s.n(); ++i) {
      if (!open) {
        s.tile_first.push_back(i);
        open = true;
      }
      s.step_tile[i] = s.tile_first.size() - 1;
      if ((*s.steps)[i].tile_end) {
        s.tile_last.push_back(i);
        open = false;
      }
    }
    s.vec_end.assign(s.tile_first.size(), kUnknown);
    s.store_end.assign(s.tile_first.size(), kUnknown);
    s.vec_free = s.load_issue_free = s.store_issue_free = s.fix_free = t0;
    if (opt.aiv_per_unit > 0) {
      s.aiv_free.assign(opt.aiv_per_unit, t0);
      // The AIVs store the outputs only when the epilogue writes them (workspace mode).
      if (opt.epilogue_reads_output)
        s.aiv_store_free.clear();
      else
        s.aiv_store_free.assign(opt.aiv_per_unit, t0);
      s.slot_free.assign(s.tile_first.size(), kUnknown);
      s.l0c_free.assign(s.tile_first.size(), kUnknown);
    } else {
      s.aiv_free.clear();
      s.aiv_store_free.clear();
      s.slot_free.clear();
      s.l0c_free.clear();
    }
  }
  const bool mixed = opt.aiv_per_unit > 0;
  // workspace: the fused epilogue's FP32 tiles go through the workspace; readback: the AIC
  // stores its output and the AIV reads the stored tile back for its (statistics) pass.
  const bool workspace = mixed && !opt.epilogue_reads_output, readback = mixed && opt.epilogue_reads_output;
  if (mixed) res.aivs.resize(res.cores.size() * opt.aiv_per_unit);
  res.readback = readback;
  auto issue_free = [&](std::uint64_t start, std::uint64_t end, bool hbm_used) {
    return hbm_used && end >= start + opt.hbm_latency_ps ? end - opt.hbm_latency_ps : end;
  };
  // Shared L2: evicted dirty lines go to HBM as posted writes at time t.
  auto write_back = [&](const L2Cache::Access& a, std::uint64_t t) {
    if (a.writebacks.empty()) return;
    const std::uint64_t bytes = a.writebacks.size() * L2Cache::kLineBytes;
    hbm.transfer(a.writebacks.front(), bytes, ChipClock::from_ps(t), HbmClient::Core, true, opt.mte_gbps, true, true);
    res.l2_writeback_bytes += bytes;
    res.hbm_write_bytes += bytes;
  };
  const std::uint64_t in_base = base_of(opt.inputs), out_base = base_of(opt.outputs);

  // Mixed kernels: AIV a of unit c has loaded the tile (h.load_*); its pass ends h.vec_end_ps.
  auto aiv_pass = [&](std::size_t c, std::size_t a, const kernels::TileStep& step, PipelineResult::Handoff& h) {
    const std::uint64_t vd = clock.cycles_to_ps(step.post_cycles);
    h.vec_end_ps = cs[c]->aiv_free[a] = h.load_end_ps + vd;
    PipelineResult::CoreSpan& aiv = res.aivs[c * opt.aiv_per_unit + a];
    track(aiv.mte_first_ps, aiv.mte_last_ps, aiv.mte_busy_ps, h.load_start_ps, h.load_end_ps);
    if (vd > 0) {
      track(aiv.vec_first_ps, aiv.vec_last_ps, aiv.vec_busy_ps, h.load_end_ps, h.vec_end_ps);
      res.vector_cycles += step.post_cycles;
    }
    ++aiv.tiles;
  };

  // Mixed kernels: tile j (ending with step i) of unit c goes through the workspace to an AIV.
  auto handoff = [&](std::size_t c, std::size_t i, std::size_t j) {
    CoreState& s = *cs[c];
    const kernels::TileStep& step = (*s.steps)[i];
    const std::size_t a = j % opt.aiv_per_unit;
    PipelineResult::Handoff h;
    h.unit = static_cast<std::uint32_t>(c);
    h.aiv = static_cast<std::uint32_t>(a);
    h.tile = step.tile;
    // The fixpipe writes slot j % 2 once the AIV has taken tile j - 2 out of it.
    h.fix_start_ps = std::max(s.comp_end[i], s.fix_free);
    if (j >= 2) h.fix_start_ps = std::max(h.fix_start_ps, s.slot_free[j - 2]);
    h.set_ps = h.fix_start_ps + transfer_ps(step.handoff_bytes, opt.l2_write_gbps);
    s.fix_free = s.l0c_free[j] = h.set_ps;
    h.wait_start_ps = s.aiv_free[a];
    h.load_start_ps = std::max(h.set_ps + opt.flag_ps, s.aiv_free[a]);
    h.load_end_ps = h.load_start_ps + transfer_ps(step.handoff_bytes, opt.l2_gbps);
    s.slot_free[j] = h.load_end_ps + opt.flag_ps;  // the AIV's flag back: the AIC may refill the slot
    aiv_pass(c, a, step, h);
    s.vec_end[j] = h.vec_end_ps;
    res.handoff_bytes += step.handoff_bytes;
    res.handoffs.push_back(h);
  };

  // readback: tile j of unit c was stored over [start, end); AIV j % aiv_per_unit reads it back
  // from the L2 once flagged and runs its pass; the op ends when the last pass does.
  auto read_back = [&](std::size_t c, std::size_t j, const kernels::TileStep& step, std::uint64_t start, std::uint64_t end) {
    CoreState& s = *cs[c];
    const std::size_t a = j % opt.aiv_per_unit;
    PipelineResult::Handoff h;
    h.unit = static_cast<std::uint32_t>(c);
    h.aiv = static_cast<std::uint32_t>(a);
    h.tile = step.tile;
    h.fix_start_ps = start;
    h.set_ps = std::max(start, end);
    h.wait_start_ps = s.aiv_free[a];
    h.load_start_ps = std::max(h.set_ps + opt.flag_ps, s.aiv_free[a]);
    h.load_end_ps = h.load_start_ps + transfer_ps(step.store_bytes, opt.l2_gbps);
    aiv_pass(c, a, step, h);
    if (step.tile >= 0 && static_cast<std::size_t>(step.tile) < res.tile_done_ps.size())
      res.tile_done_ps[static_cast<std::size_t>(step.tile)] = h.vec_end_ps;
    res.end_ps = std::max(res.end_ps, h.vec_end_ps);
    res.handoffs.push_back(h);
  };

  // Resolves every compute of core c whose inputs are known.
  auto advance = [&](std::size_t c) {
    CoreState& s = *cs[c];
    PipelineResult::CoreSpan& span = res.cores[c];
    while (s.next_comp < s.n()) {
      const std::size_t i = s.next_comp;
      if (s.load_end[i] == kUnknown) return;
      const std::size_t j = s.step_tile[i];
      const bool opens = s.tile_first[j] == i;
      // The tile's output buffer must be free again: L0C/UB after tile j-2's store, or (mixed)
      // L0C after the fixpipe drained tile j-2 into the workspace.
      const std::vector<std::uint64_t>& freed = workspace ? s.l0c_free : s.store_end;
      if (opens && j >= 2 && freed[j - 2] == kUnknown) return;
      std::uint64_t st = s.load_end[i];
      if (i > 0) st = std::max(st, s.comp_end[i - 1]);
      if (opens && j >= 2) st = std::max(st, freed[j - 2]);
      const kernels::TileStep& step = (*s.steps)[i];
      // Cube steps: the L1 -> L0 moves of the step's blocks overlap the previous step's Cube work.
      const std::uint64_t dur = clock.cycles_to_ps(std::max(step.compute_cycles, step.l0_cycles));
      s.comp_end[i] = st + dur;
      if (step.cube) {
        track(span.cube_first_ps, span.cube_last_ps, span.cube_busy_ps, st, st + dur);
        res.cube_cycles += step.compute_cycles;
      } else {
        s.vec_free = std::max(s.vec_free, st + dur);
        track(span.vec_first_ps, span.vec_last_ps, span.vec_busy_ps, st, st + dur);
        res.vector_cycles += step.compute_cycles;
      }
      if (opt.record_spans && dur > 0) res.spans.push_back({static_cast<std::uint32_t>(c), 1, step.cube, st, st + dur});
      if (step.tile_end && workspace) {
        handoff(c, i, j);
      } else if (step.tile_end) {
        // readback: the AIC has no epilogue of its own, its store follows the Cube step.
        const std::uint64_t vs = readback ? s.comp_end[i] : std::max(s.comp_end[i], s.vec_free);
        const std::uint64_t vd = readback ? 0 : clock.cycles_to_ps(step.post_cycles);
        s.vec_end[j] = vs + vd;
        s.vec_free = s.vec_end[j];
        if (vd > 0) {
          track(span.vec_first_ps, span.vec_last_ps, span.vec_busy_ps, vs, vs + vd);
          res.vector_cycles += step.post_cycles;
          if (opt.record_spans) res.spans.push_back({static_cast<std::uint32_t>(c), 2, false, vs, vs + vd});
        }
        if (step.tile >= 0 && static_cast<std::size_t>(step.tile) < res.tile_done_ps.size())
          res.tile_done_ps[static_cast<std::size_t>(step.tile)] = s.vec_end[j];
        ++span.tiles;
      }
      ++s.next_comp;
    }
  };

  // A core's next store and load times depend on its own state only: they are computed when
  // it starts and again after each of its own actions.
  const std::size_t depth = std::max<std::uint32_t>(plan.depth, 2);
  auto refresh = [&](CoreState& s) {
    s.store_at = s.next_store < s.tile_first.size() ? s.store_ready() : kUnknown;
    s.load_at = s.next_load < s.n() ? s.load_ready(t0, depth) : kUnknown;
  };
  for (CoreState& s : states) refresh(s);
  for (;;) {
    // The earliest issuable MTE action over all cores (ties: lowest core, store first).
    std::size_t best_core = 0;
    bool best_store = false, found = false;
    std::uint64_t best_t = kUnknown;
    for (const std::size_t c : busy) {
      const CoreState& s = *cs[c];
      if (s.store_at < best_t) best_t = s.store_at, best_core = c, best_store = true, found = true;
      if (s.load_at < best_t) best_t = s.load_at, best_core = c, best_store = false, found = true;
    }
    if (!found) break;
    // Let the rest of the system catch up before issuing far ahead of SystemC time.
    const std::uint64_t now = ChipClock::to_ps(sc_core::sc_time_stamp());
    if (best_t > now + ahead) sc_core::wait(ChipClock::from_ps(best_t - now));

    CoreState& s = *cs[best_core];
    if (best_store) {
      // Mixed kernels store from the tile's AIV, on its MTE.
      const std::size_t aiv = workspace ? s.next_store % opt.aiv_per_unit : 0;
      PipelineResult::CoreSpan& span = workspace ? res.aivs[best_core * opt.aiv_per_unit + aiv] : res.cores[best_core];
      const kernels::TileStep& step = (*s.steps)[s.tile_last[s.next_store]];
      std::uint64_t end = best_t;
      if (opt.l2 && step.store_bytes > 0) {
        L2Cache::Access a;
        const std::uint64_t off = step.store_addr >= out_base ? step.store_addr - out_base : 0;
        for_pieces(opt.outputs, off, step.store_bytes,
                   [&](std::uint64_t addr, std::uint64_t n) { L2Cache::merge(a, opt.l2->write(addr, n)); });
        end = best_t + transfer_ps(step.store_bytes, opt.l2_write_gbps);
        res.l2_write_bytes += step.store_bytes;
        write_back(a, best_t);
        track(span.mte_first_ps, span.mte_last_ps, span.mte_busy_ps, best_t, end);
        if (opt.record_spans) res.spans.push_back({static_cast<std::uint32_t>(best_core), 3, false, best_t, end});
      } else if (step.store_bytes > 0) {
        end = ChipClock::to_ps(hbm.transfer(step.store_addr, step.store_bytes, ChipClock::from_ps(best_t),
                                            HbmClient::Core, true, opt.mte_gbps, true, true));
        res.hbm_write_bytes += step.store_bytes;
        track(span.mte_first_ps, span.mte_last_ps, span.mte_busy_ps, best_t, end);
        if (opt.record_spans) res.spans.push_back({static_cast<std::uint32_t>(best_core), 3, false, best_t, end});
      }
      (workspace ? s.aiv_store_free[aiv] : s.store_issue_free) = issue_free(best_t, end, step.store_bytes > 0 && !opt.l2);
      if (readback) read_back(best_core, s.next_store, step, best_t, end);
      s.store_end[s.next_store++] = end;
      res.end_ps = std::max(res.end_ps, end);
    } else {
      PipelineResult::CoreSpan& span = res.cores[best_core];
      const kernels::TileStep& step = (*s.steps)[s.next_load];
      std::uint64_t hbm_bytes = 0, l2_bytes = 0, addr = 0;
      for (std::uint8_t k = 0; opt.l2 && k < step.num_loads; ++k) {
        const kernels::TileLoad& l = step.loads[k];
        if (l.resident) continue;  // held in the core's L1
        L2Cache::Access a;
        if (step.cube && l.l2_len > 0) {
          a = opt.l2->read(l.l2_addr, l.l2_len);
        } else if (!step.cube) {
          const std::uint64_t off = l.addr >= in_base ? l.addr - in_base : 0;
          for_pieces(opt.inputs, off, l.bytes,
                     [&](std::uint64_t p, std::uint64_t n) { L2Cache::merge(a, opt.l2->read(p, n)); });
        } else {  // bias, norm parameters: streamed from HBM
          if (hbm_bytes == 0) addr = l.addr;
          hbm_bytes += l.hbm_bytes;
          continue;
        }
        const std::uint64_t slice = a.hit_bytes + a.miss_bytes;
        if (a.fetched_bytes > 0 && hbm_bytes == 0) addr = l.addr;
        hbm_bytes += a.fetched_bytes;
        l2_bytes += slice == 0 ? 0
                               : static_cast<std::uint64_t>(static_cast<double>(l.bytes) * static_cast<double>(a.hit_bytes) /
                                                            static_cast<double>(slice) + 0.5);
        res.l2_miss_bytes += a.fetched_bytes;
        write_back(a, best_t);
      }
      for (std::uint8_t k = 0; !opt.l2 && k < step.num_loads; ++k) {
        const kernels::TileLoad& l = step.loads[k];
        if (l.resident) continue;
        const bool hit = l.block >= 0 && touched[static_cast<std::size_t>(l.block)] == epoch;
        if (l.block >= 0) touched[static_cast<std::size_t>(l.block)] = epoch;
        if (hit) {
          l2_bytes += l.bytes;
        } else if (l.hbm_bytes > 0) {
          if (hbm_bytes == 0) addr = l.addr;
          hbm_bytes += l.hbm_bytes;
        }
      }
      const std::uint64_t l2_end = best_t + transfer_ps(l2_bytes, opt.l2_gbps);
      std::uint64_t end = l2_end;
      if (hbm_bytes > 0) {
        const std::uint64_t hbm_end = ChipClock::to_ps(
            hbm.transfer(addr, hbm_bytes, ChipClock::from_ps(best_t), HbmClient::Core, false, opt.mte_gbps, true, true));
        end = std::max(end, hbm_end);
        s.load_issue_free = std::max(l2_end, issue_free(best_t, hbm_end, true));
      } else {
        s.load_issue_free = l2_end;
      }
      res.hbm_read_bytes += hbm_bytes;
      res.l2_read_bytes += l2_bytes;
      if (end > best_t) {
        track(span.mte_first_ps, span.mte_last_ps, span.mte_busy_ps, best_t, end);
        if (opt.record_spans) res.spans.push_back({static_cast<std::uint32_t>(best_core), 0, false, best_t, end});
      }
      s.load_end[s.next_load++] = end;
    }
    advance(best_core);
    refresh(s);
  }
  for (const CoreState& s : states) {
    for (std::uint64_t t : s.comp_end)
      if (t != kUnknown) res.end_ps = std::max(res.end_ps, t);
    for (std::uint64_t t : s.vec_end)
      if (t != kUnknown) res.end_ps = std::max(res.end_ps, t);
  }
  return res;
}

}  // namespace probelab::chip
