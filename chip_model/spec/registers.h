// The register map of one chip, as a host driver sees it through BAR0 (32-bit registers,
// byte offsets). This is the whole hardware contract between chip_model and a driver: the
// probe runtime programs against it and nothing else. No SystemC here.
#pragma once

#include <cstdint>

namespace probelab::spec {

// ---- Identification and global control -----------------------------------------------------
inline constexpr std::uint32_t kRegChipId = 0x0000;      // RO: rank of this chip in the job
inline constexpr std::uint32_t kRegVersion = 0x0004;     // RO: 0x00010000 = contract v1.0
inline constexpr std::uint32_t kRegNumCores = 0x0008;    // RO
inline constexpr std::uint32_t kRegClockMhz = 0x000C;    // RO
inline constexpr std::uint32_t kRegCycleLo = 0x0010;     // RO: free-running cycle counter (low word latches high)
inline constexpr std::uint32_t kRegCycleHi = 0x0014;     // RO
inline constexpr std::uint32_t kRegFpMode = 0x0020;      // RW: FpModeBits
inline constexpr std::uint32_t kRegStep = 0x0024;        // RW: training step tag stamped on latches and captures

enum FpModeBits : std::uint32_t {
  kFpModeSaturation = 1u << 0,  // 1: SATURATION (Inf -> +-max finite, NaN -> 0); 0: INF_NAN (IEEE 754).
                                // Reads as 1 on a chip without INF_NAN (ChipConfig::supports_inf_nan)
  kFpModeFlushDenormals = 1u << 1,  // 1: flush denormal inputs and outputs to zero
};

// ---- Float status: sticky OR of every core's exception flags since the last clear ------------
inline constexpr std::uint32_t kRegFloatStatus = 0x0100;       // RO: FloatStatusBits
inline constexpr std::uint32_t kRegFloatStatusClear = 0x0104;  // WO: write bits to clear (W1C); counts as a reset
inline constexpr std::uint32_t kRegFloatStatusResets = 0x0108;  // RO: resets since power-on (float_status.h)
inline constexpr std::uint32_t kRegFloatStatusEvents = 0x010C;  // RO: overflow-class reports since power-on

enum FloatStatusBits : std::uint32_t {
  kFsOverflow = 1u << 0,   // a result overflowed the output format
  kFsUnderflow = 1u << 1,  // a result was tiny (denormal or flushed) and inexact
  kFsInvalid = 1u << 2,    // NaN produced from non-NaN operands (0*Inf, Inf-Inf, sqrt(-1), ...)
  kFsNanInput = 1u << 3,   // a NaN operand was read
  kFsDenormal = 1u << 4,   // a denormal operand was read or a denormal produced
  kFsDivByZero = 1u << 5,
  kFsInfInput = 1u << 6,   // an infinite operand was read
};

// ---- Exception detection: one latch per exception kind ---------------------------------------
// Each kind has its own latch, as a priority encoder per class would: the first report of that
// kind while its latch is empty records the report's first offending element of that kind (op,
// task, core, stream, element, cycle of the tile holding it, step, tensor slot, the element's
// value, what raised it) and raises kIrqException. A later report of a kind whose latch is full
// sets the latch's "more" bit and counts as suppressed. The host services a latch by reading its
// bank and writing its bit to kRegExcAck, which clears and re-arms it, so later anomalies of the
// same kind (other ops of the same step) are latched too. Re-arming is bounded: at most
// kRegExcLimit latches per kind per step (the step stamped on the reporting task); once spent,
// the kind stays disarmed until a report of another step arrives, and its reports count as
// suppressed. Kinds that are not enabled never latch (their reports are counted in
// kRegExcCountBase only). Latches hold their contents until acknowledged.
inline constexpr std::uint32_t kRegExcEnable = 0x0200;    // RW: ExcKind bits that latch and interrupt (reset: all)
/// RO: bit k = latch k holds an event; bit 8+k = latch k saw further reports of kind k while it
/// held (suppressed); bit 16+k = kind k disarmed for the current step (its kRegExcLimit is spent).
inline constexpr std::uint32_t kRegExcPending = 0x0204;
inline constexpr std::uint32_t kRegExcAck = 0x0208;       // WO: W1C, bit k clears latch k and re-arms it (within the limit)
inline constexpr std::uint32_t kRegExcLimit = 0x020C;     // RW: latches per kind per step; 0 = unbounded (reset: 16)
inline constexpr std::uint32_t kRegExcCountBase = 0x0240; // RO: per kind, offending elements reported (saturating), 4 bytes each
inline constexpr std::uint32_t kRegExcCountClear = 0x0260;  // WO: write 1: zero kRegExcCountBase and kRegExcSuppressedBase
/// RO: per kind, reports that were not latched (latch full or kind disarmed), saturating.
inline constexpr std::uint32_t kRegExcSuppressedBase = 0x0270;
inline constexpr std::uint32_t kExcLimitReset = 16;

enum ExcKindBit : std::uint32_t {  // bit index; the enable mask uses 1u << index
  kExcOverflow = 0,
  kExcUnderflow = 1,   // denormal result / underflow
  kExcInvalid = 2,     // NaN produced
  kExcNanInput = 3,    // NaN read from an input
  kExcInfInput = 4,    // +-Inf read from an input
  kExcKindCount = 5,
};

/// The latch bank of kind k: kRegExcLatchBase + k * kExcLatchStride + one of the offsets below.
/// One burst read of kExcLatchWords words returns a whole bank.
inline constexpr std::uint32_t kRegExcLatchBase = 0x0600;
inline constexpr std::uint32_t kExcLatchStride = 0x40;
inline constexpr std::uint32_t kExcLatchStatus = 0x00;   // bit0 valid, bit1 more; bits[15:8] ExcDetailBits; bits[23:16] tensor dtype (graph::DType)
inline constexpr std::uint32_t kExcLatchOpId = 0x04;     // op id (graph snapshot executed) of the task
inline constexpr std::uint32_t kExcLatchTaskId = 0x08;
inline constexpr std::uint32_t kExcLatchCore = 0x0C;     // core_id(): kind and index of the core that raised it
inline constexpr std::uint32_t kExcLatchStream = 0x10;
inline constexpr std::uint32_t kExcLatchElemLo = 0x14;   // linear row-major index in the tensor of kExcLatchSlot
inline constexpr std::uint32_t kExcLatchElemHi = 0x18;
inline constexpr std::uint32_t kExcLatchCycleLo = 0x1C;  // cycle at which the tile holding the element completed
inline constexpr std::uint32_t kExcLatchCycleHi = 0x20;
inline constexpr std::uint32_t kExcLatchStep = 0x24;     // step stamped on the task
/// bits[15:0] tensor slot: the output index for overflow/underflow/invalid, the input index for
/// nan_input/inf_input; bit 16: the slot is an input.
inline constexpr std::uint32_t kExcLatchSlot = 0x28;
/// FP32 bit pattern of the element: for produced kinds the value the datapath computed before the
/// output conversion (an overflowing FP32 result, or the NaN/Inf), for input kinds the operand read.
inline constexpr std::uint32_t kExcLatchValue = 0x2C;
inline constexpr std::uint32_t kExcLatchCount = 0x30;    // offending elements of this kind in the latched report (saturating)
inline constexpr std::uint32_t kExcLatchSuppressed = 0x34;  // reports of this kind suppressed while this latch held
inline constexpr std::uint32_t kExcLatchWords = 14;

/// The core a latch names (kExcLatchCore): bits[15:0] its index among the cores of its kind,
/// bits[17:16] its kind. A coupled chip's AI cores are kind 0, so the word is the plain index there.
enum class CoreKind : std::uint32_t {
  AiCore = 0,  // coupled: one core holds the Cube and the Vector unit
  Cube = 1,    // split chip: a Cube core (AIC: Cube, L1/L0A/L0B/L0C, fixpipe)
  Vector = 2,  // split chip: a Vector core (AIV: Vector unit, UB)
};
inline constexpr std::uint32_t core_id(CoreKind kind, std::uint32_t index) {
  return (static_cast<std::uint32_t>(kind) << 16) | (index & 0xFFFFu);
}
inline constexpr CoreKind core_kind_of(std::uint32_t id) { return static_cast<CoreKind>((id >> 16) & 3u); }
inline constexpr std::uint32_t core_index_of(std::uint32_t id) { return id & 0xFFFFu; }

inline constexpr std::uint32_t exc_latch_reg(std::uint32_t kind, std::uint32_t reg) {
  return kRegExcLatchBase + kind * kExcLatchStride + reg;
}

/// What raised a latched kind (kExcLatchStatus bits[15:8]); several may be set.
enum ExcDetailBits : std::uint32_t {
  kExcDetailAccumulator = 1u << 0,  // a Cube accumulation step (the running sum in L0C) raised it
  kExcDetailPartial = 1u << 1,      // rounding a split-K partial sum raised it
  kExcDetailConversion = 1u << 2,   // the output conversion: a finite result outside the output format
  kExcDetailCompute = 1u << 3,      // the computation itself (an FP32 Vector/Cube result became Inf/NaN)
  kExcDetailAccFp16 = 1u << 4,      // the op accumulated in FP16 (Cube accumulator dtype)
  kExcDetailCollective = 1u << 5,
  kExcDetailQuantize = 1u << 6,     // quantizing a Cube operand to a low-bit format saturated it   // a collective's reduction of the communication buffer
};

// ---- Interrupt controller --------------------------------------------------------------------
inline constexpr std::uint32_t kRegIrqRaw = 0x0300;      // RO: raw pending lines (IrqLine bits)
inline constexpr std::uint32_t kRegIrqPending = 0x0304;  // RO: raw & ~mask
inline constexpr std::uint32_t kRegIrqMask = 0x0308;     // RW: 1 = masked
inline constexpr std::uint32_t kRegIrqAck = 0x030C;      // WO: W1C on raw

// ---- Debug capture unit (ping-pong buffers in HBM) -------------------------------------------
inline constexpr std::uint32_t kRegCapCtrl = 0x0400;         // RW: CapCtrlBits
inline constexpr std::uint32_t kRegCapBuf0Lo = 0x0404;       // RW: HBM address of buffer 0
inline constexpr std::uint32_t kRegCapBuf0Hi = 0x0408;
inline constexpr std::uint32_t kRegCapBuf1Lo = 0x040C;       // RW: HBM address of buffer 1 (unused in single mode)
inline constexpr std::uint32_t kRegCapBuf1Hi = 0x0410;
inline constexpr std::uint32_t kRegCapBufSize = 0x0414;      // RW: bytes per buffer
inline constexpr std::uint32_t kRegCapActive = 0x0418;       // RO: index of the buffer the device fills
inline constexpr std::uint32_t kRegCapFill = 0x041C;         // RO: bytes written in the active buffer
inline constexpr std::uint32_t kRegCapReady = 0x0420;        // RO: bit i = buffer i full, waiting for the host
inline constexpr std::uint32_t kRegCapReadyBytes0 = 0x0424;  // RO: valid bytes in buffer 0 when ready
inline constexpr std::uint32_t kRegCapReadyBytes1 = 0x0428;  // RO
inline constexpr std::uint32_t kRegCapRelease = 0x042C;      // WO: write i: host finished draining buffer i
inline constexpr std::uint32_t kRegCapFlush = 0x0430;        // WO: write 1: hand the partly filled active buffer to the host
inline constexpr std::uint32_t kRegCapRecords = 0x0440;      // RO: records produced (incl. dropped)
inline constexpr std::uint32_t kRegCapDropped = 0x0444;      // RO: records dropped (drop policy)
inline constexpr std::uint32_t kRegCapBytesLo = 0x0448;      // RO: bytes written to buffers
inline constexpr std::uint32_t kRegCapBytesHi = 0x044C;
inline constexpr std::uint32_t kRegCapStallLo = 0x0450;      // RO: cycles producers stalled (stall policy)
inline constexpr std::uint32_t kRegCapStallHi = 0x0454;
inline constexpr std::uint32_t kRegCapOversize = 0x0458;     // RO: records larger than a buffer, dropped
                                                             //     under either policy (counted in kRegCapDropped)
inline constexpr std::uint32_t kRegCapOversizeMax = 0x045C;  // RO: bytes of the largest such record

enum CapCtrlBits : std::uint32_t {
  kCapEnable = 1u << 0,
  kCapPingPong = 1u << 1,   // 1: two buffers; 0: single buffer (device waits while the host drains)
  kCapDropOnFull = 1u << 2, // 1: drop records while no buffer is free; 0: stall the producer
};

// ---- Performance monitoring unit: free-running 64-bit event counters ---------------------
// Counter i is at kRegPmuBase + 8 * i (low word) and + 4 (high word); reading a low word latches
// the high words of every counter, so lo-then-hi reads are consistent. One burst read of
// kPmuWords words returns the whole bank as one snapshot (kPmuCycle = the device cycle of the
// read, so two snapshots give an interval). A counter counts a unit's work once the work is
// done by the read's time (an op's cycles and bytes count when its last tile is stored).
// Busy cycles are summed over cores. Writing 1 to kRegPmuClear zeroes every counter but kPmuCycle.
inline constexpr std::uint32_t kRegPmuBase = 0x0800;
inline constexpr std::uint32_t kRegPmuClear = 0x0880;  // WO

enum PmuCounter : std::uint32_t {
  kPmuCycle = 0,             // device cycle of the read (kRegCycleLo/Hi)
  kPmuKernelOps = 1,         // Kernel tasks completed
  kPmuKernelCycles = 2,      // sum of their durations (first load to last store), cycles
  kPmuCubeBusy = 3,          // Cube busy cycles, summed over cores
  kPmuVectorBusy = 4,        // Vector busy cycles (compute and epilogue), summed over cores
  kPmuMteBusy = 5,           // MTE busy cycles (HBM/L2 loads and stores), summed over cores
  kPmuHbmReadBytes = 6,      // bytes the cores read from HBM
  kPmuHbmWriteBytes = 7,     // bytes the cores wrote to HBM
  kPmuL2ReadBytes = 8,       // bytes the cores' loads served from L2
  kPmuCubeFlops = 9,         // Cube FLOPs (2 per MAC)
  kPmuHbmStall = 10,         // MTE cycles beyond the port rate: waiting on HBM bandwidth, contention, latency
  kPmuCollectiveOps = 11,    // Collective tasks completed
  kPmuCollectiveCycles = 12, // their durations (waiting for peers included), cycles
  kPmuEventWait = 13,        // cycles streams waited in EventWait tasks (cross-stream sync)
  kPmuCaptureStall = 14,     // cycles producers stalled on a full capture buffer (= kRegCapStall)
  kPmuDispatch = 15,         // cycles of task fetch and dispatch, summed over streams
  kPmuCounters = 16,
};
inline constexpr std::uint32_t kPmuWords = 2 * kPmuCounters;
inline constexpr std::uint32_t pmu_reg(std::uint32_t counter) { return kRegPmuBase + 8 * counter; }

// ---- Streams ---------------------------------------------------------------------------------
inline constexpr std::uint32_t kNumStreams = 8;
inline constexpr std::uint32_t kRegStreamBase = 0x1000;   // + stream * kStreamStride
inline constexpr std::uint32_t kStreamStride = 0x40;
inline constexpr std::uint32_t kStreamRingLo = 0x00;      // RW: HBM address of the descriptor ring
inline constexpr std::uint32_t kStreamRingHi = 0x04;
inline constexpr std::uint32_t kStreamRingEntries = 0x08; // RW: ring size in descriptors
inline constexpr std::uint32_t kStreamTail = 0x0C;        // RW: doorbell: host writes the new tail index
inline constexpr std::uint32_t kStreamHead = 0x10;        // RO: next descriptor the device will fetch
inline constexpr std::uint32_t kStreamStatus = 0x14;      // RO: StreamStatusBits
inline constexpr std::uint32_t kStreamResume = 0x18;      // WO: write 1: resume a halted stream
inline constexpr std::uint32_t kStreamCompleted = 0x1C;   // RO: tasks completed on this stream
inline constexpr std::uint32_t kStreamHaltTask = 0x20;    // RO: task id the stream halted after

inline constexpr std::uint32_t stream_reg(std::uint32_t stream, std::uint32_t reg) {
  return kRegStreamBase + stream * kStreamStride + reg;
}

enum StreamStatusBits : std::uint32_t {
  kStreamIdle = 1u << 0,    // ring empty and nothing executing
  kStreamHalted = 1u << 1,  // halted at a task boundary by a breakpoint task; see kStreamHaltTask
};

inline constexpr std::uint32_t kMmioSize = 0x2000;
static_assert(kRegExcLatchBase + kExcKindCount * kExcLatchStride <= kRegPmuBase);
static_assert(kRegPmuClear < kRegStreamBase && pmu_reg(kPmuCounters) <= kRegPmuClear);
/// Largest MMIO read in one bus transaction (a burst of consecutive registers, one PCIe read
/// request on silicon). Writes are always single 32-bit registers.
inline constexpr std::uint32_t kMmioMaxBurstBytes = 128;
static_assert(kPmuWords * 4 <= kMmioMaxBurstBytes, "one burst reads the whole PMU bank");

}  // namespace probelab::spec
