#include "sim/run/trace_flows.h"

#include <fmt/format.h>

namespace probelab::sim {

std::size_t add_anomaly_flows(chip::Trace& trace, const nlohmann::json& anomalies, const chip::ChipClock& clock) {
  if (!trace.enabled() || !anomalies.is_array()) return 0;
  // Two candidate times per anomaly for its ISR slice, looked up in one pass: the ISR read the
  // cycle counter some time into its slice; the cycle's start may precede it.
  auto usable = [](const nlohmann::json& a) {
    return a.is_object() && a.contains("latency_cycles") && a.contains("cycle") && a.contains("rank");
  };
  auto isr_cycle_of = [](const nlohmann::json& a) {
    return a["cycle"].get<std::uint64_t>() + a["latency_cycles"].get<std::uint64_t>();
  };
  std::vector<std::pair<std::uint32_t, std::uint64_t>> queries;
  for (const nlohmann::json& a : anomalies) {
    if (!usable(a)) continue;
    const std::uint32_t host = chip::Trace::kHostPid + a["rank"].get<std::uint32_t>();
    const std::uint64_t c = isr_cycle_of(a);
    queries.emplace_back(host, clock.cycles_to_ps(c));
    queries.emplace_back(host, clock.cycles_to_ps(c + 1) - 1);
  }
  const std::vector<std::optional<chip::Trace::Event>> found = trace.slices_at("isr", queries);
  std::size_t linked = 0;
  for (std::size_t i = 0; i < anomalies.size(); ++i) {
    const nlohmann::json& a = anomalies[i];
    if (!usable(a)) continue;
    const auto rank = a["rank"].get<std::uint32_t>();
    const std::uint32_t host = chip::Trace::kHostPid + rank;
    const std::uint64_t latch_ps = clock.cycles_to_ps(a["cycle"].get<std::uint64_t>());
    const std::uint64_t isr_cycle = isr_cycle_of(a);
    const std::optional<chip::Trace::Event> isr = found[2 * linked] ? found[2 * linked] : found[2 * linked + 1];
    // The entry is complete when the ISR returns: a 1 ns marker there (a flow in Chrome's trace
    // model needs distinct timestamps for its steps). An anomaly the runtime read outside an
    // interrupt (e.g. polled at a step end) has no ISR slice: its marker is at the read.
    const std::uint64_t entry_ps = isr ? isr->ts_ps + isr->dur_ps : clock.cycles_to_ps(isr_cycle);
    trace.complete(host, "report", fmt::format("anomalies[{}] {} {}", i, a.value("kind", "?"), a.value("op", "?")),
                   "exception", entry_ps, 1000,
                   {{"index", std::uint64_t{i}},
                    {"step", a.value("step", std::uint64_t{0})},
                    {"element", a.value("element", std::uint64_t{0})},
                    {"role", a.value("role", std::string())}});
    const std::string key = fmt::format("anomaly {}", i);
    trace.flow(key, rank, fmt::format("detect {}", a.value("kind", "?")), latch_ps);
    if (isr) trace.flow(key, host, "isr", isr->ts_ps);
    trace.flow(key, host, "report", entry_ps);
    ++linked;
  }
  return linked;
}

}  // namespace probelab::sim
