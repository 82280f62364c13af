#include "injectors/injection_set.h"

namespace probelab::inject {

InjectionSet::InjectionSet(const std::vector<YAML::Node>& descriptors, const std::vector<std::string>& where,
                           const InjectionEnv& env) {
  for (std::size_t i = 0; i < descriptors.size(); ++i) {
    add(InjectorRegistry::instance().create(descriptors[i], i < where.size() ? where[i] : "injections", env));
  }
}

void InjectionSet::add(std::unique_ptr<Injector> inj) {
  sites_ |= inj->sites();
  injectors_.push_back(std::move(inj));
}

nlohmann::json InjectionSet::report() const { return merge_reports({partial_report()}); }

nlohmann::json InjectionSet::partial_report() const {
  auto a = nlohmann::json::array();
  for (const auto& i : injectors_) a.push_back(i->partial_report());
  return a;
}

nlohmann::json InjectionSet::merge_reports(const std::vector<nlohmann::json>& partials) {
  auto a = nlohmann::json::array();
  const std::size_t n = partials.empty() ? 0 : partials.front().size();
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<nlohmann::json> each;
    for (const auto& p : partials) each.push_back(p.at(i));
    auto r = Injector::merge_reports(each);
    r["index"] = i;
    a.push_back(std::move(r));
  }
  return a;
}

void InjectionSet::on_op_input(const chip::FaultSite& s, std::uint16_t idx, const graph::TensorDesc& d,
                               std::span<std::byte> b) {
  each(chip::kFaultOpInput, [&](Injector& i) { i.on_op_input(s, idx, d, b); });
}
void InjectionSet::on_op_output(const chip::FaultSite& s, std::uint16_t idx, const graph::TensorDesc& d,
                                std::uint64_t off, std::span<std::byte> b) {
  each(chip::kFaultOpOutput, [&](Injector& i) { i.on_op_output(s, idx, d, off, b); });
}
void InjectionSet::on_fused_inner(const chip::FaultSite& s, std::uint32_t k, const std::string& name,
                                  std::span<float> values) {
  each(chip::kFaultFusedInner, [&](Injector& i) { i.on_fused_inner(s, k, name, values); });
}

void InjectionSet::on_gemm_accumulation(const chip::FaultSite& s, chip::AccumulationMode& m) {
  each(chip::kFaultGemmAccumulation, [&](Injector& i) { i.on_gemm_accumulation(s, m); });
}
void InjectionSet::on_vector_lanes(const chip::FaultSite& s, const graph::TensorDesc& d, std::uint64_t off,
                                   std::uint32_t lanes, std::span<std::byte> b) {
  each(chip::kFaultVectorLanes, [&](Injector& i) { i.on_vector_lanes(s, d, off, lanes, b); });
}
void InjectionSet::on_core_buffer(const chip::FaultSite& s, chip::CoreBuffer which, std::span<std::byte> b) {
  each(chip::kFaultCoreBuffer, [&](Injector& i) { i.on_core_buffer(s, which, b); });
}
std::vector<chip::HbmFaultPoint> InjectionSet::hbm_fault_schedule(std::uint32_t rank) {
  std::vector<chip::HbmFaultPoint> all;
  each(chip::kFaultHbmWord, [&](Injector& i) {
    for (const auto& p : i.hbm_fault_schedule(rank)) {
      hbm_owner_[{rank, p.addr}].push_back(&i);
      all.push_back(p);
    }
  });
  return all;
}
void InjectionSet::on_hbm_word(const chip::FaultSite& s, std::uint64_t addr, std::uint64_t& word) {
  auto it = hbm_owner_.find({s.rank, addr});
  if (it == hbm_owner_.end()) return;
  for (auto* i : it->second) i->on_hbm_word(s, addr, word);
}
void InjectionSet::on_capture_record(const chip::FaultSite& s, std::span<std::byte> r) {
  each(chip::kFaultCaptureRecord, [&](Injector& i) { i.on_capture_record(s, r); });
}
chip::InterruptFault InjectionSet::on_interrupt(const chip::FaultSite& s, std::uint32_t line) {
  chip::InterruptFault out;
  each(chip::kFaultInterrupt, [&](Injector& i) {
    const auto f = i.on_interrupt(s, line);
    out.drop = out.drop || f.drop;
    out.extra_delay_ps += f.extra_delay_ps;
  });
  return out;
}
void InjectionSet::on_register_read(const chip::FaultSite& s, std::uint32_t off, std::uint32_t& v) {
  each(chip::kFaultRegisterRead, [&](Injector& i) { i.on_register_read(s, off, v); });
}
void InjectionSet::on_collective(const chip::FaultSite& s, chip::CollectiveOverride& o) {
  each(chip::kFaultCollective, [&](Injector& i) { i.on_collective(s, o); });
}
void InjectionSet::on_float_status(const chip::FaultSite& s, std::uint32_t status, chip::FloatStatusFault& f) {
  each(chip::kFaultFloatStatus, [&](Injector& i) { i.on_float_status(s, status, f); });
}
void InjectionSet::on_perf_faults(std::uint32_t rank, chip::PerfFaults& f) {
  each(chip::kFaultPerf, [&](Injector& i) { i.on_perf_faults(rank, f); });
}

}  // namespace probelab::inject
