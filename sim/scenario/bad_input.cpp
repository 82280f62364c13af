#include "sim/scenario/bad_input.h"

#include "chip_model/chip_config.h"
#include "graph/graph.h"
#include "injectors/params.h"
#include "probes/dump_writer.h"
#include "probes/probe_config.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

bool is_bad_input(const std::exception& e) {
  return dynamic_cast<const ScenarioError*>(&e) != nullptr ||
         dynamic_cast<const chip::ConfigError*>(&e) != nullptr ||
         dynamic_cast<const probes::ConfigError*>(&e) != nullptr ||
         dynamic_cast<const graph::GraphError*>(&e) != nullptr ||
         dynamic_cast<const inject::InjectorError*>(&e) != nullptr ||
         dynamic_cast<const probes::DumpError*>(&e) != nullptr;
}

}  // namespace probelab::sim
