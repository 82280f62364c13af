#include "sim/run/resources.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "graph/format.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

namespace {

constexpr std::uint64_t kBlockAlign = 512;         // the executor's tensor alignment
constexpr std::uint64_t kFixedHbm = 16ull << 20;   // stream rings, argument blocks, status buffers
constexpr std::uint64_t kFixedHost = 96ull << 20;  // the process itself: SystemC, the graphs, code

std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

std::uint64_t add_sat(std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
std::uint64_t mul_sat(std::uint64_t a, std::uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

}  // namespace

std::string format_bytes(std::uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / (1ull << 10));
  return fmt::format("{} bytes", b);
}

std::string ResourceEstimate::str() const {
  return fmt::format("HBM {} per chip, host ~{}", format_bytes(hbm_bytes_per_rank), format_bytes(host_bytes));
}

ResourceEstimate estimate_resources(const PreparedRun& run) {
  ResourceEstimate e;
  std::uint64_t tensors = 0;
  for (const auto& [name, info] : run.workload.snapshots.fused.tensors()) {
    const std::uint64_t bytes = std::max<std::uint64_t>(64, graph::physical_nbytes(info.desc));
    tensors = add_sat(tensors, round_up(bytes, kBlockAlign));
  }
  std::uint64_t capture = 0;
  if (run.probes) capture = mul_sat(run.probes->capture.buffer_bytes, run.probes->capture.ping_pong ? 2 : 1);
  e.hbm_bytes_per_rank = add_sat(add_sat(tensors, capture), kFixedHbm);
  // Per rank: the HBM backing store (only touched pages, at most the estimate) and about one host
  // copy of the tensors (feeds, fetched results, reference values); then the comparison store.
  const auto ranks = static_cast<std::uint64_t>(std::max(1, run.scenario.ranks));
  std::uint64_t host = mul_sat(add_sat(e.hbm_bytes_per_rank, tensors), ranks);
  if (run.probes && run.probes->compare.enabled) host = add_sat(host, run.probes->compare.max_store_bytes);
  // A resumed run holds every rank's checkpoint values (read before it starts) while it runs.
  for (const auto& [rank, values] : run.resume_values)
    for (const auto& [name, t] : values) host = add_sat(host, t.nbytes());
  e.host_bytes = add_sat(host, kFixedHost);
  return e;
}

std::uint64_t available_host_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t value = 0;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:") return mul_sat(value, 1024);
  return 0;
}

void check_resources(const PreparedRun& run, int jobs, std::uint64_t host_limit) {
  const ResourceEstimate e = estimate_resources(run);
  const Scenario& s = run.scenario;
  const std::string who = run.variant.empty() ? fmt::format("scenario '{}'", s.name)
                                              : fmt::format("scenario '{}' variant '{}'", s.name, run.variant);
  if (e.hbm_bytes_per_rank > run.chip.hbm_bytes)
    throw ScenarioError(s.file.string(), 0, 0, "chip.overrides.hbm_bytes",
                        fmt::format("a model that fits the chip's HBM ({} of {}; reduce the model's shapes or raise "
                                    "chip.overrides.hbm_bytes)",
                                    format_bytes(run.chip.hbm_bytes), who),
                        fmt::format("an estimated {} per chip", format_bytes(e.hbm_bytes_per_rank)));
  const std::uint64_t limit = host_limit ? host_limit : available_host_memory();
  const std::uint64_t need = mul_sat(e.host_bytes, static_cast<std::uint64_t>(std::max(1, jobs)));
  if (limit && need > limit)
    throw ScenarioError(s.file.string(), 0, 0, "",
                        fmt::format("a run that fits the host memory ({} {}; {} simulation(s) at once; fewer --jobs, "
                                    "smaller shapes or fewer ranks)",
                                    format_bytes(limit), host_limit ? "allowed by --host-memory" : "available", jobs),
                        fmt::format("an estimated {} for {} ({} per simulation)", format_bytes(need), who,
                                    format_bytes(e.host_bytes)));
}

}  // namespace probelab::sim
