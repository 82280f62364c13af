// report.json `perf`: performance counters per op, per step and per rank, each op's bound and
// roofline position, and per step where the time went along its critical path.
//
// Sources: the AI cores' op records (chip::OpRecord) and the stream engines' task records for
// ops, folded per rank as they complete (perf_ledger.h); the chips' PMUs (spec::kRegPmuBase) at the end of the run for ranks; the probe-side
// profiler (probes/perf_profiler.h, scenario `profile: true`, reading the PMU through Device) for
// steps' counters. Schema (all cycles are device cycles, bytes are bytes, GB/s = 1e9 B/s):
//
//   perf.chip   {clock_mhz, cores, peak_flops_per_cycle (Cube, all cores), hbm_bytes_per_cycle
//                (min(HBM, cores x MTE port)), ridge_flops_per_byte, hbm_channel_gbps,
//                link_bandwidth_gbps, dispatch_cycles_nominal (task_dispatch_ns + hbm_latency_ns: one
//                descriptor fetch and dispatch) (nominal figures of the config)}
//   perf.findings  [{cause, rank, ..., score, evidence}] best first: see perf_findings.h
//   perf.ops    [{op, type, rank, kind (kernel|collective), tasks, cycles, cores, launch_cycles,
//                 probe_cycles, counters: {cube_busy_cycles, vector_busy_cycles, mte_busy_cycles,
//                 hbm_read_bytes, hbm_write_bytes, l2_read_bytes, flops, hbm_stall_cycles},
//                 hbm_gbps, utilization: {cube, vector, mte} (busy / (cycles x cores); MTE busy
//                 counts the load and the store engines, so mte may exceed 1),
//                 intensity (FLOP per HBM byte), roofline: {compute_cycles, memory_cycles,
//                 bound_cycles, efficiency (bound_cycles / cycles)}, bound, evidence}]
//                per (rank, op) summed over steps, in (rank, executed order); probe ops excluded.
//                bound: "launch" when the host/dispatch gap before the op's tasks exceeds the op's
//                own cycles, "capture" when its probe tasks took longer than it, "communication"
//                for collectives, else "memory" when the MTEs were the busiest unit per core,
//                else "compute". A memory-bound op's evidence compares its intensity with the
//                ridge: below it, or at/above it with the reason the MTE still took longer (the L2
//                re-reads of its tiles, which the HBM intensity does not count, or HBM waits).
//   perf.steps  [{rank, step, cycles, critical_path: {compute, memory, communication, launch,
//                 capture, other}, kernel_cycles, collective_cycles, exposed_collective_cycles,
//                 overlapped_collective_cycles, bound, top_op, counters (profiler) | null}]
//                critical_path splits the step's wall time: intervals covered by kernels go to
//                their op's bound (compute|memory), collective time not overlapped by a kernel
//                to communication, probe tasks to capture, gaps to launch (host and dispatch).
//   perf.ranks  [{rank, cycles, tasks (every kind), counters (PMU at the end), derived: {cube_utilization,
//                 vector_utilization, mte_utilization (busy / (cycles x cores)), hbm_gbps, intensity}}]
//                 hbm_channels: [{channel, bytes, busy_cycles, gbps (bytes / busy time)}]
//                 cores: [{core, busy_cycles (Cube + Vector), tiles, pace (busy / the busy time at
//                 the pace of each op's median core: ~1 healthy, ~f for a core f times slower)}]
//                (steps' counters carry the same `derived` over the step)
//   perf.links  [{link (name), kind (hccs|nic|switch_port|leaf_up|spine_down), src, dst (the
//                 chips at its ends; absent at a switch end), bandwidth_gbps (nominal), bytes,
//                 transfers, busy_cycles, wait_cycles, utilization (busy / run), achieved_gbps
//                 (bytes / busy time)}] multi-rank runs, in topology order
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/ai_core.h"
#include "chip_model/chip_config.h"
#include "chip_model/perf_monitor.h"
#include "chip_model/stream_engine.h"
#include "graph/graph.h"
#include "probes/perf_profiler.h"
#include "sim/run/perf_ledger.h"

namespace probelab::sim {

struct PerfRank {
  const graph::Graph* graph = nullptr;
  const PerfLedger* ledger = nullptr;                                    // may be null
  chip::PerfMonitor::Counters counters{};                               // PMU at the end
  std::uint64_t cycles = 0;                                             // the rank's program
  std::vector<std::pair<std::uint64_t, std::uint64_t>> steps;           // [begin, end) cycles per step
  std::uint32_t first_step = 0;
  const probes::PerfProfiler* profiler = nullptr;                       // may be null
  std::vector<std::pair<std::uint64_t, std::uint64_t>> hbm_channels;    // per channel: bytes, busy ps
  const std::map<std::uint32_t, chip::AiCore::CoreLoad>* cores = nullptr;  // per AI core (may be null)
};

/// One direction of a link of the cluster network and what it carried.
struct PerfLink {
  std::uint32_t id = 0;                      // topology link id (the order of perf.links)
  std::string name, kind;                    // ClusterTopology::link_name, link_kind_name
  std::optional<std::uint32_t> src, dst;     // the chips at its ends (a switch end has none)
  double nominal_gbps = 0;
  std::uint64_t bytes = 0, transfers = 0, busy_ps = 0, wait_ps = 0;
};

/// The part of `perf` one simulation partition knows: {ops, steps, ranks} of its ranks and the
/// links it owns (each with id and busy_ps, finished by perf_section). JSON, so that it travels
/// with the partition's result.
nlohmann::json perf_partition(const chip::ChipConfig& chip, const std::map<std::uint32_t, PerfRank>& ranks,
                              const std::vector<PerfLink>& links = {});

/// The `perf` section from every partition's part; `run_ps` is the run's length (link
/// utilization is over it).
nlohmann::json perf_section(const chip::ChipConfig& chip, std::vector<nlohmann::json> parts, std::uint64_t run_ps);

/// perf.ops as CSV (one header line, one row per op).
std::string perf_ops_csv(const nlohmann::json& perf);

}  // namespace probelab::sim
