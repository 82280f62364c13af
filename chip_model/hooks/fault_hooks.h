// Injection hooks of the chip model: the only way a fault injector acts on a simulated chip.
// Plain C++ (no SystemC). A Chip holds a non-owning `FaultHooks*` (nullptr = no faults); every
// site below calls the hook in the datapath, so injected values then propagate through the real
// arithmetic. Each method has a no-op default; an implementation overrides the ones it needs and
// reports them in sites() so that callers can skip the call (and any copy it would need) cheaply.
//
// Contract for callers (chip model units): call a hook only if `hooks && (hooks->sites() & bit)`,
// with the FaultSite of the work being done, from the thread doing it. Hooks are called in
// simulation order, which is deterministic; a hook must not wait or call SystemC.
// Contract for implementations: mutate only what the hook hands over, deterministically
// (seeded RNGs only), and log proof of application themselves (before/after bits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "graph/dtype.h"

namespace probelab::chip {

/// Where and when a hook is called. `cycle` is the device cycle of the chip at that point.
struct FaultSite {
  std::uint32_t rank = 0;
  std::uint32_t step = 0;
  std::uint32_t op_id = 0;
  std::uint32_t task_id = 0;
  std::uint32_t core = 0;
  std::uint32_t stream = 0;
  std::uint64_t cycle = 0;
};

/// Bits of FaultHooks::sites(): which hooks an implementation overrides.
enum FaultSiteBits : std::uint32_t {
  kFaultOpInput = 1u << 0,
  kFaultOpOutput = 1u << 1,
  kFaultGemmAccumulation = 1u << 2,
  kFaultHbmWord = 1u << 3,
  kFaultCaptureRecord = 1u << 4,
  kFaultInterrupt = 1u << 5,
  kFaultVectorLanes = 1u << 6,
  kFaultCoreBuffer = 1u << 7,
  kFaultRegisterRead = 1u << 8,
  kFaultCollective = 1u << 9,
  kFaultFusedInner = 1u << 10,
  kFaultPerf = 1u << 11,
  kFaultFloatStatus = 1u << 12,
};

/// How a Cube GEMM accumulates. The core fills it from the op's arguments and passes it to
/// on_gemm_accumulation(), which may change it; the core then computes with the result.
struct AccumulationMode {
  graph::DType acc_dtype = graph::DType::F32;  // F32 (Cube default, L0C) or F16
  /// Which FP16 accumulation rounding is modelled when acc_dtype is F16:
  /// false: correctly rounded RN16(acc + a*b) per step; true: FP32 add then round to FP16.
  bool f16_double_rounding = false;
  /// 0: K is reduced in one pass. n > 0: K is cut into chunks of n; each chunk's partial sum is
  /// rounded to `partial_dtype` before it is added to the running result (split-K).
  std::uint32_t split_k_chunk = 0;
  graph::DType partial_dtype = graph::DType::F16;
  /// Inputs are multiplied by this (exactly as a power of two when it is one) before the GEMM,
  /// as a bad loss scale would do. 1.0: unchanged.
  double input_scale = 1.0;
};

/// On-chip buffers of an AI core, for on_core_buffer().
enum class CoreBuffer : std::uint8_t { L1, L0A, L0B, L0C, UB };

/// What on_interrupt() decides for one raised line.
struct InterruptFault {
  bool drop = false;             // the interrupt message is lost (the raw bit still sets)
  std::uint64_t extra_delay_ps = 0;  // delivered this much later than the configured latency
};

/// One scheduled HBM word corruption: at `cycle`, the 8-byte word at `addr` (HBM address,
/// 8-aligned) is read through the backdoor, passed to on_hbm_word(), and written back.
struct HbmFaultPoint {
  std::uint64_t cycle = 0;
  std::uint64_t addr = 0;
};

/// Knobs of a collective an injector may override on one rank (the collective implementation
/// reads them before it starts; unset fields keep the task's own arguments).
struct CollectiveOverride {
  std::optional<std::uint32_t> algorithm;  // spec collective algorithm value
  std::optional<graph::DType> acc_dtype;   // accumulation dtype of the communication buffer
  std::vector<std::uint32_t> reduction_order;  // ranks, in the order this rank adds contributions
  std::uint64_t arrival_jitter_ps = 0;     // max extra delay drawn per incoming transfer
  std::uint64_t jitter_seed = 0;
  /// Set with `algorithm` on a member that only follows the algorithm forced on others of its
  /// group: a ring or tree task turned direct then adds in group order, so that the members the
  /// fault does not target still agree bit for bit, as ring and tree results do.
  bool follows_group = false;
};

/// Performance faults of one chip, asked once before the chip runs (on_perf_faults()); the
/// defaults are a healthy chip. Several injectors compose (fractions multiply).
struct PerfFaults {
  std::map<std::uint32_t, double> hbm_channel_fraction;  // HBM channel -> fraction of its bandwidth, (0, 1]
  double compute_slowdown = 1.0;  // Cube and Vector step cycles x this (>= 1): a slower clock or throttled cores
  std::map<std::uint32_t, double> core_slowdown;  // AI core id -> its Cube and Vector step cycles x this (>= 1)
  std::map<std::uint32_t, double> link_fraction;  // destination rank -> fraction of the outgoing link's bandwidth
  std::map<std::uint32_t, std::uint64_t> link_down_cycle;  // destination rank -> device cycle the outgoing link dies at
  std::uint64_t launch_delay_ps = 0;  // added to the dispatch of every task the chip's streams run
  bool any() const {
    return !hbm_channel_fraction.empty() || compute_slowdown != 1.0 || !core_slowdown.empty() || !link_fraction.empty() ||
           !link_down_cycle.empty() || launch_delay_ps != 0;
  }
};

/// What on_float_status() does to the chip's float status (spec/float_status.h) after a task.
struct FloatStatusFault {
  bool reset = false;       // another client of the device resets the status now (spec::kResetByOther)
  std::uint32_t raise = 0;  // FloatStatusBits raised now on this chip alone (an overflow only its data produced)
};

class FaultHooks {
 public:
  virtual ~FaultHooks() = default;

  /// FaultSiteBits of the hooks this implementation overrides.
  virtual std::uint32_t sites() const = 0;

  /// An op input tensor right after the core loaded it (logical desc, physical bytes as
  /// loaded; `index` = input index). Called once per op input per core that loads it.
  virtual void on_op_input(const FaultSite&, std::uint16_t /*index*/, const graph::TensorDesc&,
                           std::span<std::byte> /*bytes*/) {}
  /// An op output tensor (or the part a core computed, see `elem_offset`) right before it is
  /// stored to HBM; for a collective, this rank's result as its engine stores it. `elem_offset`
  /// is the linear row-major index of bytes[0]'s element in the op's logical output.
  virtual void on_op_output(const FaultSite&, std::uint16_t /*index*/, const graph::TensorDesc&,
                            std::uint64_t /*elem_offset*/, std::span<std::byte> /*bytes*/) {}
  /// Accumulation of a Cube GEMM (MatMul, Conv via im2col, ...) of the op at `site`.
  virtual void on_gemm_accumulation(const FaultSite&, AccumulationMode&) {}
  /// Inside a fused kernel: the FP32 result of inner op `inner_index` (named `inner_name` in the
  /// fused body), before the next inner op reads it. Values are logical row-major.
  virtual void on_fused_inner(const FaultSite&, std::uint32_t /*inner_index*/, const std::string& /*inner_name*/,
                              std::span<float> /*values*/) {}
  /// Called by the vector unit with a result block: element i of `bytes` went through lane
  /// (elem_offset + i) % lanes. A stuck-at fault forces bits on one lane.
  virtual void on_vector_lanes(const FaultSite&, const graph::TensorDesc&,
                               std::uint64_t /*elem_offset*/, std::uint32_t /*lanes*/,
                               std::span<std::byte> /*bytes*/) {}
  /// Contents of an on-chip buffer after a tile was loaded/computed into it.
  virtual void on_core_buffer(const FaultSite&, CoreBuffer, std::span<std::byte>) {}

  /// HBM words to corrupt on chip `rank`, queried once at the start of simulation.
  virtual std::vector<HbmFaultPoint> hbm_fault_schedule(std::uint32_t /*rank*/) { return {}; }
  /// The word at `addr` at the scheduled cycle (site.op_id/task_id are 0: no task context).
  virtual void on_hbm_word(const FaultSite&, std::uint64_t /*addr*/, std::uint64_t& /*word*/) {}

  /// A complete capture record (header + payload, CRC already computed) before it is written.
  virtual void on_capture_record(const FaultSite&, std::span<std::byte> /*record*/) {}
  /// Interrupt line `line` (one spec::IrqLine bit) is being raised on chip `site.rank`.
  virtual InterruptFault on_interrupt(const FaultSite&, std::uint32_t /*line*/) { return {}; }
  /// A host MMIO read of register `offset` returns `value` (may be changed).
  virtual void on_register_read(const FaultSite&, std::uint32_t /*offset*/, std::uint32_t& /*value*/) {}
  /// A collective task is about to run on rank `site.rank`.
  virtual void on_collective(const FaultSite&, CollectiveOverride&) {}
  /// A Kernel or Collective task completed on chip `site.rank`; `status` is the device's float
  /// status (kRegFloatStatus) now.
  virtual void on_float_status(const FaultSite&, std::uint32_t /*status*/, FloatStatusFault&) {}
  /// The performance faults of chip `rank` (asked once, before the simulation runs).
  virtual void on_perf_faults(std::uint32_t /*rank*/, PerfFaults&) {}
};

/// True if `hooks` is set and overrides the hook(s) in `bits`.
inline bool fault_wanted(const FaultHooks* hooks, std::uint32_t bits) {
  return hooks != nullptr && (hooks->sites() & bits) != 0;
}

}  // namespace probelab::chip
