// One simulation of a prepared scenario, run inside a (forked) child process: elaborates the
// platform (chips, fabric, host models), creates the probe runtime and the host executor of every
// rank, runs the host programs to completion and returns the raw result as JSON (the sections of
// report.json that come from the run: cycles, ops, tasks, anomalies, comparisons, consistency,
// diagnosis, capture, injections, losses, warnings; see sim/run/report.h). Writes trace.json, the
// probe runtime's dumps and the fetched outputs under `out_dir` as requested.
// Elaborates SystemC: call at most once per process.
//
// A distributed run splits this in two: every partition runs simulate_partition() for its chips
// (each in its own process and SystemC kernel, synchronised through `link`), and one process
// merges the partitions' results with merge_partitions(). One process does both for its single
// partition, so the result is the same bytes either way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/collective/cluster_topology.h"
#include "chip_model/trace.h"
#include "sim/platform/partition_link.h"
#include "sim/run/probe_codec.h"
#include "sim/scenario/prepared_run.h"

namespace probelab::sim {

struct SimRequest {
  const PreparedRun* run = nullptr;
  bool probes = true;          // false: the no-probe baseline
  std::filesystem::path out_dir;
  bool trace = false;          // record and write the trace (trace.json / trace.pftrace)
  std::vector<chip::Trace::Format> trace_formats{chip::Trace::Format::Json};
  /// Steps [first, last] of each rank only (chip::Trace::set_step_window); none: every step.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> trace_steps;
  bool save_outputs = false;   // write outputs/rank<r>/<tensor>.npy
  /// Sees every hook call after the scenario's injectors (chip::HooksTee); must not change data.
  chip::FaultHooks* observer = nullptr;
  /// Distributed run: the partition map, this partition and its link to the coordinator.
  const chip::PartitionMap* partition = nullptr;
  std::uint32_t process = 0;
  PartitionLink* link = nullptr;
};

/// What one partition contributes to the result (per rank sections, its trace events, its probe
/// runtimes' reports), as bytes that cross processes.
struct PartitionResult {
  nlohmann::json data;
  std::vector<std::uint8_t> trace;   // chip::Trace::serialize()
  std::vector<std::uint8_t> probes;  // encode_probe_results()
  /// In the process that merges: the same, not encoded (then `trace` and `probes` are empty).
  std::shared_ptr<chip::Trace> live_trace;
  std::shared_ptr<ProbeRankResults> live_probes;
  /// The encoded form (live parts encoded first).
  std::vector<std::uint8_t> encode() const;
  /// Throws std::runtime_error on malformed bytes.
  static PartitionResult decode(const std::vector<std::uint8_t>& bytes);
};

/// Simulates the chips of this partition (all of them without a partition map). Throws on a
/// host program error, bad input found at run time, or a run that cannot finish. The trace and
/// probe results stay live (not encoded) unless req.link is set.
PartitionResult simulate_partition(const SimRequest& req);
/// The simulate() result from every partition's result (any order); writes trace.json.
nlohmann::json merge_partitions(const SimRequest& req, std::vector<PartitionResult> parts);
/// One process: merge_partitions(req, {simulate_partition(req)}).
nlohmann::json simulate(const SimRequest& req);

/// File-name form of a tensor name (probes::file_stem: '/' -> '.', other characters outside
/// [A-Za-z0-9._-] -> '_', a long name shortened with a hash of it).
std::string sanitize_name(const std::string& name);

/// Files of fetched outputs (outputs/rank<r>/): "<sanitized>.npy", and "<sanitized>#<n>.npy" for
/// the n-th name (in the order given) that sanitizes to a file already taken ("a/b" and "a.b").
std::map<std::string, std::string> output_file_names(const std::vector<std::string>& tensors);

}  // namespace probelab::sim
