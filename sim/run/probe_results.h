// Converts the probe runtime's job report (every rank's RuntimeReport, the cross-rank
// consistency result and the combined diagnosis) into the report.json sections of sim/run/report.h:
// anomalies (exception latches, then conditions that held), breakpoints, rules_fired,
// comparisons (+ comparisons_skipped, first_failing_op), consistency, diagnosis, capture.
#pragma once

#include <nlohmann/json.hpp>

#include "graph/graph.h"
#include "probes/probe_runtime.h"

namespace probelab::sim {

/// Adds the sections to `res`; runtime warnings go to res["probe_warnings"].
/// Names of the set kRegFloatStatus bits (spec::FloatStatusBits), lowest bit first.
nlohmann::json float_status_names(std::uint32_t bits);

void merge_probe_results(nlohmann::json& res, const probes::JobReport& job, const graph::Graph& executed);

}  // namespace probelab::sim
