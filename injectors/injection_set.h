// The injectors of one simulation, seen by the chips as one FaultHooks: every hook call is
// forwarded, in descriptor order, to the injectors that override that site.
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "injectors/injector.h"

namespace probelab::inject {

class InjectionSet final : public chip::FaultHooks {
 public:
  InjectionSet() = default;
  /// Builds one injector per descriptor; `where[i]` locates descriptor i for messages.
  InjectionSet(const std::vector<YAML::Node>& descriptors, const std::vector<std::string>& where,
               const InjectionEnv& env);

  void add(std::unique_ptr<Injector> inj);
  bool empty() const { return injectors_.empty(); }
  const std::vector<std::unique_ptr<Injector>>& injectors() const { return injectors_; }
  /// [{index, kind, descriptor, fired, applications, proof, note?}] in descriptor order.
  nlohmann::json report() const;
  /// What this set saw, per injector (Injector::partial_report), for merging partitions.
  nlohmann::json partial_report() const;
  /// report() of the partial reports of the partitions of a distributed run (same descriptors).
  static nlohmann::json merge_reports(const std::vector<nlohmann::json>& partials);

  std::uint32_t sites() const override { return sites_; }
  void on_op_input(const chip::FaultSite&, std::uint16_t, const graph::TensorDesc&, std::span<std::byte>) override;
  void on_op_output(const chip::FaultSite&, std::uint16_t, const graph::TensorDesc&, std::uint64_t,
                    std::span<std::byte>) override;
  void on_gemm_accumulation(const chip::FaultSite&, chip::AccumulationMode&) override;
  void on_fused_inner(const chip::FaultSite&, std::uint32_t, const std::string&, std::span<float>) override;
  void on_vector_lanes(const chip::FaultSite&, const graph::TensorDesc&, std::uint64_t, std::uint32_t,
                       std::span<std::byte>) override;
  void on_core_buffer(const chip::FaultSite&, chip::CoreBuffer, std::span<std::byte>) override;
  std::vector<chip::HbmFaultPoint> hbm_fault_schedule(std::uint32_t rank) override;
  void on_hbm_word(const chip::FaultSite&, std::uint64_t, std::uint64_t&) override;
  void on_capture_record(const chip::FaultSite&, std::span<std::byte>) override;
  chip::InterruptFault on_interrupt(const chip::FaultSite&, std::uint32_t) override;
  void on_register_read(const chip::FaultSite&, std::uint32_t, std::uint32_t&) override;
  void on_collective(const chip::FaultSite&, chip::CollectiveOverride&) override;
  void on_float_status(const chip::FaultSite&, std::uint32_t status, chip::FloatStatusFault&) override;
  void on_perf_faults(std::uint32_t rank, chip::PerfFaults&) override;

 private:
  template <class F> void each(std::uint32_t bit, F&& f) {
    for (auto& i : injectors_) {
      if (i->sites() & bit) f(*i);
    }
  }
  std::vector<std::unique_ptr<Injector>> injectors_;
  std::uint32_t sites_ = 0;
  // Which injector scheduled which HBM word, so that each word's flip reaches only its owner.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<Injector*>> hbm_owner_;
};

}  // namespace probelab::inject
