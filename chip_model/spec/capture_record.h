// Layout of one record written by the debug capture unit into a ping-pong buffer. Records are
// packed back to back, each 8-byte aligned; a buffer handed to the host holds whole records only.
#pragma once

#include <cstdint>
#include <type_traits>

namespace probelab::spec {

inline constexpr std::uint32_t kCaptureMagic = 0x50524F42;  // "PROB"

enum class CapturePayload : std::uint16_t {
  Statistics = 1,  // payload: CaptureStats
  FullTensor = 2,  // payload: the tensor's elements, converted to NCHW/ND by the device
  Hash = 3,        // payload: std::uint64_t digest (XXH64-style, seed 0) of the raw element bytes
  StepStatus = 4,  // payload: StepStatus (kTaskFlagStatusRecord); op_id/task_id/step of that task
};

/// What the detection circuit saw since the previous StepStatus record (kRegFloatStatus and the
/// latches themselves are not touched): the float status bits raised, and per exception kind the
/// reports that were not latched (their latch was full or the kind's per-step limit was spent).
/// A step whose record shows no suppressed report of a kind had every report of that kind latched.
struct StepStatus {
  std::uint32_t float_status = 0;      // spec::FloatStatusBits
  std::uint32_t suppressed_kinds = 0;  // bit k: suppressed[k] > 0
  std::uint32_t suppressed[8] = {};    // per spec::ExcKindBit (saturating); entries >= kExcKindCount are 0
};
static_assert(sizeof(StepStatus) == 40);

struct CaptureRecordHeader {
  std::uint32_t magic = kCaptureMagic;
  std::uint32_t record_bytes = 0;   // header + payload + padding to 8
  std::uint32_t seq = 0;            // per-chip sequence number of produced records (gaps = dropped)
  std::uint32_t op_id = 0;
  std::uint32_t task_id = 0;
  std::uint32_t step = 0;
  std::uint32_t rank = 0;
  std::uint16_t output_index = 0;   // which tensor of the op (see CaptureArgs::tensor_slot)
  CapturePayload payload = CapturePayload::Statistics;
  std::uint8_t dtype = 0;           // graph::DType of the captured tensor
  std::uint8_t format = 0;          // graph::Format of the payload (ND/NCHW after device conversion)
  std::uint8_t rank_dims = 0;       // number of dims used below
  std::uint8_t is_input = 0;        // 1: an op input was captured (breakpoint full dumps)
  std::int64_t dims[6] = {};
  std::uint64_t cycle = 0;          // device cycle when the record was produced
  std::uint32_t payload_bytes = 0;
  std::uint32_t checksum = 0;       // CRC-32 of the payload bytes
};
static_assert(std::is_trivially_copyable_v<CaptureRecordHeader>);

/// Statistics computed on the vector unit over the logical elements (FP64 accumulation order:
/// row-major), definitions in capture_math.h. min/max/mean/abs_mean/std/l2/max_abs follow numpy
/// over every element (NaN when a NaN is present; an Inf makes max_abs, abs_mean and l2 Inf);
/// the finite_* variants cover the finite elements only; NaNs and Infs are also counted.
struct CaptureStats {
  double min = 0, max = 0, mean = 0, abs_mean = 0, std = 0, l2 = 0, max_abs = 0;
  std::uint64_t count = 0, nan_count = 0, inf_count = 0, zero_count = 0;
  double finite_min = 0, finite_max = 0, finite_max_abs = 0, finite_mean = 0, finite_abs_mean = 0;
};
static_assert(std::is_trivially_copyable_v<CaptureStats>);
static_assert(sizeof(CaptureStats) == 128);

}  // namespace probelab::spec
