#include "probes/diagnosis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "probes/insertion_pass.h"

namespace probelab::probes {

std::string_view cause_class_name(CauseClass c) {
  switch (c) {
    case CauseClass::NanSource: return "nan_source";
    case CauseClass::Fp16AccumulationOverflow: return "fp16_accumulation_overflow";
    case CauseClass::Overflow: return "overflow";
    case CauseClass::Underflow: return "underflow";
    case CauseClass::CollectiveOrder: return "collective_order";
    case CauseClass::FusedOpPrecision: return "fused_op_precision";
    case CauseClass::DataCorruption: return "data_corruption";
    case CauseClass::Precision: return "precision";
  }
  return "?";
}

namespace {

bool accumulating(std::string_view type) {
  static const std::set<std::string_view> kinds = {"MatMul", "Gemm", "BatchMatMul", "Conv", "Conv2d", "ReduceSum",
                                                   "ReduceMean", "FusedMatMulBiasGelu", "FusedConvBnRelu"};
  return kinds.count(type) || is_collective_type(type) || type.starts_with("Conv") || type.starts_with("MatMul");
}

std::string suggestion(CauseClass c, const std::string& op) {
  switch (c) {
    case CauseClass::NanSource:
      return fmt::format("inspect the inputs of {} at that step (0*Inf, Inf-Inf, division by zero, log/sqrt of a "
                         "negative); guard it with an epsilon or clamp, and check the data that feeds it",
                         op);
    case CauseClass::Fp16AccumulationOverflow:
      return fmt::format("accumulate {} in FP32 (or split K with FP32 partial sums); use dynamic loss scaling and "
                         "gradient clipping to keep FP16 values below 65504",
                         op);
    case CauseClass::Overflow:
      return fmt::format("use dynamic loss scaling and gradient clipping around {}; compute it in FP32 if its range "
                         "exceeds FP16",
                         op);
    case CauseClass::Underflow:
      return fmt::format("gradients vanish at {}: re-initialise this path (e.g. He/Xavier scaling), add loss scaling "
                         "so small gradients stay representable, and clip/normalise between the layers",
                         op);
    case CauseClass::CollectiveOrder:
      return fmt::format("ranks reduce {} in different orders: accumulate the communication buffer in FP32, use a "
                         "rank-independent algorithm (ring/tree) or a fixed reduction order, and revisit the "
                         "AllReduce grouping",
                         op);
    case CauseClass::FusedOpPrecision:
      return fmt::format("compute the named inner op of {} in FP32 (or disable this fusion pattern) and compare again",
                         op);
    case CauseClass::DataCorruption:
      return fmt::format("values of {} changed without an arithmetic cause: check memory (ECC), DMA and buffers; "
                         "rerun to see whether it reproduces",
                         op);
    case CauseClass::Precision:
      return fmt::format("{} deviates from the FP64 reference: raise its compute/accumulation precision or check its "
                         "kernel",
                         op);
  }
  return {};
}

struct Builder {
  const graph::Graph* g;
  std::map<std::pair<std::string, CauseClass>, Candidate> cands;

  Candidate& add(const std::string& op, CauseClass c, double score, std::string evidence,
                 std::optional<std::uint32_t> step = {}, std::optional<std::uint32_t> rank = {}) {
    Candidate& x = cands[{op, c}];
    if (x.op.empty()) {
      x.op = op;
      x.cause = c;
      x.suggestion = suggestion(c, op);
      if (g)
        if (const auto* o = g->find_op(op)) x.forward_op = o->grad_of;
    }
    if (score > x.score) x.score = score;
    else x.score += 0.01;  // corroborating evidence
    if (step && (!x.step || *step < *x.step)) x.step = step;
    if (rank && !x.rank) x.rank = rank;
    if (x.evidence.size() < 8) x.evidence.push_back(std::move(evidence));
    return x;
  }
};

}  // namespace

std::vector<Candidate> diagnose(const DiagnosisInput& in, std::size_t top_k) {
  Builder b{in.graph, {}};
  const graph::Graph* g = in.graph;
  std::vector<std::uint32_t> pos;
  if (g) {
    pos.assign(g->ops().size(), 0);
    auto order = g->topo_order();
    for (std::size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<std::uint32_t>(i);
  }
  auto topo = [&](std::uint32_t id) { return id < pos.size() ? pos[id] : id; };
  auto type_of = [&](const std::string& op) -> std::string {
    if (g)
      if (const auto* o = g->find_op(op)) return o->type;
    return {};
  };
  auto dtype_of = [&](const std::string& tensor) {
    if (g)
      if (const auto* t = g->find_tensor(tensor)) return t->desc.dtype;
    return graph::DType::F32;
  };

  // 1. latched anomalies
  std::set<std::uint32_t> source_steps;
  for (const auto& a : in.anomalies) {
    std::string where = fmt::format("{} at {} element {}{} step {} rank {} (cycle {}, latency {} cycles)",
                                    anomaly_kind_name(a.kind), a.op, a.element,
                                    a.coordinate.empty() ? "" : fmt::format(" {}", fmt::join(a.coordinate, ",")),
                                    a.step, a.rank, a.cycle, a.latency_cycles);
    switch (a.kind) {
      case AnomalyKind::Invalid:
      case AnomalyKind::NanInput:
        if (a.is_source) {
          b.add(a.op, CauseClass::NanSource, 0.95, "first NaN of the step produced here: " + where, a.step, a.rank);
        } else {
          auto& c = b.add(a.source_op, CauseClass::NanSource, 0.9,
                          fmt::format("{} (propagation path: {})", where, fmt::join(a.propagation_path, " -> ")),
                          a.step, a.rank);
          c.tensor = c.tensor.empty() && g && g->find_op(a.source_op) && !g->find_op(a.source_op)->outputs.empty()
                         ? g->find_op(a.source_op)->outputs[0]
                         : c.tensor;
          bool src_flagged = false;
          for (const auto& o : in.anomalies)
            if (o.op == a.source_op && o.step == a.step) src_flagged = true;
          if (!src_flagged)
            b.add(a.source_op, CauseClass::DataCorruption, 0.35,
                  fmt::format("{} read a NaN that {} produced without raising an exception flag", a.op, a.source_op),
                  a.step, a.rank);
        }
        break;
      case AnomalyKind::Overflow: {
        graph::DType dt = dtype_of(a.tensor);
        bool acc = accumulating(a.op_type) && (dt == graph::DType::F16 || dt == graph::DType::BF16);
        b.add(a.op, acc ? CauseClass::Fp16AccumulationOverflow : CauseClass::Overflow, acc ? 0.88 : 0.7,
              "overflow latched: " + where, a.step, a.rank)
            .tensor = a.tensor;
        break;
      }
      case AnomalyKind::Underflow:
        b.add(a.op, CauseClass::Underflow, a.is_source ? 0.6 : 0.4, "underflow latched: " + where, a.step, a.rank).tensor =
            a.tensor;
        break;
    }
  }

  // 2. condition triggers: the earliest op of a step whose statistics look wrong is the candidate
  std::map<std::pair<std::uint32_t, CauseClass>, std::vector<const TriggerEvent*>> per_step;
  for (const auto& t : in.triggers) {
    if (!t.stats) continue;
    const auto& s = *t.stats;
    CauseClass c;
    if (s.nan_count > 0 || s.inf_count > 0) c = CauseClass::NanSource;
    else if (s.max_abs > 32752.0 && dtype_of(t.tensor) == graph::DType::F16) c = CauseClass::Overflow;
    else if (s.count > 0 && (s.abs_mean < 1e-6 || s.zero_count * 10 >= s.count * 9)) c = CauseClass::Underflow;
    else continue;
    if (t.is_input && c == CauseClass::NanSource) continue;  // an input carrying NaN is never its reader's fault
    per_step[{t.step, c}].push_back(&t);
  }
  for (auto& [key, ts] : per_step) {
    std::sort(ts.begin(), ts.end(), [&](auto* x, auto* y) { return topo(x->op_id) < topo(y->op_id); });
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const TriggerEvent& t = *ts[i];
      const auto& s = *t.stats;
      std::string ev = fmt::format("condition '{}' held on {} ({} {}{}) at step {}: abs_mean {:.3g}, max_abs {:.3g}, "
                                   "nan {}, inf {}, zeros {}/{}",
                                   t.condition, t.tensor, t.op, t.is_input ? "in" : "out", t.index, t.step, s.abs_mean,
                                   s.max_abs, s.nan_count, s.inf_count, s.zero_count, s.count);
      double score = i == 0 ? (key.second == CauseClass::NanSource ? 0.92 : 0.8) : 0.3;
      CauseClass c = key.second;
      if (c == CauseClass::Overflow && accumulating(type_of(t.op))) c = CauseClass::Fp16AccumulationOverflow;
      b.add(t.op, c, score, ev, t.step, t.rank).tensor = t.tensor;
    }
  }

  // 3. reference comparisons
  const OpComparison* first = g ? first_divergence(in.comparisons, *g) : nullptr;
  for (const auto& c : in.comparisons) {
    if (c.pass || !c.skipped.empty()) continue;
    std::string ev = fmt::format("{} fails the reference comparison at step {}: cosine {:.6g}, max_abs_err {:.3g}, "
                                 "max_rel_err {:.3g}, max_ulp {} ({})",
                                 c.op, c.step, c.metrics.cosine, c.metrics.max_abs_err, c.metrics.max_rel_err,
                                 c.metrics.max_ulp, fmt::join(c.reasons, "; "));
    bool is_first = &c == first;
    if (!c.culprit_inner_op.empty()) {
      auto& x = b.add(c.op, CauseClass::FusedOpPrecision, is_first ? 0.87 : 0.5,
                      fmt::format("{}; decomposition ({}) names inner op {}", ev, c.culprit_basis, c.culprit_inner_op),
                      c.step, c.rank);
      x.inner_op = c.culprit_inner_op;
      x.tensor = c.tensor;
    } else {
      b.add(c.op, CauseClass::Precision, is_first ? 0.6 : 0.25, (is_first ? "first divergence: " : "") + ev, c.step, c.rank)
          .tensor = c.tensor;
    }
  }

  // 4. cross-rank consistency
  if (in.consistency && in.consistency->first) {
    const Divergence& d = *in.consistency->first;
    std::string growth;
    for (auto [s, v] : in.consistency->growth)
      growth += fmt::format("{}step {}: {:.3g}", growth.empty() ? "" : ", ", s, v);
    std::string ev = fmt::format("ranks {} diverge from reference rank {} first at {} ({} {}{}) step {}: max abs diff "
                                 "{:.3g} ({}){}{}",
                                 fmt::join(d.ranks, ","), in.consistency->reference_rank, d.op, d.tensor,
                                 d.is_input ? "in" : "out", d.index, d.step, d.max_abs_diff, d.basis,
                                 growth.empty() ? "" : "; growth " + growth, in.consistency->growing ? " (growing)" : "");
    bool coll = is_collective_type(type_of(d.op));
    b.add(d.op, coll ? CauseClass::CollectiveOrder : CauseClass::DataCorruption, coll ? 0.9 : 0.55, ev, d.step).tensor =
        d.tensor;
  }

  // 5. capture path corruption
  if (in.corrupt_records > 0)
    b.add("<capture path>", CauseClass::DataCorruption, 0.2,
          fmt::format("{} capture record(s) failed their CRC/format check", in.corrupt_records));

  std::vector<Candidate> out;
  for (auto& [k, c] : b.cands) out.push_back(std::move(c));
  std::sort(out.begin(), out.end(), [&](const Candidate& x, const Candidate& y) {
    if (x.score != y.score) return x.score > y.score;
    std::uint32_t sx = x.step.value_or(UINT32_MAX), sy = y.step.value_or(UINT32_MAX);
    if (sx != sy) return sx < sy;
    std::uint32_t px = g && g->find_op(x.op) ? topo(g->find_op(x.op)->id) : UINT32_MAX;
    std::uint32_t py = g && g->find_op(y.op) ? topo(g->find_op(y.op)->id) : UINT32_MAX;
    if (px != py) return px < py;
    return x.op < y.op;
  });
  if (out.size() > top_k) out.resize(top_k);
  return out;
}

nlohmann::json to_json(const Candidate& c) {
  nlohmann::json j = {{"op", c.op},
                      {"cause", cause_class_name(c.cause)},
                      {"score", std::round(c.score * 1000) / 1000},
                      {"evidence", c.evidence},
                      {"suggestion", c.suggestion}};
  if (!c.tensor.empty()) j["tensor"] = c.tensor;
  if (!c.inner_op.empty()) j["inner_op"] = c.inner_op;
  if (!c.forward_op.empty()) j["forward_op"] = c.forward_op;
  j["step"] = c.step ? nlohmann::json(*c.step) : nlohmann::json(nullptr);
  j["rank"] = c.rank ? nlohmann::json(*c.rank) : nlohmann::json(nullptr);
  return j;
}

}  // namespace probelab::probes
