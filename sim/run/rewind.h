// Rewind as an action (probes/probe_config.h: `rewind(...)` in a condition or rule). When one
// fires, the probe runtime records the request and the run stops after that step (pass 1); the
// runner then re-executes the run as a new simulation (SystemC cannot restart a kernel in one
// process) from the last checkpoint at or before the step — or from the start when the scenario
// takes no checkpoints — with the scenario's probes plus full (or statistics) capture of the inputs
// and outputs of the implicated ops (or of every op) at every re-executed step up to the anomaly's
// (pass 2). Pass 2 ends after that step (`stop`, default) or runs to the last step (`continue`); its
// own rewind actions request nothing. Injections and data are functions of the seed and the step,
// so pass 2 repeats pass 1 bit for bit up to the anomaly (compared: the losses of the common steps,
// and whether the same trigger fired again at the same op and step).
//
// Pass 2 is a run directory of its own, <out>/<scenario>/rewind/ (report.json with `rewind_of`,
// summary.txt, report.html, dumps, trace); pass 1's report.json links it:
//   rewind  {requested: {step, rank, by, expression, watch_point, op, tensor, capture, scope, then, ops},
//            pass: "rewind", status, from_step, from_checkpoint, to_step, ops (captured; "*" = all),
//            capture, reproduced, losses_compared, losses_identical, dump_entries, cycles, error?}
//   (null when no rewind fired). Pass 2's report.json: rewind_of {run: "..", requested: {...}}.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/run/runner.h"
#include "sim/scenario/scenario.h"

namespace probelab::sim {

struct RewindPlan {
  Scenario scenario;          // pass 2
  nlohmann::json request;     // the probe runtime's rewind request
  std::uint32_t from_step = 0, to_step = 0;
  bool from_checkpoint = false;
};

/// The re-execution pass 1 asks for (`result` holds `rewind_request`), or nullopt. `stage_dir` is
/// where pass 1 wrote its checkpoints.
std::optional<RewindPlan> plan_rewind(const Scenario& s, const nlohmann::json& result,
                                      const std::filesystem::path& stage_dir);

/// Runs pass 2 into <stage_dir>/rewind/ and returns pass 1's `rewind` section (`pass1`: pass 1's
/// result, of which it reads `losses`). A failed pass 2 is reported in the section (status
/// "error"), not thrown.
nlohmann::json run_rewind(const RewindPlan& plan, const nlohmann::json& pass1, const std::filesystem::path& stage_dir,
                          const RunOptions& opts, const std::function<void(const std::string&)>& progress);

}  // namespace probelab::sim
