// Performance findings of one run, from its `perf` section (perf_report.h): which component is
// slow, measured against the chip's nominal figures, with evidence. Pure JSON in, JSON out.
//
//   perf.findings  [{cause, rank, score, evidence, ...}] best first (score in [0, 1], ties in
//                  the order below), one entry per slowed component:
//     hbm_channel  {channel, gbps, nominal_gbps, ops: [memory-bound ops of the rank, most HBM
//                  stall cycles first]} a channel whose bytes / busy time is below 90% of the
//                  nominal channel rate; score = 1 - gbps / nominal
//     link         {link (name), kind, src, dst (the chips at its ends, absent at a switch end),
//                  gbps, nominal_gbps, ops: [collectives of rank]} a link whose bytes / busy time is
//                  below 90% of its nominal rate; rank = src (dst at a switch port)
//     straggler    {busy_cycles, others_median_busy_cycles, kernel_cycles, waiting_ranks} the
//                  rank whose cores needed > 1.25x the median Cube + Vector busy cycles of the
//                  other ranks (PMU counters; data-parallel ranks do the same work) in multi-rank
//                  runs; the others' exposed collective time is its cost; score = 1 - median / its
//                  busy cycles
//     core         {core, pace, busy_cycles, tiles, ops} the AI core of a rank whose Cube + Vector
//                  time per tile is > 1.25x that of the median core of the ops it ran (perf.ranks
//                  cores[].pace, over >= 16 tiles): a throttled core; score = 1 - 1 / pace
//     launch       {ops (launch-bound ops), dispatch_cycles_per_task, nominal_cycles} a rank whose
//                  tasks took > 2x perf.chip.dispatch_cycles_nominal from fetch to start, on
//                  average (PMU dispatch_cycles / tasks); score = 1 - nominal / measured
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::sim {

/// The findings array for `perf` (perf.chip, perf.ops, perf.steps, perf.ranks, perf.links).
nlohmann::json perf_findings(const nlohmann::json& perf);

/// Every `cause` perf_findings() can give a finding, in the order above.
const std::vector<std::string>& perf_finding_causes();

}  // namespace probelab::sim
