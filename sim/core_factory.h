// The AI core model handed to every chip of the platform.
#pragma once

#include "chip_model/core_interface.h"

namespace probelab::sim {

chip::CoreFactory ai_core_factory();

}  // namespace probelab::sim
