// Argument blocks of capture and breakpoint tasks (fixed layouts, little endian, in HBM).
// The argument block of compute kernels is defined by chip_model/spec/op_args.h.
#pragma once

#include <cstdint>
#include <type_traits>

namespace probelab::spec {

/// Dims a TensorRef holds (exported ONNX models reach rank 7: [N, C, d1..d5] losses).
inline constexpr int kMaxDims = 8;

/// A tensor in HBM: logical dims (outermost first) and the physical layout at `addr`.
struct TensorRef {
  std::uint64_t addr = 0;
  std::uint8_t dtype = 0;   // graph::DType
  std::uint8_t format = 0;  // graph::Format of the bytes at addr
  std::uint8_t rank = 0;
  std::uint8_t pad[5] = {};
  std::int64_t dims[kMaxDims] = {};
};
static_assert(sizeof(TensorRef) == 80);

/// TaskKind::Capture: copy (after conversion to ND/NCHW), summarize or hash one tensor into the
/// capture unit. The record header is stamped with the task's op id, task id and step.
struct CaptureArgs {
  TensorRef tensor;
  std::uint16_t payload = 1;       // CapturePayload
  std::uint16_t output_index = 0;  // slot of the tensor in the op (output index, or input index)
  std::uint8_t is_input = 0;
  std::uint8_t pad[3] = {};
};
static_assert(std::is_trivially_copyable_v<CaptureArgs>);

enum class StatField : std::uint8_t {
  Min, Max, Mean, AbsMean, Std, L2, MaxAbs, NanCount, InfCount, ZeroCount, Count,
  FiniteMin, FiniteMax, FiniteMaxAbs, FiniteMean, FiniteAbsMean
};
enum class CmpOp : std::uint8_t { Lt, Le, Gt, Ge, Eq, Ne };

struct PredicateClause {
  std::uint8_t field = 0;  // StatField
  std::uint8_t cmp = 0;    // CmpOp
  std::uint8_t pad[6] = {};
  double value = 0;
};

inline constexpr int kMaxClauses = 8;

/// TaskKind::Breakpoint: the vector unit computes CaptureStats of `tensor` and evaluates the
/// clauses (all of them when `any` is 0, at least one when 1). If the predicate holds, or
/// `halt_on_exception` is set and an exception was latched for this op id, the stream halts after
/// this task, kStreamHaltTask is set and kIrqBreakpoint is raised; the host resumes the stream
/// with kStreamResume. With zero clauses only the exception test applies.
struct BreakpointArgs {
  TensorRef tensor;
  std::uint32_t num_clauses = 0;
  std::uint32_t any = 0;
  std::uint32_t halt_on_exception = 0;
  std::uint32_t pad = 0;
  PredicateClause clauses[kMaxClauses];
};
static_assert(std::is_trivially_copyable_v<BreakpointArgs>);

}  // namespace probelab::spec
