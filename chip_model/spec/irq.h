// Interrupt lines of one chip (bit positions in the IRQ registers of registers.h).
#pragma once

#include <cstdint>

namespace probelab::spec {

enum IrqLine : std::uint32_t {
  kIrqException = 1u << 0,    // the exception latch became valid
  kIrqCaptureFull = 1u << 1,  // a capture buffer became ready for draining
  kIrqStreamDone = 1u << 2,   // a task with kTaskFlagNotify completed
  kIrqBreakpoint = 1u << 3,   // a stream halted at a breakpoint task
  kIrqCollective = 1u << 4,   // a collective finished on this chip
};

inline constexpr std::uint32_t kIrqAll = 0x1F;

}  // namespace probelab::spec
