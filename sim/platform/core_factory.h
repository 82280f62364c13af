// The AI core model handed to every chip of the platform, and access to each chip's AiCore (its
// per-op records give the simulated cycles of every executed compute op).
#pragma once

#include <memory>
#include <vector>

#include "chip_model/ai_core.h"
#include "chip_model/core_interface.h"

namespace probelab::sim {

/// Collects the AiCore of every chip (indexed by rank) as the chips create them.
struct AiCoreSet {
  std::vector<chip::AiCore*> by_rank;
};

/// A factory for Chip::Options::make_cores that records each created AiCore in `set`.
chip::CoreFactory ai_core_factory(std::shared_ptr<AiCoreSet> set, chip::AiCoreOptions opts = {});

}  // namespace probelab::sim
