// The float-overflow status as CANN's runtime exposes it on Atlas A2 (aclrtGetOverflowStatus /
// aclrtResetOverflowStatus): one status for the whole device (process-wide, not per stream or
// core), read asynchronously by a task that writes a 64-byte record into a device buffer the
// host then copies back, and cleared by a reset task. No SystemC here.
//
// Tasks (task.h):
//  - TaskKind::FloatStatusGet: args_addr = the 64-byte device buffer (args_size = 64). When the
//    task runs (every earlier task of its stream has completed) the device writes one
//    FloatStatusBuffer there through the HBM model. Other streams' tasks count too: the status
//    is the device's.
//  - TaskKind::FloatStatusReset: clears the status (kRegFloatStatus reads 0 afterwards).
//    Writing kRegFloatStatusClear clears bits as well; both count as a reset.
// The word CANN's integrations test is the first one (`overflow`); the counters after it are
// this model's: `resets` and `events` never go back to zero, so a host that remembers them can
// tell that another client reset the status between its own reset and its read, and whether an
// overflow happened in that interval although the status no longer shows it.
#pragma once

#include <cstdint>
#include <type_traits>

#include "chip_model/spec/registers.h"

namespace probelab::spec {

/// Status bits that count as an overflow (the `overflow` word; CANN's INF_NAN-mode overflow:
/// an Inf or NaN produced or read, a finite result beyond the format, a division by zero).
inline constexpr std::uint32_t kFsOverflowClass = kFsOverflow | kFsInvalid | kFsDivByZero | kFsNanInput | kFsInfInput;

/// Who cleared the status last (FloatStatusBuffer::last_reset_by): a stream index below
/// kNumStreams (a reset task on that stream), or one of these.
inline constexpr std::uint32_t kResetByRegister = 0xFFFF0000u;  // a write of kRegFloatStatusClear
inline constexpr std::uint32_t kResetByOther = 0xFFFF0001u;     // another client of the device (another process's runtime)

struct FloatStatusBuffer {
  std::uint32_t overflow = 0;        // 1 when status & kFsOverflowClass, else 0 (CANN: nonzero = overflow)
  std::uint32_t status = 0;          // FloatStatusBits raised since the last reset
  std::uint32_t resets = 0;          // resets since power-on, by every client (saturating)
  std::uint32_t events = 0;          // reports that raised a kFsOverflowClass bit since power-on (saturating, never reset)
  std::uint64_t cycle = 0;           // device cycle at which the record was written
  std::uint64_t last_reset_cycle = 0;
  std::uint32_t last_reset_by = 0;   // stream index, kResetByRegister or kResetByOther
  std::uint32_t reserved[7] = {};
};
static_assert(sizeof(FloatStatusBuffer) == 64);
static_assert(std::is_trivially_copyable_v<FloatStatusBuffer>);

}  // namespace probelab::spec
