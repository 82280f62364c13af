// Two FaultHooks seen by a chip as one: every call goes to `primary` (the injectors, which may
// change what they are handed) and then to `observer` (which must only look: a census of the sites
// a run reaches, for instance). Results (interrupt faults, HBM schedules) are the primary's.
#pragma once

#include "chip_model/hooks/fault_hooks.h"

namespace probelab::chip {

class HooksTee final : public FaultHooks {
 public:
  HooksTee(FaultHooks* primary, FaultHooks& observer) : p_(primary), o_(observer) {}

  std::uint32_t sites() const override { return (p_ ? p_->sites() : 0u) | o_.sites(); }
  void on_op_input(const FaultSite& s, std::uint16_t i, const graph::TensorDesc& d, std::span<std::byte> b) override {
    if (wants(kFaultOpInput)) p_->on_op_input(s, i, d, b);
    if (o_.sites() & kFaultOpInput) o_.on_op_input(s, i, d, b);
  }
  void on_op_output(const FaultSite& s, std::uint16_t i, const graph::TensorDesc& d, std::uint64_t off,
                    std::span<std::byte> b) override {
    if (wants(kFaultOpOutput)) p_->on_op_output(s, i, d, off, b);
    if (o_.sites() & kFaultOpOutput) o_.on_op_output(s, i, d, off, b);
  }
  void on_gemm_accumulation(const FaultSite& s, AccumulationMode& m) override {
    if (wants(kFaultGemmAccumulation)) p_->on_gemm_accumulation(s, m);
    if (o_.sites() & kFaultGemmAccumulation) o_.on_gemm_accumulation(s, m);
  }
  void on_fused_inner(const FaultSite& s, std::uint32_t i, const std::string& n, std::span<float> v) override {
    if (wants(kFaultFusedInner)) p_->on_fused_inner(s, i, n, v);
    if (o_.sites() & kFaultFusedInner) o_.on_fused_inner(s, i, n, v);
  }
  void on_vector_lanes(const FaultSite& s, const graph::TensorDesc& d, std::uint64_t off, std::uint32_t lanes,
                       std::span<std::byte> b) override {
    if (wants(kFaultVectorLanes)) p_->on_vector_lanes(s, d, off, lanes, b);
    if (o_.sites() & kFaultVectorLanes) o_.on_vector_lanes(s, d, off, lanes, b);
  }
  void on_core_buffer(const FaultSite& s, CoreBuffer w, std::span<std::byte> b) override {
    if (wants(kFaultCoreBuffer)) p_->on_core_buffer(s, w, b);
    if (o_.sites() & kFaultCoreBuffer) o_.on_core_buffer(s, w, b);
  }
  std::vector<HbmFaultPoint> hbm_fault_schedule(std::uint32_t rank) override {
    return wants(kFaultHbmWord) ? p_->hbm_fault_schedule(rank) : std::vector<HbmFaultPoint>{};
  }
  void on_hbm_word(const FaultSite& s, std::uint64_t a, std::uint64_t& w) override {
    if (wants(kFaultHbmWord)) p_->on_hbm_word(s, a, w);
  }
  void on_capture_record(const FaultSite& s, std::span<std::byte> r) override {
    if (wants(kFaultCaptureRecord)) p_->on_capture_record(s, r);
    if (o_.sites() & kFaultCaptureRecord) o_.on_capture_record(s, r);
  }
  InterruptFault on_interrupt(const FaultSite& s, std::uint32_t line) override {
    InterruptFault f = wants(kFaultInterrupt) ? p_->on_interrupt(s, line) : InterruptFault{};
    if (o_.sites() & kFaultInterrupt) o_.on_interrupt(s, line);
    return f;
  }
  void on_register_read(const FaultSite& s, std::uint32_t off, std::uint32_t& v) override {
    if (wants(kFaultRegisterRead)) p_->on_register_read(s, off, v);
    if (o_.sites() & kFaultRegisterRead) o_.on_register_read(s, off, v);
  }
  void on_collective(const FaultSite& s, CollectiveOverride& o) override {
    if (wants(kFaultCollective)) p_->on_collective(s, o);
    if (o_.sites() & kFaultCollective) o_.on_collective(s, o);
  }
  void on_float_status(const FaultSite& s, std::uint32_t status, FloatStatusFault& f) override {
    if (wants(kFaultFloatStatus)) p_->on_float_status(s, status, f);
    if (o_.sites() & kFaultFloatStatus) o_.on_float_status(s, status, f);
  }
  void on_perf_faults(std::uint32_t rank, PerfFaults& f) override {
    if (wants(kFaultPerf)) p_->on_perf_faults(rank, f);
    if (o_.sites() & kFaultPerf) o_.on_perf_faults(rank, f);
  }

 private:
  bool wants(std::uint32_t bit) const { return p_ && (p_->sites() & bit); }
  FaultHooks* p_;
  FaultHooks& o_;
};

}  // namespace probelab::chip
