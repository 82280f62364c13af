// report.json's "hang" (schema: sim/run/report.h): what every rank was blocked in when the job
// hung (sim/platform/job_hang.h) and, where the run shows it, why the ranks' programs went apart.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/clock.h"
#include "sim/platform/job_hang.h"

namespace probelab::sim {

/// One partition's part: its blocked collectives (op names through `op_name(rank, op_id)`), the
/// ranks it simulates that did not complete, and when and how the hang was noticed there.
nlohmann::json hang_part(const JobHang& h, const std::function<std::string(std::uint32_t, std::uint32_t)>& op_name);

/// The parts merged into report.json's "hang": time and cycle (the first timeout of any
/// partition, else the last progress), noticed_by, waiting ranks, blocked (by rank), a one-line
/// summary and the explanation: ranks at different collectives under one call number, ranks
/// waiting for one whose program returned (when: `per_rank_cycles`, the report's
/// cycles.per_rank), and the first step whose loss-scaling skip decisions differ
/// (`loss_scaling`: the report's section, or null).
nlohmann::json merge_hang(const std::vector<nlohmann::json>& parts, const nlohmann::json& loss_scaling,
                          const nlohmann::json& per_rank_cycles, const chip::ChipClock& clock);

/// The hang for summary.txt and the console: a line per blocked rank (at most 8), then the
/// explanation; each line indented by two spaces.
std::string hang_text(const nlohmann::json& hang);

}  // namespace probelab::sim
