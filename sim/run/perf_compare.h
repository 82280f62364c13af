// `probelab compare --perf RUN_A RUN_B`: latency-regression localization between two runs'
// report.json `perf` sections (perf_report.h). Pure JSON in, JSON out.
//
//   {a, b (scenario names), threshold_pct,
//    total: {a, b, delta, pct}, ranks: [{rank, a, b, delta}] (program cycles),
//    steps: [{rank, step, a, b, delta, a_bound, b_bound}],
//    new_findings: [B's perf.findings that A does not have], gone_findings: [the reverse],
//    ops: [{rank, op, kind, a_cycles, b_cycles, a_launch, b_launch, a_probe, b_probe, added, share,
//           cause, why}]   the ops that got slower, most added cycles first,
//    only_a, only_b: ["rank R op"], regression (bool), verdict: {cause, component, added,
//    share_of_added_op_cycles, evidence} | null}
//
// An op's added cycles are the change of its own cycles + the host/dispatch gap before it
// (launch_cycles) + its probe tasks (probe_cycles); it got slower when they exceed 2% of its time
// in A and 50 cycles. share = added / the added program cycles of its rank (ops overlap, e.g. a
// collective under a kernel, so shares may add up to more than 1). Causes, per op, from the two
// runs' counters (the largest part of its added cycles decides):
//   tiling       tasks or cores changed (the op was split differently)
//   compute      Cube + Vector busy cycles per core up, or the rank is B's new straggler (throttled
//                cores: its memory-bound kernels slow down too)
//   hbm_channel  memory time up and B has a new slow-channel finding on the rank (names it)
//   core         B has a new throttled-core finding on the rank (names the core): per-core
//                averages barely move, but the op waits for that core's tiles
//   memory       HBM stall cycles per core up / achieved GB/s down, no channel or core named
//   link         a collective slower and B has a new slow-link finding (names the link)
//   straggler    a collective slower while B has a new straggler finding (names the rank)
//   contention   a collective slower and the links' wait (queued) cycles up, no slow link
//   communication  a collective slower, the link counters unchanged
//   launch       launch_cycles up;   capture: probe_cycles up
// regression: total cycles up by more than threshold_pct percent of A's. verdict: the cause with
// the most added cycles over the ops (ranks summed; causes one new finding of B explains are summed
// under it, perf_findings_explaining: compute + straggler under straggler, memory under
// hbm_channel, contention under link, core under core) and the component that finding names.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::sim {

/// a, b: whole report.json objects with a `perf` section (read_perf_report).
nlohmann::json compare_perf(const nlohmann::json& a, const nlohmann::json& b, double threshold_pct = 1.0);

/// The finding kinds (perf_findings.h causes) that explain an op cause of compare_perf, in the
/// order tried: the verdict sums the cause under the first one B newly has. Every finding kind
/// perf_findings() gives explains at least one cause; empty for causes no finding explains
/// (tiling, communication, capture).
const std::vector<std::string>& perf_findings_explaining(const std::string& cause);

/// The human table of compare_perf's result; at most `max_ops` op rows.
std::string compare_perf_text(const nlohmann::json& c, std::size_t max_ops = 20);

}  // namespace probelab::sim
