#include "sim/run/probe_codec.h"

#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "graph/tensor.h"

namespace nlohmann {
template <class T>
struct adl_serializer<std::optional<T>> {
  static void to_json(json& j, const std::optional<T>& v) {
    if (v) j = *v;
    else j = nullptr;
  }
  static void from_json(const json& j, std::optional<T>& v) {
    if (j.is_null()) v.reset();
    else v = j.get<T>();
  }
};
template <>
struct adl_serializer<probelab::graph::Tensor> {
  static void to_json(json& j, const probelab::graph::Tensor& t) {
    const auto b = t.bytes();
    j = {{"dtype", static_cast<int>(t.desc().dtype)},
         {"shape", t.desc().shape},
         {"format", static_cast<int>(t.desc().format)},
         {"bytes", json::binary_t(std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(b.data()),
                                                            reinterpret_cast<const std::uint8_t*>(b.data()) + b.size()))}};
  }
  static probelab::graph::Tensor from_json(const json& j) {
    probelab::graph::TensorDesc d{static_cast<probelab::graph::DType>(j.at("dtype").get<int>()),
                                  j.at("shape").get<probelab::graph::Shape>(),
                                  static_cast<probelab::graph::Format>(j.at("format").get<int>())};
    const auto& bin = j.at("bytes").get_binary();
    std::vector<std::byte> bytes(bin.size());
    for (std::size_t i = 0; i < bin.size(); ++i) bytes[i] = static_cast<std::byte>(bin[i]);
    return probelab::graph::Tensor(std::move(d), bytes);
  }
};
}  // namespace nlohmann

namespace probelab::spec {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CaptureStats, min, max, mean, abs_mean, std, l2, max_abs, count, nan_count, inf_count,
                                   zero_count, finite_min, finite_max, finite_max_abs, finite_mean, finite_abs_mean)
// The sixteen 8-byte fields listed above: a field added to CaptureStats must be listed there too.
static_assert(sizeof(CaptureStats) == 16 * 8, "CaptureStats changed: list every field in the line above");
}

namespace probelab::probes {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AnomalyRecord, kind, op_id, op, op_type, scope, fused_from, output_index, on_input,
                                   tensor, element, coordinate, value, detail, count, suppressed, step, rank, task_id,
                                   core, stream, cycle, isr_cycle, latency_cycles, more, float_status, call_stack, role,
                                   origin, source_op, source_step, source_rank, corrupted_tensor, corrupted_element,
                                   propagation_path)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TriggerEvent, watch_point, condition, actions, op, op_id, tensor, is_input, index, step,
                                   rank, stats, origin, dumped)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RuleEvent, rule, actions, step, ops_switched, counters)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BreakpointHit, op, op_id, task_id, stream, step, condition, condition_held, halt_cycle,
                                   resume_cycle, dumped, missing)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepSummary, step, float_status, records, anomalies)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CaptureAccounting, produced, dropped, drained, corrupt, seq_gaps, seq_reorders, buffers,
                                   bytes, device_bytes, stall_cycles, bytes_skipped, errors, oversize,
                                   oversize_max_bytes, lost_in_corrupt_regions)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Metrics, count, cosine, max_abs_err, max_rel_err, mean_rel_err, rmse, max_ulp, mean_ulp,
                                   within_0_1pct, within_0_5pct, nonfinite_mismatch, worst_element)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(InnerComparison, op, type, tensor, basis, metrics, pass, reasons)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OpComparison, op, op_id, op_type, step, rank, output_index, tensor, device_dtype,
                                   metrics, pass, reasons, inner, culprit_inner_op, culprit_basis, skipped)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Candidate, op, tensor, inner_op, forward_op, cause, score, step, rank, element,
                                   propagation_path, explains, replay, evidence, suggestion)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EdgeObservation, has_stats, nan_count, inf_count, count, hash, max_abs, l2, min, cycle)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepEvidence, suppressed_kinds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Magnitude, max_abs, l2, min, count)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(UploadSummary, finite, elements, nonfinite_count, nonfinite)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ReplayCheck, rank, step, op_id, kind, reproduced, detail)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(IntegrityViolation, rank, tensor, writer_op, writer_step, reader_op, reader_step,
                                   written_hash, read_hash, window_lo, window_hi)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RewindRequest, step, rank, by, expression, watch_point, op, tensor, full, all_ops,
                                   then_continue, ops)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RuntimeReport, rank, anomalies, triggers, rules_fired, breakpoints, steps, capture,
                                   counters, dump_files, dump_bytes, dump_raw_bytes, dump_entries, comparisons,
                                   first_divergence, diagnosis, observations, step_evidence, enabled_kinds,
                                   first_step, uploads, feeds, comm_groups, lr_factor, replays, integrity, fingerprint, stop_requested, rewinds, warnings)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SyncSample, rank, step, group, op, order, tensor, is_input, index, hash, stats, data)
}  // namespace probelab::probes

namespace probelab::sim {

std::vector<std::uint8_t> encode_probe_results(const ProbeRankResults& r) {
  nlohmann::json j = {{"reports", r.reports}, {"samples", r.samples}};
  return nlohmann::json::to_msgpack(j);
}

ProbeRankResults decode_probe_results(const std::vector<std::uint8_t>& bytes) {
  try {
    const nlohmann::json j = nlohmann::json::from_msgpack(bytes);
    ProbeRankResults r;
    r.reports = j.at("reports").get<std::vector<probes::RuntimeReport>>();
    r.samples = j.at("samples").get<std::vector<probes::SyncSample>>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("probe results of a partition: ") + e.what());
  }
}

}  // namespace probelab::sim
