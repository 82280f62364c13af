#include "sim/run/probe_results.h"

#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chip_model/spec/registers.h"
#include "probes/anomaly.h"
#include "probes/compare.h"
#include "probes/diagnosis.h"

namespace probelab::sim {

using nlohmann::json;

json float_status_names(std::uint32_t bits) {
  static const std::pair<std::uint32_t, const char*> kNames[] = {
      {spec::kFsOverflow, "overflow"},   {spec::kFsUnderflow, "underflow"},     {spec::kFsInvalid, "invalid"},
      {spec::kFsNanInput, "nan_input"},  {spec::kFsDenormal, "denormal"},       {spec::kFsDivByZero, "div_by_zero"},
      {spec::kFsInfInput, "inf_input"}};
  json names = json::array();
  for (const auto& [bit, name] : kNames)
    if (bits & bit) names.push_back(name);
  return names;
}

namespace {

json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json anomaly(const probes::AnomalyRecord& a) {
  json j = {{"kind", std::string(probes::anomaly_kind_name(a.kind))},
            {"op", a.op},
            {"op_type", a.op_type},
            {"tensor", a.tensor},
            {"on_input", a.on_input},
            {"element", a.element},
            {"coordinate", a.coordinate},
            {"value", probes::json_number(a.value)},
            {"raised_by", probes::detail_names(a.detail)},
            {"suppressed", a.suppressed},
            {"step", a.step},
            {"rank", a.rank},
            {"cycle", a.cycle},
            {"latency_cycles", a.latency_cycles},
            {"core", spec::core_index_of(a.core)},
            {"core_kind", std::string(probes::core_kind_name(a.core))},
            {"role", std::string(probes::anomaly_role_name(a.role))},
            {"origin", std::string(probes::origin_kind_name(a.origin))},
            {"source_op", a.source_op},
            {"source_step", a.source_step},
            {"source_rank", a.source_rank},
            {"propagation_path", a.propagation_path},
            {"call_stack", a.call_stack},
            {"fused_from", a.fused_from},
            {"float_status", float_status_names(a.float_status)}};
  if (!a.corrupted_tensor.empty()) {
    j["corrupted_tensor"] = a.corrupted_tensor;
    j["corrupted_element"] = a.corrupted_element ? json(*a.corrupted_element) : json(nullptr);
  }
  return j;
}

json integrity(const probes::IntegrityViolation& v) {
  return {{"kind", "integrity"},
          {"op", v.reader_op},
          {"tensor", v.tensor},
          {"step", v.reader_step},
          {"rank", v.rank},
          {"writer_op", v.writer_op},
          {"writer_step", v.writer_step},
          {"written_hash", fmt::format("{:016x}", v.written_hash)},
          {"read_hash", fmt::format("{:016x}", v.read_hash)},
          {"window_cycles", {v.window_lo, v.window_hi}}};
}

json condition(const probes::TriggerEvent& t) {
  return {{"kind", "condition"}, {"op", t.op},       {"tensor", t.tensor},         {"step", t.step},
          {"rank", t.rank},      {"condition", t.condition}, {"watch_point", t.watch_point},
          {"actions", t.actions}, {"origin", t.origin}};
}

json comparison(const probes::OpComparison& c) {
  json inner = json::array();
  for (const auto& i : c.inner)
    inner.push_back({{"op", i.op}, {"type", i.type}, {"passed", i.pass}, {"basis", i.basis},
                     {"cosine", num(i.metrics.cosine)}, {"max_abs_err", num(i.metrics.max_abs_err)},
                     {"reasons", i.reasons}});
  return {{"op", c.op},
          {"op_type", c.op_type},
          {"step", c.step},
          {"rank", c.rank},
          {"tensor", c.tensor},
          {"passed", c.pass},
          {"metrics", probes::to_json(c.metrics)},
          {"reasons", c.reasons},
          {"inner_culprit", c.culprit_inner_op.empty() ? json(nullptr) : json(c.culprit_inner_op)},
          {"inner", inner}};
}

json candidate(const probes::Candidate& c) {
  json j = {{"op", c.op},
            {"cause", std::string(probes::cause_class_name(c.cause))},
            {"score", num(c.score)},
            {"tensor", c.tensor},
            {"inner_op", c.inner_op},
            {"forward_op", c.forward_op},
            {"explains", c.explains},
            {"propagation_path", c.propagation_path},
            {"replay", c.replay.empty() ? json(nullptr) : json(c.replay)},
            {"evidence", c.evidence},
            {"suggestion", c.suggestion}};
  j["element"] = c.element ? json(*c.element) : json(nullptr);
  j["step"] = c.step ? json(*c.step) : json(nullptr);
  j["rank"] = c.rank ? json(*c.rank) : json(nullptr);
  return j;
}

json consistency(const probes::ConsistencyResult& r) {
  json j = probes::to_json(r);
  json per_step = json::array();
  for (auto [step, v] : r.growth) per_step.push_back({{"step", step}, {"max_abs_diff", num(v)}});
  j["per_step"] = per_step;
  j.erase("growth");
  return j;
}

}  // namespace

void merge_probe_results(json& res, const probes::JobReport& job, const graph::Graph& executed) {
  json anomalies = json::array(), conditions = json::array(), breakpoints = json::array(), rules = json::array();
  json comparisons = json::array(), warnings = json::array();
  std::map<std::string, std::vector<std::uint32_t>> warned;  // warning -> the ranks that gave it
  std::vector<std::string> warning_order;                    // warnings in order of first appearance
  std::map<std::string, std::pair<std::uint64_t, std::string>> skipped;  // reason -> count, first example
  const probes::OpComparison* first = nullptr;
  std::vector<probes::OpComparison> all_cmp;
  json cap = {{"records", 0}, {"drained", 0}, {"dropped", 0}, {"corrupt", 0}, {"bytes", 0}, {"device_bytes", 0},
              {"stall_cycles", 0}, {"buffers", 0}, {"dump_files", 0}, {"dump_bytes", 0}, {"unaccounted", 0},
              {"oversize", 0}, {"lost_in_corrupt_regions", 0}};
  auto add = [&cap](const char* k, std::uint64_t v) { cap[k] = cap[k].get<std::uint64_t>() + v; };
  json replays = json::array();
  for (const auto& rr : job.ranks)
    for (const auto& r : rr.replays)
      replays.push_back({{"op", r.op_id < executed.ops().size() ? executed.op(r.op_id).name : std::string("?")},
                         {"step", r.step},
                         {"rank", r.rank},
                         {"kind", std::string(probes::anomaly_kind_name(r.kind))},
                         {"reproduced", r.reproduced},
                         {"detail", r.detail}});
  res["replays"] = replays;
  json fingerprints = json::array();
  for (const auto& rr : job.ranks) fingerprints.push_back(fmt::format("{:016x}", rr.fingerprint));
  res["fingerprints"] = fingerprints;
  json float_status = json::array();
  for (const auto& rr : job.ranks)
    for (const auto& st : rr.steps)
      if (st.float_status)
        float_status.push_back({{"rank", rr.rank}, {"step", st.step}, {"flags", float_status_names(st.float_status)}});
  res["float_status"] = float_status;
  for (const auto& rr : job.ranks) {
    for (const auto& a : rr.anomalies) anomalies.push_back(anomaly(a));
    for (const auto& v : rr.integrity) conditions.push_back(integrity(v));
    for (const auto& t : rr.triggers) conditions.push_back(condition(t));
    for (const auto& b : rr.breakpoints)
      breakpoints.push_back({{"op", b.op}, {"step", b.step}, {"rank", rr.rank}, {"condition", b.condition},
                             {"halt_cycle", b.halt_cycle}, {"resume_cycle", b.resume_cycle}, {"dumped", b.dumped},
                             {"missing", b.missing}});
    for (const auto& e : rr.rules_fired) rules.push_back(probes::to_json(e));
    for (const auto& c : rr.comparisons) {
      if (!c.skipped.empty()) {
        // Aggregate by the kind of reason ("inputs not captured at step 2: x" -> "inputs not captured").
        std::string why = c.skipped.substr(0, std::min(c.skipped.find(':'), c.skipped.find(" at step")));
        auto& [n, example] = skipped[why];
        if (n++ == 0) example = fmt::format("{} step {} rank {}: {}", c.op, c.step, c.rank, c.skipped);
        continue;
      }
      comparisons.push_back(comparison(c));
      all_cmp.push_back(c);
    }
    const auto& a = rr.capture;
    add("records", a.produced);
    add("drained", a.drained);
    add("dropped", a.dropped);
    add("corrupt", a.corrupt);
    add("oversize", a.oversize);
    add("lost_in_corrupt_regions", a.lost_in_corrupt_regions);
    add("bytes", a.bytes);
    add("device_bytes", a.device_bytes);
    add("stall_cycles", a.stall_cycles);
    add("buffers", a.buffers);
    add("dump_files", rr.dump_files);
    add("dump_bytes", rr.dump_bytes);
    cap["unaccounted"] = cap["unaccounted"].get<std::int64_t>() + a.unaccounted();
    for (const auto& wmsg : rr.warnings) {
      auto [it, fresh] = warned.try_emplace(wmsg);
      if (fresh) warning_order.push_back(wmsg);
      it->second.push_back(rr.rank);
    }
  }
  // Every rank runs the same probe config, so most warnings come once per rank: each is reported
  // once, naming its ranks unless every rank gave it.
  for (const auto& wmsg : warning_order) {
    const auto& on = warned.at(wmsg);
    if (on.size() == job.ranks.size())
      warnings.push_back(wmsg);
    else
      warnings.push_back(fmt::format("{} (rank{} {})", wmsg, on.size() > 1 ? "s" : "", fmt::join(on, ", ")));
  }
  first = probes::first_divergence(all_cmp, executed);
  for (auto& c : conditions) anomalies.push_back(std::move(c));
  json diagnosis = json::array();
  for (const auto& c : job.diagnosis) diagnosis.push_back(candidate(c));
  // The earliest rewind request of any rank (step, then rank): what the runner re-executes.
  const probes::RewindRequest* rewind = nullptr;
  for (const auto& rr : job.ranks)
    for (const auto& rq : rr.rewinds)
      if (!rewind || rq.step < rewind->step || (rq.step == rewind->step && rq.rank < rewind->rank)) rewind = &rq;
  res["rewind_request"] = rewind ? probes::to_json(*rewind) : json(nullptr);
  res["anomalies"] = anomalies;
  res["breakpoints"] = breakpoints;
  res["rules_fired"] = rules;
  res["comparisons"] = comparisons;
  json skipped_json = json::array();
  for (const auto& [reason, v] : skipped)
    skipped_json.push_back({{"reason", reason}, {"count", v.first}, {"example", v.second}});
  res["comparisons_skipped"] = skipped_json;
  res["first_failing_op"] = first ? json(first->op) : json(nullptr);
  res["consistency"] = consistency(job.consistency);
  res["diagnosis"] = diagnosis;
  res["capture"] = cap;
  res["probe_warnings"] = warnings;
}

}  // namespace probelab::sim
