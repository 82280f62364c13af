#include "sim/platform/core_factory.h"

namespace probelab::sim {

chip::CoreFactory ai_core_factory(std::shared_ptr<AiCoreSet> set, chip::AiCoreOptions opts) {
  return [set, opts](const char* name, const chip::ChipServices& services) {
    chip::AiCore* core = nullptr;
    auto exec = chip::AiCore::factory(opts, &core)(name, services);
    if (set->by_rank.size() <= services.rank) set->by_rank.resize(services.rank + 1, nullptr);
    set->by_rank[services.rank] = core;
    return exec;
  };
}

}  // namespace probelab::sim
