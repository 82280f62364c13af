// The register semantics of the exception detection block (registers.h: float status 0x100..,
// exception block 0x200.., latch banks 0x600..), as one plain model that every implementation of
// the register map uses: chip_model's DetectionCircuit (one per chip; the AI cores report into it)
// and probes' FakeDevice. It owns no interrupt line and no clock: report() says which latches it
// filled, and the owner raises kIrqException. Header-only, no SystemC.
//
// Semantics (see the comments at kRegExcEnable in registers.h):
//  - report(): the float-status bits are ORed into kRegFloatStatus and into the step status (both
//    armed or not). For an armed report, per kind present: the element counter grows by the kind's
//    count (1 when zero); then, if the kind is enabled: a report of another step than the last one
//    re-opens every kind's per-step budget; if the kind's latch is empty and its budget is not
//    spent, the latch records the kind's hit (first element, cycle, value, detail, slot) with the
//    report's ids and the budget shrinks by one; otherwise the report is suppressed (latch "more"
//    bit, latch suppressed count, per-kind suppressed counter, step suppressed count).
//  - kRegExcAck (W1C): bit k clears latch k; it accepts the next report of kind k if budget remains.
//  - kRegExcLimit: latches per kind per step; 0 = unbounded. Changing it does not reset the budget.
//  - kRegExcCountClear = 1 zeroes the element counters and the suppressed counters.
//  - take_step_status(): the StepStatus record contents since the previous call.
//  - The float status as CANN reads it (float_status.h): status_buffer() is the 64-byte record a
//    FloatStatusGet task writes; clear_status() is a reset (a FloatStatusReset task, a write of
//    kRegFloatStatusClear, or another client); every reset and every report with a
//    kFsOverflowClass bit is counted (kRegFloatStatusResets, kRegFloatStatusEvents).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

#include "chip_model/spec/capture_record.h"
#include "chip_model/spec/float_status.h"
#include "chip_model/spec/registers.h"

namespace probelab::spec {

/// One exception kind present in a reported block.
struct ExcHit {
  bool hit = false;
  std::uint64_t element = 0;     // linear row-major index of the first offending element in the slot's tensor
  std::uint64_t count = 0;       // offending elements of this kind in the block (0 counts as 1)
  std::uint64_t cycle = 0;       // cycle at which the tile holding `element` completed
  std::uint32_t value_bits = 0;  // FP32 bit pattern of that element (see kExcLatchValue)
  std::uint32_t detail = 0;      // ExcDetailBits
  std::uint16_t slot = 0;        // tensor slot (output index, or input index for input kinds)
  bool is_input = false;
  std::uint8_t dtype = 0;        // graph::DType of the tensor holding the element
  /// The core (core_id()) whose work holds the element, when it is not the report's core (split
  /// chips: the Vector core that ran the tile's epilogue, the Cube core that accumulated it).
  std::optional<std::uint32_t> core;
};

/// One result block with flags (a tensor of one task), as the datapath hands it over.
struct ExcReport {
  std::uint32_t status = 0;  // FloatStatusBits raised by any element of the block
  std::array<ExcHit, kExcKindCount> kinds{};
  std::uint32_t op_id = 0, task_id = 0, core = 0, stream = 0, step = 0;
  bool armed = true;         // the task's kTaskFlagCheckExceptions
  std::uint32_t kind_mask() const {
    std::uint32_t m = 0;
    for (std::uint32_t k = 0; k < kExcKindCount; ++k)
      if (kinds[k].hit) m |= 1u << k;
    return m;
  }
};

/// The contents of one latch bank.
struct ExcLatch {
  bool valid = false, more = false;
  ExcHit hit;
  std::uint32_t op_id = 0, task_id = 0, core = 0, stream = 0, step = 0;
  std::uint32_t suppressed = 0;
};

class ExceptionUnit {
 public:
  static constexpr std::uint32_t kAllKinds = (1u << kExcKindCount) - 1;

  /// Whether register `offset` belongs to this block (float status, exception block, latch banks).
  static constexpr bool owns(std::uint32_t offset) {
    return (offset >= kRegFloatStatus && offset < 0x0300) ||
           (offset >= kRegExcLatchBase && offset < kRegExcLatchBase + kExcKindCount * kExcLatchStride);
  }

  /// Returns the bits (1u << kind) of the latches this report filled.
  std::uint32_t report(const ExcReport& r) {
    raise_status(r.status);
    if (!r.armed) return 0;
    std::uint32_t filled = 0;
    for (std::uint32_t k = 0; k < kExcKindCount; ++k) {
      const ExcHit& h = r.kinds[k];
      if (!h.hit) continue;
      counters_[k] = sat_add(counters_[k], h.count == 0 ? 1 : h.count);
      if (!(enable_ & (1u << k))) continue;
      if (!have_step_ || r.step != step_) {
        have_step_ = true;
        step_ = r.step;
        spent_.fill(0);
      }
      ExcLatch& l = latches_[k];
      const bool budget = limit_ == 0 || spent_[k] < limit_;
      if (!l.valid && budget) {
        l = ExcLatch{true, false, h, r.op_id, r.task_id, h.core.value_or(r.core), r.stream, r.step, 0};
        ++spent_[k];
        filled |= 1u << k;
        continue;
      }
      if (l.valid) {
        l.more = true;
        l.suppressed = sat_add(l.suppressed, 1);
      }
      suppressed_[k] = sat_add(suppressed_[k], 1);
      step_suppressed_[k] = sat_add(step_suppressed_[k], 1);
    }
    return filled;
  }

  std::uint32_t read(std::uint32_t offset) const {
    if (offset >= kRegExcCountBase && offset < kRegExcCountBase + 4 * kExcKindCount && offset % 4 == 0)
      return counters_[(offset - kRegExcCountBase) / 4];
    if (offset >= kRegExcSuppressedBase && offset < kRegExcSuppressedBase + 4 * kExcKindCount && offset % 4 == 0)
      return suppressed_[(offset - kRegExcSuppressedBase) / 4];
    if (offset >= kRegExcLatchBase && offset < kRegExcLatchBase + kExcKindCount * kExcLatchStride)
      return read_latch((offset - kRegExcLatchBase) / kExcLatchStride, (offset - kRegExcLatchBase) % kExcLatchStride);
    switch (offset) {
      case kRegFloatStatus: return float_status_;
      case kRegFloatStatusResets: return resets_;
      case kRegFloatStatusEvents: return events_;
      case kRegExcEnable: return enable_;
      case kRegExcLimit: return limit_;
      case kRegExcPending: {
        std::uint32_t v = 0;
        for (std::uint32_t k = 0; k < kExcKindCount; ++k) {
          if (latches_[k].valid) v |= 1u << k;
          if (latches_[k].more) v |= 1u << (8 + k);
          if (have_step_ && limit_ != 0 && spent_[k] >= limit_ && !latches_[k].valid) v |= 1u << (16 + k);
        }
        return v;
      }
      default: return 0;
    }
  }

  void write(std::uint32_t offset, std::uint32_t value) {
    switch (offset) {
      case kRegFloatStatusClear:
        if (value) clear_status(value, cycle_, kResetByRegister);
        break;
      case kRegExcEnable: enable_ = value & kAllKinds; break;
      case kRegExcLimit: limit_ = value; break;
      case kRegExcAck:
        for (std::uint32_t k = 0; k < kExcKindCount; ++k)
          if (value & (1u << k)) latches_[k] = ExcLatch{};
        break;
      case kRegExcCountClear:
        if (value & 1u) {
          counters_.fill(0);
          suppressed_.fill(0);
        }
        break;
      default: break;
    }
  }

  /// Float status bits raised outside a report (a fault injector's rank-local overflow).
  void raise_status(std::uint32_t bits) {
    float_status_ |= bits;
    step_status_ |= bits;
    if (bits & kFsOverflowClass) events_ = sat_add(events_, 1);
  }
  /// A reset of the float status at device `cycle` by `by` (a stream, kResetByRegister,
  /// kResetByOther): the bits in `bits` are cleared and the reset is counted.
  void clear_status(std::uint32_t bits, std::uint64_t cycle, std::uint32_t by) {
    float_status_ &= ~bits;
    resets_ = sat_add(resets_, 1);
    last_reset_cycle_ = cycle;
    last_reset_by_ = by;
  }
  /// Device cycle of the next register access (for the cycle a kRegFloatStatusClear reset records).
  void set_cycle(std::uint64_t cycle) { cycle_ = cycle; }
  /// The record a FloatStatusGet task writes at device `cycle`.
  FloatStatusBuffer status_buffer(std::uint64_t cycle) const {
    FloatStatusBuffer b;
    b.overflow = (float_status_ & kFsOverflowClass) ? 1u : 0u;
    b.status = float_status_;
    b.resets = resets_;
    b.events = events_;
    b.cycle = cycle;
    b.last_reset_cycle = last_reset_cycle_;
    b.last_reset_by = last_reset_by_;
    return b;
  }

  /// The step status since the previous call (then cleared).
  StepStatus take_step_status() {
    StepStatus s;
    s.float_status = step_status_;
    for (std::uint32_t k = 0; k < kExcKindCount; ++k) {
      s.suppressed[k] = step_suppressed_[k];
      if (s.suppressed[k]) s.suppressed_kinds |= 1u << k;
    }
    step_status_ = 0;
    step_suppressed_.fill(0);
    return s;
  }

  // Direct views (tests, the chip model's trace and breakpoint logic).
  std::uint32_t float_status() const { return float_status_; }
  std::uint32_t enable_mask() const { return enable_; }
  const ExcLatch& latch(std::uint32_t kind) const { return latches_.at(kind); }
  std::uint32_t counter(std::uint32_t kind) const { return counters_.at(kind); }
  std::uint32_t suppressed(std::uint32_t kind) const { return suppressed_.at(kind); }

 private:
  static std::uint32_t sat_add(std::uint32_t a, std::uint64_t b) {
    const std::uint64_t s = std::uint64_t{a} + b;
    return s > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<std::uint32_t>(s);
  }

  std::uint32_t read_latch(std::uint32_t kind, std::uint32_t reg) const {
    const ExcLatch& l = latches_[kind];
    if (!l.valid && reg != kExcLatchStatus) return 0;
    switch (reg) {
      case kExcLatchStatus:
        return l.valid ? (1u | (l.more ? 2u : 0u) | ((l.hit.detail & 0xFFu) << 8) | (std::uint32_t{l.hit.dtype} << 16)) : 0u;
      case kExcLatchOpId: return l.op_id;
      case kExcLatchTaskId: return l.task_id;
      case kExcLatchCore: return l.core;
      case kExcLatchStream: return l.stream;
      case kExcLatchElemLo: return static_cast<std::uint32_t>(l.hit.element);
      case kExcLatchElemHi: return static_cast<std::uint32_t>(l.hit.element >> 32);
      case kExcLatchCycleLo: return static_cast<std::uint32_t>(l.hit.cycle);
      case kExcLatchCycleHi: return static_cast<std::uint32_t>(l.hit.cycle >> 32);
      case kExcLatchStep: return l.step;
      case kExcLatchSlot: return std::uint32_t{l.hit.slot} | (l.hit.is_input ? 1u << 16 : 0u);
      case kExcLatchValue: return l.hit.value_bits;
      case kExcLatchCount: return static_cast<std::uint32_t>(std::min<std::uint64_t>(l.hit.count, 0xFFFFFFFFull));
      case kExcLatchSuppressed: return l.suppressed;
      default: return 0;
    }
  }

  std::uint32_t float_status_ = 0, step_status_ = 0;
  std::uint32_t resets_ = 0, events_ = 0, last_reset_by_ = 0;
  std::uint64_t last_reset_cycle_ = 0, cycle_ = 0;
  std::uint32_t enable_ = kAllKinds;
  std::uint32_t limit_ = kExcLimitReset;
  bool have_step_ = false;
  std::uint32_t step_ = 0;
  std::array<std::uint32_t, kExcKindCount> spent_{};
  std::array<ExcLatch, kExcKindCount> latches_{};
  std::array<std::uint32_t, kExcKindCount> counters_{}, suppressed_{}, step_suppressed_{};
};

}  // namespace probelab::spec
