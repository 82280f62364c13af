// A profiler over the chip's performance monitoring unit (spec::kRegPmuBase): it reads the
// counter bank through Device only (one MMIO burst per snapshot, as a driver would) and keeps
// what each step cost. The same code runs against SimDevice, FakeDevice or a real driver.
//
// Cost: each snapshot is one MMIO burst read (PCIe round trip), charged by the Device.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/spec/registers.h"
#include "probes/device.h"

namespace probelab::probes {

/// One read of the PMU bank: counters[spec::PmuCounter].
struct PmuSnapshot {
  std::array<std::uint64_t, spec::kPmuCounters> counters{};
  std::uint64_t operator[](spec::PmuCounter c) const { return counters[c]; }
  /// Counter-wise this - earlier (kPmuCycle becomes the interval's length).
  PmuSnapshot since(const PmuSnapshot& earlier) const;
};

/// Reads the whole bank in one burst.
PmuSnapshot read_pmu(Device& dev);

/// Stable JSON names of the counters, indexed by spec::PmuCounter ("cycles", "kernel_ops", ...).
const std::array<const char*, spec::kPmuCounters>& pmu_counter_names();
/// {name: value} of every counter.
nlohmann::json pmu_json(const PmuSnapshot& s);

class PerfProfiler {
 public:
  explicit PerfProfiler(Device& dev) : dev_(dev) {}
  /// Call at a step's start and end (in order, one step at a time).
  void step_begin(std::uint32_t step);
  void step_end(std::uint32_t step);

  struct StepCounters {
    std::uint32_t step = 0;
    PmuSnapshot delta;  // counters of the interval [step start, step end]
  };
  const std::vector<StepCounters>& steps() const { return steps_; }

 private:
  Device& dev_;
  PmuSnapshot begin_;
  bool open_ = false;
  std::uint32_t open_step_ = 0;
  std::vector<StepCounters> steps_;
};

}  // namespace probelab::probes
