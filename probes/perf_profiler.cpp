#include "probes/perf_profiler.h"

#include <stdexcept>

#include <fmt/format.h>

namespace probelab::probes {

PmuSnapshot PmuSnapshot::since(const PmuSnapshot& earlier) const {
  PmuSnapshot d;
  for (std::size_t i = 0; i < counters.size(); ++i)
    d.counters[i] = counters[i] >= earlier.counters[i] ? counters[i] - earlier.counters[i] : 0;
  return d;
}

PmuSnapshot read_pmu(Device& dev) {
  std::array<std::uint32_t, spec::kPmuWords> words{};
  dev.read_regs(spec::kRegPmuBase, words);
  PmuSnapshot s;
  for (std::uint32_t i = 0; i < spec::kPmuCounters; ++i)
    s.counters[i] = std::uint64_t{words[2 * i]} | (std::uint64_t{words[2 * i + 1]} << 32);
  return s;
}

const std::array<const char*, spec::kPmuCounters>& pmu_counter_names() {
  static const std::array<const char*, spec::kPmuCounters> n = {
      "cycles",           "kernel_ops",      "kernel_cycles",     "cube_busy_cycles",
      "vector_busy_cycles", "mte_busy_cycles", "hbm_read_bytes",    "hbm_write_bytes",
      "l2_read_bytes",    "cube_flops",      "hbm_stall_cycles",  "collective_ops",
      "collective_cycles", "event_wait_cycles", "capture_stall_cycles", "dispatch_cycles"};
  return n;
}

nlohmann::json pmu_json(const PmuSnapshot& s) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t i = 0; i < s.counters.size(); ++i) j[pmu_counter_names()[i]] = s.counters[i];
  return j;
}

void PerfProfiler::step_begin(std::uint32_t step) {
  if (open_) throw std::logic_error(fmt::format("profiler: step {} begins inside step {}", step, open_step_));
  begin_ = read_pmu(dev_);
  open_ = true;
  open_step_ = step;
}

void PerfProfiler::step_end(std::uint32_t step) {
  if (!open_ || open_step_ != step) throw std::logic_error(fmt::format("profiler: step {} ends but was not begun", step));
  steps_.push_back({step, read_pmu(dev_).since(begin_)});
  open_ = false;
}

}  // namespace probelab::probes
