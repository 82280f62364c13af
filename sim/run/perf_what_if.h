// What-if estimates for `probelab perf RUN` (printed, and `what_if` in `perf --json`): a run's
// step, rank and total cycles re-estimated from its report.json counters (perf_report.h) with
// one rate changed, each naming the chip override that checks it by re-running.
//
//   what_if.hbm_x2   HBM bandwidth x2 (check: chip.overrides: {hbm_bandwidth_gbps: 2x}). Per op,
//       the memory time M = HBM bytes / min(H, cores x MTE port) (bytes per cycle), H the rank's
//       HBM rate: the nominal one, or channels x its slowest channel's measured rate when that is
//       lower (transfers are striped, so every one waits for a slow channel), becomes M' with H
//       doubled (the port limit stays); the op saves (M - M') x min(1, M / T)
//       of its T cycles: only the share of its time the HBM was busy at its peak rate is
//       bandwidth time, the rest (latency, ports, vector, launch) does not shrink.
//   what_if.link_x2  multi-rank runs: link bandwidth x2 (check: {link_bandwidth_gbps: 2x}); each
//       rank saves half the busy cycles of the busiest link at the chip's link rate (a ring
//       all-reduce waits for its slowest hop; NIC and switch links are not scaled by the override),
//       times the share of its collective time that is exposed (not under a kernel).
//   what_if.full_cube_rate [the slowest kernels by name] this op at its roofline (max(compute,
//       memory) at the chip's peaks, perf.ops[].roofline.bound_cycles) on every rank that runs it:
//       each rank saves its cycles - bound_cycles.
//       An upper bound; no chip override reproduces one op at full rate, so it has no check.
// Each: {what, override ({key: value} | null), check (text), saved, total: {cycles, estimate},
//        ranks: [{rank, cycles, estimate}], steps: [{rank, step, cycles, estimate}]}
// (full_cube_rate entries also carry op, and cycles and bound_cycles summed over its ranks). A rank's saving is spread
// over its steps in proportion to the steps' memory + compute (HBM), exposed collective (link)
// or kernel (one op) cycles; the total is the slowest rank's estimate.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

namespace probelab::sim {

/// a whole report.json with `perf` and `chip.params`; null when the chip parameters are missing.
nlohmann::json perf_what_if(const nlohmann::json& report, std::size_t n_ops = 3);

/// The lines `probelab perf` prints for it.
std::string perf_what_if_text(const nlohmann::json& what_if);

}  // namespace probelab::sim
