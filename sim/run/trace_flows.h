// Links a run's report to its timeline: one "report" slice per latched anomaly on its host's
// "report" track (a 1 ns marker where the ISR that recorded it returned), and a flow latch (chip "detect <kind>", one track per exception kind) -> ISR (host "isr") -> report entry, so a viewer can
// follow an anomaly from the hardware to the report.json entry it became.
#pragma once

#include <nlohmann/json.hpp>

#include "chip_model/clock.h"
#include "chip_model/trace.h"

namespace probelab::sim {

/// `anomalies`: report.json's "anomalies" array (entries without "latency_cycles", e.g.
/// host-side conditions, have no latch and are skipped). Returns how many anomalies were linked.
std::size_t add_anomaly_flows(chip::Trace& trace, const nlohmann::json& anomalies, const chip::ChipClock& clock);

}  // namespace probelab::sim
