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
  kFpModeSaturation = 1u << 0,  // 1: SATURATION (Inf -> +-max finite, NaN -> 0); 0: INF_NAN (IEEE 754)
  kFpModeFlushDenormals = 1u << 1,  // 1: flush denormal inputs and outputs to zero
};

// ---- Float status: sticky OR of every core's exception flags since the last clear ------------
inline constexpr std::uint32_t kRegFloatStatus = 0x0100;       // RO: FloatStatusBits
inline constexpr std::uint32_t kRegFloatStatusClear = 0x0104;  // WO: write bits to clear (W1C)

enum FloatStatusBits : std::uint32_t {
  kFsOverflow = 1u << 0,   // a result overflowed the output format
  kFsUnderflow = 1u << 1,  // a result was tiny (denormal or flushed) and inexact
  kFsInvalid = 1u << 2,    // NaN produced from non-NaN operands (0*Inf, Inf-Inf, sqrt(-1), ...)
  kFsNanInput = 1u << 3,   // a NaN operand was read
  kFsDenormal = 1u << 4,   // a denormal operand was read or a denormal produced
  kFsDivByZero = 1u << 5,
};

// ---- Exception latch: the first anomaly since the last acknowledge ---------------------------
inline constexpr std::uint32_t kRegExcEnable = 0x0200;    // RW: ExcKind bits that latch and interrupt
inline constexpr std::uint32_t kRegExcStatus = 0x0204;    // RO: bit0 valid, bits[15:8] ExcKind (one bit index), bit16 more anomalies after the first
inline constexpr std::uint32_t kRegExcOpId = 0x0208;      // RO: op id (graph snapshot executed) of the task
inline constexpr std::uint32_t kRegExcTaskId = 0x020C;    // RO
inline constexpr std::uint32_t kRegExcCore = 0x0210;      // RO
inline constexpr std::uint32_t kRegExcStream = 0x0214;    // RO
inline constexpr std::uint32_t kRegExcElemLo = 0x0218;    // RO: linear index in the op's logical output (row-major)
inline constexpr std::uint32_t kRegExcElemHi = 0x021C;    // RO
inline constexpr std::uint32_t kRegExcCycleLo = 0x0220;   // RO: cycle at which the offending tile completed
inline constexpr std::uint32_t kRegExcCycleHi = 0x0224;   // RO
inline constexpr std::uint32_t kRegExcStep = 0x0228;      // RO: kRegStep value when latched
inline constexpr std::uint32_t kRegExcOutput = 0x022C;    // RO: output index of the op
inline constexpr std::uint32_t kRegExcAck = 0x0230;       // WO: write 1: clear latch, re-arm
inline constexpr std::uint32_t kRegExcCountBase = 0x0240; // RO: per-kind saturating counters, 4 bytes each, index = ExcKind bit index
inline constexpr std::uint32_t kRegExcCountClear = 0x0260;  // WO: write 1: zero all counters

enum ExcKindBit : std::uint32_t {  // bit index; the enable mask uses 1u << index
  kExcOverflow = 0,
  kExcUnderflow = 1,   // denormal result / underflow
  kExcInvalid = 2,     // NaN produced
  kExcNanInput = 3,    // NaN read from an input
  kExcKindCount = 4,
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
/// Largest MMIO read in one bus transaction (a burst of consecutive registers, one PCIe read
/// request on silicon). Writes are always single 32-bit registers.
inline constexpr std::uint32_t kMmioMaxBurstBytes = 128;

}  // namespace probelab::spec
