// The simulated system of one run: N chips (ranks), the multi-chip collective fabric, and one host
// CPU model per rank whose SimDevice talks TLM-2.0 to its chip. Elaborate once per process.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <systemc>

#include "chip_model/chip.h"
#include "chip_model/collective/collective_fabric.h"
#include "chip_model/core_interface.h"
#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/trace.h"
#include "sim/platform/host_model.h"

namespace probelab::sim {

struct PlatformOptions {
  chip::ChipConfig chip;
  std::uint32_t ranks = 1;
  chip::CoreFactory make_cores;          // the AI core model
  chip::FaultHooks* faults = nullptr;    // non-owning; nullptr: no faults
  chip::Trace* trace = nullptr;          // non-owning; required
  HostCosts host;
};

class Platform : public sc_core::sc_module {
 public:
  Platform(sc_core::sc_module_name name, const PlatformOptions& opts);
  ~Platform() override;

  std::uint32_t ranks() const { return static_cast<std::uint32_t>(chips_.size()); }
  chip::Chip& chip(std::uint32_t rank) { return *chips_.at(rank); }
  HostModel& host(std::uint32_t rank) { return *hosts_.at(rank); }
  /// nullptr for a single chip.
  chip::CollectiveFabric* fabric() { return fabric_.get(); }

  /// Runs the simulation until every host program returned (or one failed), then stops.
  /// Rethrows the first host program error (lowest rank first).
  void run();
  /// Simulated time when the last host program returned.
  sc_core::sc_time end_time() const { return end_time_; }

 private:
  std::vector<std::unique_ptr<chip::Chip>> chips_;
  std::unique_ptr<chip::CollectiveFabric> fabric_;
  std::vector<std::unique_ptr<HostModel>> hosts_;
  std::uint32_t finished_ = 0;
  sc_core::sc_time end_time_;
};

}  // namespace probelab::sim
