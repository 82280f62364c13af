// report.json: the machine-readable result of one scenario run. Stable schema "probelab.report/1"
// (keys are written sorted; arrays in the documented order; no wall-clock time, no absolute paths
// outside the repository, so the same scenario and seed give the same bytes):
//
//   schema        "probelab.report/1"
//   status        "ok" | "error" (the simulation failed: `error` says why; expectations then fail)
//                 | "hang" (the simulated job hung: `hang` says where; `error` is its summary line)
//   passed        true when status is ok and every expectation held (a hang: a `hang` expectation
//                 held too; the others are evaluated on what the job did before)
//   hang          only when status is hang (sim/run/hang_report.h): {time_ps, cycle, noticed_by
//                 (the first host's synchronize timeout), waiting: [ranks that did not complete],
//                 blocked: [{rank, step, op, collective, comm, seq, waits_for, since_ps,
//                 since_cycle, conflict (another collective's message that reached it)}],
//                 lost: [{link, src, dst, comm, seq, at_ps, cycle}] (messages lost on dead links,
//                 link_down), explanation: [...], summary}; cycles.total and a waiting rank's
//                 cycles are then the hang's
//   scenario      {name, description, file, model, mode, ranks, steps}
//   seed          master seed
//   chip          {preset, overrides: {param: value}, params: {param: value (every parameter)}}
//   precision     {compute, master_weights, accumulation, overflow_mode}
//   cycles        {total, per_rank: [..], per_step: [[rank0 step cycles..], ..], baseline}
//                 device cycles from the start of the host program to its end (all ranks)
//   ops           [{op, type, rank, tasks, cycles, probe_tasks, probe_cycles}] device cycles of
//                 each executed op's tasks (kernels and collectives; its probe tasks apart), per
//                 rank, in executed (topological) order; the same with or without the trace
//   tasks         {kernel, collective, probe, barrier, in_kernel_statistics, in_kernel_dumps}
//                 counts summed over ranks (statistics records computed by kernel tasks, output
//                 dumps kernel tasks queued on the capture DMA engine)
//   anomalies     [{kind, op, op_type, tensor, element, coordinate, step, rank, cycle,
//                   latency_cycles, core, core_kind (ai_core | aic | aiv: the core whose work
//                   holds the element), role (source|propagation), source_op, propagation_path,
//                   call_stack, fused_from, float_status: [flag names at ISR time, raised since
//                   the status was last reset]}]
//                 exception latches, then
//                 [{kind: "condition", op, tensor, step, rank, condition, watch_point, actions,
//                   origin}] probe conditions that held
//   float_status  [{rank, step, flags: [overflow|underflow|invalid|nan_input|denormal|div_by_zero|inf_input]}]
//                 float-status bits raised during each step where any was (the register read
//                 and cleared at step end, or the step's status record under drain buffer_full)
//   loss_scaling  training.loss_scaling's decisions (sim/run/loss_scaling_report.h), else null
//   breakpoints, rules_fired   as the probe runtime reports them
//   injections    [{kind, descriptor, fired, proof: [...]}]
//   comparisons   [{op, op_type, step, rank, tensor, passed, metrics, reasons, inner_culprit,
//                   inner: [...]}]; comparisons_skipped: [{reason, count, example}] (why no
//                   reference replay was possible, e.g. "inputs not captured")
//   first_failing_op  the first op (step, then executed order) failing its comparison, or null
//   consistency   {checked, consistent, reference_rank, ranks, first_divergence: {op, step, edge,
//                  ranks, rank_diffs, tensor, max_abs_diff, basis} | null, divergences: [same, in
//                  (step, executed order)], per_step: [{step, max_abs_diff}], growing, comparisons,
//                  ops, missing}; rank_diffs: each divergent rank's own difference, parallel to
//                  ranks; ops: the ops compared across ranks, in executed order (a ReduceScatter's
//                  shards differ by design and are not among them)
//   diagnosis     [{op, cause, score, tensor, inner_op, forward_op, step, rank, evidence,
//                   suggestion}] best first
//   capture       {records, drained, dropped, corrupt, oversize, lost_in_corrupt_regions, bytes,
//                  device_bytes, stall_cycles, buffers, dump_files, dump_bytes, unaccounted,
//                  cycles_with_probes, cycles_without_probes, overhead_percent, total_overhead_percent}
//                 oversize: records larger than a capture buffer (dropped under either policy, in
//                 `dropped`); lost_in_corrupt_regions: records whose headers were destroyed (in
//                 `corrupt`); both also give a warning
//                 overhead against the same run without probes: overhead_percent over the step
//                 cycles (per rank the sum of its steps, the slowest rank: what a training step
//                 costs more), total_overhead_percent over the whole program (setup, the final
//                 drain of the capture buffers and the end-of-run fetches included)
//   variants      [{name, sets, status, cycles, capture, losses}]
//   losses        [[loss per step] per rank] (training)
//   replays       [{op, step, rank, kind, reproduced, detail}] CPU replays of ops that latched
//                 invalid/overflow, on their captured inputs (full capture with compare)
//   fingerprints  ["<hex>" per rank]: XXH64 over every capture record the runtime drained
//   quantization  per-layer saturation, flushed codes, amax and scales of the quantized Cube ops
//                 (sim/run/quant_report.h); null when nothing is quantized
//   warnings      [..]
//   expectations  [{index, kind, line, passed, expected, actual}]
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/prepared_run.h"

namespace probelab::sim {

inline constexpr const char* kReportSchema = "probelab.report/1";

/// Result of one variant run, for the report.
struct VariantOutcome {
  const PreparedRun* run = nullptr;
  nlohmann::json result;    // simulate()'s JSON of the variant
  nlohmann::json baseline;  // of its no-probe run (null: none)
};

/// Builds the report (without `expectations`/`passed`) from the main run's simulate() result
/// (whose sections it moves into the report) and its no-probe baseline (null when there is none).
nlohmann::json build_report(const PreparedRun& run, nlohmann::json result, const nlohmann::json& baseline,
                            const std::vector<VariantOutcome>& variants);

/// report.json's probe_config: {format: probelab | msprobe, source, mapping: [{from, to, note}]}.
nlohmann::json probe_config_json(const probes::ProbeConfig& cfg);
/// An msprobe translation's mapping, one "from -> to  # note" line per key, each after `indent`
/// with `from` padded to `width` ("(nothing)" for a key with no equivalent).
std::string mapping_text(const nlohmann::json& mapping, std::string_view indent, std::size_t width);

/// Evaluates the scenario's expectations against the report, adds `expectations` and `passed`.
void add_expectations(nlohmann::json& report, const Scenario& s);

/// Human summary (summary.txt and the failure listing on stdout).
std::string summary_text(const nlohmann::json& report);

/// Capture overhead in percent: (with - without) / without * 100; null when without is 0.
nlohmann::json overhead_percent(std::uint64_t with, std::uint64_t without);

}  // namespace probelab::sim
