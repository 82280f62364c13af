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

/// Float status bits raised since the previous StepStatus record (kRegFloatStatus itself is not
/// touched).
struct StepStatus {
  std::uint32_t float_status = 0;  // spec::FloatStatusBits
  std::uint32_t reserved = 0;
};
static_assert(sizeof(StepStatus) == 8);

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
/// row-major). NaNs and Infs are excluded from min/max/mean/abs_mean/std/l2 and counted instead.
struct CaptureStats {
  double min = 0, max = 0, mean = 0, abs_mean = 0, std = 0, l2 = 0, max_abs = 0;
  std::uint64_t count = 0, nan_count = 0, inf_count = 0, zero_count = 0;
};
static_assert(std::is_trivially_copyable_v<CaptureStats>);

}  // namespace probelab::spec
