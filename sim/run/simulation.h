// One simulation of a prepared scenario, run inside a (forked) child process: elaborates the
// platform (chips, fabric, host models), creates the probe runtime and the host executor of every
// rank, runs the host programs to completion and returns the raw result as JSON (the sections of
// report.json that come from the run: cycles, ops, tasks, anomalies, comparisons, consistency,
// diagnosis, capture, injections, losses, warnings; see sim/run/report.h). Writes trace.json, the
// probe runtime's dumps and the fetched outputs under `out_dir` as requested.
// Elaborates SystemC: call at most once per process.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/trace.h"
#include "sim/scenario/prepared_run.h"

namespace probelab::sim {

struct SimRequest {
  const PreparedRun* run = nullptr;
  bool probes = true;          // false: the no-probe baseline
  std::filesystem::path out_dir;
  bool trace = false;          // record and write the trace (trace.json / trace.pftrace)
  std::vector<chip::Trace::Format> trace_formats{chip::Trace::Format::Json};
  bool save_outputs = false;   // write outputs/rank<r>/<tensor>.npy
  /// Sees every hook call after the scenario's injectors (chip::HooksTee); must not change data.
  chip::FaultHooks* observer = nullptr;
};

nlohmann::json simulate(const SimRequest& req);

/// File-name form of a tensor name: '/' -> '.', other characters outside [A-Za-z0-9._-] -> '_'.
std::string sanitize_name(const std::string& name);

/// Files of fetched outputs (outputs/rank<r>/): "<sanitized>.npy", and "<sanitized>#<n>.npy" for
/// the n-th name (in the order given) that sanitizes to a file already taken ("a/b" and "a.b").
std::map<std::string, std::string> output_file_names(const std::vector<std::string>& tensors);

}  // namespace probelab::sim
