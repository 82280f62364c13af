// Timing of a collective's transfer schedule over the links and the HBM of each chip.
//
// Inputs: the plan (steps of transfers), the time each position arrived at the collective, a
// router giving the links from one chip to another, and each position's HBM. Steps are timed in
// order; a transfer of step s starts when its sender is ready for step s (arrived, and every
// transfer into it of an earlier step has landed) and its receiver has arrived. Transfers of one
// step are reserved in order of start time (ties: sender, receiver position), so contention on a
// shared link or HBM channel is served first come, first served.
//
// One transfer is a streaming DMA: the sender's HBM reads the bytes, the route carries them
// (link.h, cut-through), the receiver's HBM writes them (and, for a partial sum, reads the local
// operand it is added to — an inline reduction). The stages overlap; the transfer has landed
// when the slowest is done, plus the receiver's arrival jitter. With default figures the link
// dominates, so a ring AllReduce of S bytes over N chips takes about 2(N-1)(alpha + S/(N*B)).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "chip_model/collective/collective_plan.h"
#include "chip_model/collective/link.h"

namespace probelab::chip {

class Hbm;

/// Links carrying data from chip rank `src` to chip rank `dst`, in order (never empty).
using Router = std::function<std::vector<Link*>(std::uint32_t src, std::uint32_t dst)>;

struct TimingInput {
  std::vector<std::uint64_t> arrival_ps;   // per position
  std::vector<Hbm*> hbm;                   // per position (nullptr: HBM not modelled)
  std::vector<std::uint64_t> read_addr;    // per position: HBM address transfers read from
  std::vector<std::uint64_t> write_addr;   // per position: HBM address transfers land at
  /// Per position: extra delay of each incoming transfer, uniform in [0, jitter_ps[pos]], drawn
  /// from a generator seeded with jitter_seed[pos], in plan order (step, then transfer index).
  std::vector<std::uint64_t> jitter_ps;
  std::vector<std::uint64_t> jitter_seed;
};

struct Landing {
  std::uint32_t src = 0;  // position
  std::uint32_t step = 0;
  std::uint64_t start_ps = 0;
  std::uint64_t landed_ps = 0;
};

struct TimingResult {
  std::vector<std::uint64_t> done_ps;           // per position: last send and last landing done
  std::vector<std::vector<Landing>> incoming;   // per position, in order of landing (ties: src)
  std::vector<std::uint64_t> step_end_ps;       // latest landing of each step
};

TimingResult time_schedule(const CollectivePlan& plan, const TimingInput& in, const Router& route);

/// Direct reductions in arrival order: the own contribution first (it is local), then the others
/// in order of landing (ties: group position).
std::vector<std::uint32_t> arrival_order(const TimingResult& t, std::uint32_t position);

/// splitmix64 finaliser, used to derive per-collective seeds.
std::uint64_t mix_seed(std::uint64_t x);

}  // namespace probelab::chip
