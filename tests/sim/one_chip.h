// A one-chip platform (ascend910b, no trace) for tests that drive the device through the host
// executor: run_on_one_chip(program) elaborates it, runs `program` as the host's program with the
// chip's Device, and returns when the simulation ends.
#pragma once

#include <functional>
#include <memory>

#include "chip_model/chip_config.h"
#include "chip_model/trace.h"
#include "sim/platform/core_factory.h"
#include "sim/platform/platform.h"

namespace probelab::sim {

inline void run_on_one_chip(const std::function<void(probes::Device&)>& program) {
  chip::Trace trace(false);
  PlatformOptions po;
  po.chip = chip::chip_preset("ascend910b");
  po.ranks = 1;
  auto cores = std::make_shared<AiCoreSet>();
  po.make_cores = ai_core_factory(cores);
  po.trace = &trace;
  Platform platform("platform", po);
  platform.host(0).set_program([&] { program(platform.host(0).device()); });
  platform.run();
}

}  // namespace probelab::sim
