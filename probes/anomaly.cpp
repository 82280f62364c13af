#include "probes/anomaly.h"

#include <cmath>

namespace probelab::probes {

std::string_view anomaly_kind_name(AnomalyKind k) {
  switch (k) {
    case AnomalyKind::Overflow: return "overflow";
    case AnomalyKind::Underflow: return "underflow";
    case AnomalyKind::Invalid: return "invalid";
    case AnomalyKind::NanInput: return "nan_input";
    case AnomalyKind::InfInput: return "inf_input";
  }
  return "?";
}

bool reads_input(AnomalyKind k) { return k == AnomalyKind::NanInput || k == AnomalyKind::InfInput; }

std::vector<std::string> detail_names(std::uint32_t d) {
  static const std::pair<std::uint32_t, const char*> kNames[] = {
      {spec::kExcDetailAccumulator, "accumulator"},      {spec::kExcDetailPartial, "split_k_partial"},
      {spec::kExcDetailConversion, "output_conversion"}, {spec::kExcDetailCompute, "compute"},
      {spec::kExcDetailAccFp16, "fp16_accumulator"},     {spec::kExcDetailCollective, "collective"},
      {spec::kExcDetailQuantize, "quantize"}};
  std::vector<std::string> out;
  for (const auto& [bit, name] : kNames)
    if (d & bit) out.emplace_back(name);
  return out;
}

std::string_view core_kind_name(std::uint32_t core) {
  switch (spec::core_kind_of(core)) {
    case spec::CoreKind::Cube: return "aic";
    case spec::CoreKind::Vector: return "aiv";
    default: return "ai_core";
  }
}

std::string_view anomaly_role_name(AnomalyRole r) {
  switch (r) {
    case AnomalyRole::Source: return "source";
    case AnomalyRole::Propagation: return "propagation";
    case AnomalyRole::Carrier: return "carrier";
    case AnomalyRole::Corruption: return "corruption";
  }
  return "?";
}

std::string_view origin_kind_name(OriginKind k) {
  switch (k) {
    case OriginKind::Op: return "op";
    case OriginKind::Memory: return "memory";
    case OriginKind::HostData: return "host_data";
  }
  return "?";
}

nlohmann::json json_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

namespace {
nlohmann::json num(double v) { return json_number(v); }
}  // namespace

nlohmann::json stats_json(const spec::CaptureStats& s) {
  return {{"min", num(s.min)},           {"max", num(s.max)},         {"mean", num(s.mean)},
          {"abs_mean", num(s.abs_mean)}, {"std", num(s.std)},         {"l2", num(s.l2)},
          {"max_abs", num(s.max_abs)},   {"count", s.count},          {"nan_count", s.nan_count},
          {"inf_count", s.inf_count},    {"zero_count", s.zero_count}};
}

nlohmann::json to_json(const AnomalyRecord& a) {
  nlohmann::json j = {{"kind", anomaly_kind_name(a.kind)},
                      {"op", a.op},
                      {"op_id", a.op_id},
                      {"op_type", a.op_type},
                      {"scope", a.scope},
                      {"fused_from", a.fused_from},
                      {"output_index", a.output_index},
                      {"on_input", a.on_input},
                      {"tensor", a.tensor},
                      {"element", a.element},
                      {"coordinate", a.coordinate},
                      {"value", num(a.value)},
                      {"raised_by", detail_names(a.detail)},
                      {"count", a.count},
                      {"suppressed", a.suppressed},
                      {"step", a.step},
                      {"rank", a.rank},
                      {"task_id", a.task_id},
                      {"core", a.core},
                      {"stream", a.stream},
                      {"cycle", a.cycle},
                      {"isr_cycle", a.isr_cycle},
                      {"latency_cycles", a.latency_cycles},
                      {"more", a.more},
                      {"float_status", a.float_status},
                      {"call_stack", a.call_stack},
                      {"role", anomaly_role_name(a.role)},
                      {"origin", origin_kind_name(a.origin)},
                      {"source_op", a.source_op},
                      {"source_step", a.source_step},
                      {"source_rank", a.source_rank},
                      {"propagation_path", a.propagation_path}};
  if (!a.corrupted_tensor.empty()) j["corrupted_tensor"] = a.corrupted_tensor;
  if (a.corrupted_element) j["corrupted_element"] = *a.corrupted_element;
  return j;
}

nlohmann::json to_json(const TriggerEvent& t) {
  nlohmann::json j = {{"watch_point", t.watch_point}, {"condition", t.condition}, {"actions", t.actions},
                      {"op", t.op},                   {"op_id", t.op_id},         {"tensor", t.tensor},
                      {"edge", (t.is_input ? "in" : "out") + std::to_string(t.index)},
                      {"step", t.step},               {"rank", t.rank},           {"origin", t.origin},
                      {"dumped", t.dumped}};
  if (t.stats) j["statistics"] = stats_json(*t.stats);
  return j;
}

nlohmann::json to_json(const RuleEvent& r) {
  return {{"rule", r.rule}, {"actions", r.actions}, {"step", r.step}, {"ops_switched", r.ops_switched}, {"counters", r.counters}};
}

}  // namespace probelab::probes
