#include "probes/diagnosis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "chip_model/spec/registers.h"
#include "probes/detail/diagnosis_rules.h"
#include "probes/insertion_pass.h"

namespace probelab::probes {

std::string_view cause_class_name(CauseClass c) {
  switch (c) {
    case CauseClass::NanSource: return "nan_source";
    case CauseClass::Fp16AccumulationOverflow: return "fp16_accumulation_overflow";
    case CauseClass::OutputRangeOverflow: return "output_range_overflow";
    case CauseClass::Overflow: return "overflow";
    case CauseClass::Underflow: return "underflow";
    case CauseClass::CollectiveOrder: return "collective_order";
    case CauseClass::FusedOpPrecision: return "fused_op_precision";
    case CauseClass::DataCorruption: return "data_corruption";
    case CauseClass::Precision: return "precision";
    case CauseClass::Condition: return "condition";
    case CauseClass::QuantizationOverflow: return "quantization_overflow";
  }
  return "?";
}

const std::vector<CauseClass>& all_cause_classes() {
  static const std::vector<CauseClass> v = {
      CauseClass::NanSource, CauseClass::Fp16AccumulationOverflow, CauseClass::OutputRangeOverflow,
      CauseClass::Overflow,  CauseClass::Underflow,                CauseClass::CollectiveOrder,
      CauseClass::FusedOpPrecision, CauseClass::DataCorruption,    CauseClass::Precision,
      CauseClass::Condition, CauseClass::QuantizationOverflow};
  return v;
}

nlohmann::json to_json(const IntegrityViolation& v) {
  return {{"rank", v.rank},
          {"tensor", v.tensor},
          {"writer_op", v.writer_op},
          {"writer_step", v.writer_step},
          {"reader_op", v.reader_op},
          {"reader_step", v.reader_step},
          {"written_hash", fmt::format("{:016x}", v.written_hash)},
          {"read_hash", fmt::format("{:016x}", v.read_hash)},
          {"window_cycles", {v.window_lo, v.window_hi}}};
}

namespace {

using namespace diagnosis_detail;

// A collective's divergence larger than this many times collective_order_limit() is not an
// order of additions (the limit is a worst case already; the slack covers the statistics' own
// rounding).
constexpr double kOrderSlack = 4;

struct Builder {
  const graph::Graph* g;
  std::map<std::pair<std::string, CauseClass>, Candidate> cands;

  Candidate& add(const std::string& op, CauseClass c, double score, std::string evidence,
                 std::optional<std::uint32_t> step = {}, std::optional<std::uint32_t> rank = {}) {
    Candidate& x = cands[{op, c}];
    if (x.op.empty()) {
      x.op = op;
      x.cause = c;
      if (g)
        if (const auto* o = g->find_op(op)) x.forward_op = o->grad_of;
    }
    if (score > x.score) x.score = score;
    else x.score += 0.001;  // corroborating evidence
    if (step && (!x.step || *step < *x.step)) {
      x.step = step;
      x.rank = rank;
    }
    if (rank && !x.rank) x.rank = rank;
    if (x.evidence.size() < 8) x.evidence.push_back(std::move(evidence));
    return x;
  }
};

}  // namespace

std::vector<Candidate> diagnose(const DiagnosisInput& in, std::size_t top_k) {
  Builder b{in.graph, {}};
  const graph::Graph* g = in.graph;
  const Facts facts{g};
  std::vector<std::uint32_t> pos;
  if (g) {
    pos.assign(g->ops().size(), 0);
    auto order = g->topo_order();
    for (std::size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<std::uint32_t>(i);
  }
  auto topo = [&](std::uint32_t id) { return id < pos.size() ? pos[id] : id; };
  auto op_at = [&](std::uint32_t id) -> const graph::Op* { return g && id < g->ops().size() ? &g->op(id) : nullptr; };
  auto replay_of = [&](const Origin& o) -> const ReplayCheck* {
    for (const auto& r : in.replays)
      if (r.rank == o.rank && r.step == o.step && r.op_id == o.op_id && o.latch && r.kind == o.latch->kind) return &r;
    return nullptr;
  };

  // 1. origins of non-finite values, in causal order
  const Origin* first_nonfinite = nullptr;
  std::size_t nth = 0, nth_quant = 0;
  for (const Origin& o : in.origins) {
    const graph::Op* op = op_at(o.op_id);
    const std::string name = op ? op->name : fmt::format("<op {}>", o.op_id);
    if (o.latch && (o.latch->detail & spec::kExcDetailQuantize)) {
      // the earliest saturation in causal order first: later ones may read its clipped results
      const double score = std::max(0.5, 0.92 - 0.01 * static_cast<double>(nth_quant++));
      auto& c = b.add(name, CauseClass::QuantizationOverflow, score, o.evidence, o.step, o.rank);
      c.tensor = o.latch->tensor;
      c.element = o.latch->element;
      c.explains += o.explains.size();
      c.suggestion = fmt::format(
          "{} clipped {} of its input {} to the low-bit format's largest value at step {}: the scale did not cover "
          "the values (with delayed scaling it comes from earlier steps' amax, so a jump in amax saturates the step it "
          "happens); give the scale headroom (margin), quantize this tensor with its current amax, or keep {} in "
          "higher precision",
          name, o.latch->count, o.latch->tensor, o.step, name);
      continue;
    }
    if (o.latch && o.latch->kind == AnomalyKind::Underflow) {
      auto& c = b.add(name, CauseClass::Underflow, 0.6, "underflow latched: " + where(*o.latch), o.step, o.rank);
      c.tensor = o.latch->tensor;
      c.element = o.latch->element;
      c.explains += o.explains.size();
      c.suggestion = suggestion(CauseClass::Underflow, name);
      continue;
    }
    const double score = nth == 0 ? 0.95 : std::max(0.5, 0.9 - 0.01 * static_cast<double>(nth - 1));
    if (!first_nonfinite) first_nonfinite = &o;
    ++nth;
    std::string path = o.path.empty() ? std::string() : fmt::format("; path: {}", fmt::join(o.path, " -> "));
    std::string explained = fmt::format("; explains {} anomal{}", o.explains.size(), o.explains.size() == 1 ? "y" : "ies");
    if (o.kind == OriginKind::Op) {
      CauseClass cause = op_cause(o, facts, op);
      const ReplayCheck* rp = replay_of(o);
      std::string ev = o.evidence + explained + path;
      if (rp) ev += fmt::format("; CPU replay on the captured inputs: {} ({})",
                                rp->reproduced ? "reproduced" : "not reproduced", rp->detail);
      if ((rp && !rp->reproduced) || o.jump) cause = CauseClass::DataCorruption;
      auto& c = b.add(name, cause, o.presumed ? score - 0.02 : score, ev, o.step, o.rank);
      if (c.tensor.empty()) c.tensor = o.tensor;
      if (!c.element) c.element = o.element;
      if (c.propagation_path.empty()) c.propagation_path = o.path;
      c.explains += o.explains.size();
      if (rp) c.replay = rp->reproduced ? "reproduced" : "not_reproduced";
      c.suggestion = o.jump
                         ? fmt::format("{} wrote a value ({:.6g}) that its inputs cannot produce, and {} went non-finite on "
                                       "it: suspect the hardware (core buffers, accumulator) or memory of {}, not the "
                                       "arithmetic of {}; rerun to see whether it reproduces",
                                       name, o.jump->magnitude, o.jump->consumer, o.tensor, o.jump->consumer)
                     : cause == CauseClass::DataCorruption
                         ? fmt::format("the replay of {} on the inputs it read gives no such value: suspect the hardware "
                                       "(core buffers, accumulator) or memory, not the arithmetic; rerun to see whether "
                                       "it reproduces",
                                       name)
                         : op_suggestion(cause, o, facts, op);
    } else {
      std::string writer = o.writer_op && op_at(*o.writer_op)
                               ? fmt::format("written by {}@{}", op_at(*o.writer_op)->name, o.writer_step.value_or(0))
                               : std::string("written by the host");
      std::string window;
      if (o.window_lo && o.window_hi)
        window = fmt::format("; changed between cycle {} and cycle {}", *o.window_lo, *o.window_hi);
      else if (o.window_hi)
        window = fmt::format("; changed before cycle {}", *o.window_hi);
      // A constant of the model (an initializer no op writes) that is non-finite as loaded, e.g. a
      // -Inf attention mask: the model's own value, read as designed, not corrupted data.
      const bool model_constant = o.kind == OriginKind::HostData && in.graph &&
                                  in.graph->initializers().count(o.tensor) != 0;
      if (model_constant) {
        writer = "an initializer of the model, non-finite as loaded";
        window.clear();
      }
      auto& c = b.add(name, model_constant ? CauseClass::NanSource : CauseClass::DataCorruption, score,
                      fmt::format("{} ({}, {}, {}{}{})", o.evidence, o.tensor,
                                  o.element ? fmt::format("element {}", *o.element) : std::string("element unknown"), writer,
                                  window, explained + path),
                      o.step, o.rank);
      if (c.tensor.empty()) c.tensor = o.tensor;
      if (!c.element) c.element = o.element;
      if (c.propagation_path.empty()) c.propagation_path = o.path;
      c.explains += o.explains.size();
      c.suggestion = model_constant
                         ? fmt::format("{} is an initializer of the model (a value it ships with) and is non-finite itself: if the model "
                                       "means it (a -Inf mask, an Inf bound), the ops reading it propagate it by design "
                                       "and the probe can exclude them; else check the export or the conversion of the "
                                       "constant to the compute dtype",
                                       o.tensor)
                     : o.kind == OriginKind::HostData
                         ? fmt::format("{} is written by the host, not by an op: check the data fed into it (input "
                                       "pipeline, initial values)",
                                       o.tensor)
                         : fmt::format("{} changed in memory after {} wrote it and before {} read it: check HBM (ECC), "
                                       "DMA and buffers; rerun to see whether it reproduces",
                                       o.tensor, o.writer_op && op_at(*o.writer_op) ? op_at(*o.writer_op)->name : "the host",
                                       name);
    }
  }

  // 2. edge integrity: hashes that differ between producer and consumer
  for (const auto& v : in.integrity) {
    auto& c = b.add(v.reader_op, CauseClass::DataCorruption, 0.97,
                    fmt::format("{} read by {}@{} rank {} has hash {:016x}, but {} wrote {:016x}; it changed in memory "
                                "between cycle {} and cycle {}",
                                v.tensor, v.reader_op, v.reader_step, v.rank, v.read_hash,
                                v.writer_op.empty() ? std::string("the host") : fmt::format("{}@{}", v.writer_op, v.writer_step),
                                v.written_hash, v.window_lo, v.window_hi),
                    v.reader_step, v.rank);
    c.tensor = v.tensor;
    c.suggestion = suggestion(CauseClass::DataCorruption, v.tensor);
  }

  // 3. user conditions: every one that fired is a candidate
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> explained_elsewhere;  // (rank, step, op)
  for (const Origin& o : in.origins)
    for (const AnomalyRecord* a : o.explains)
      if (a->role != AnomalyRole::Source && a->role != AnomalyRole::Corruption)
        explained_elsewhere.insert({a->rank, a->step, a->op_id});
  std::map<std::pair<std::uint32_t, CauseClass>, std::vector<const TriggerEvent*>> per_step;
  for (const auto& t : in.triggers) per_step[{t.step, condition_class(t)}].push_back(&t);
  for (auto& [key, ts] : per_step) {
    std::stable_sort(ts.begin(), ts.end(), [&](auto* x, auto* y) { return topo(x->op_id) < topo(y->op_id); });
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const TriggerEvent& t = *ts[i];
      const CauseClass c = key.second;
      std::string ev = fmt::format("condition '{}' ({}) held on {} ({} {}{}) at step {} rank {}: {}", t.condition,
                                   t.watch_point, t.tensor, t.op, t.is_input ? "in" : "out", t.index, t.step, t.rank,
                                   condition_values(t));
      double score = i == 0 ? 0.8 : 0.3;
      if (c == CauseClass::NanSource) {
        const bool elsewhere = explained_elsewhere.count({t.rank, t.step, t.op_id}) > 0 ||
                               (first_nonfinite && (first_nonfinite->step < t.step ||
                                                    (first_nonfinite->step == t.step && topo(first_nonfinite->op_id) < topo(t.op_id))));
        score = elsewhere ? 0.3 : (i == 0 ? 0.92 : 0.3);
        if (elsewhere) ev += "; an earlier origin explains it (see the first candidate)";
      }
      auto& cand = b.add(t.op, c, score, ev, t.step, t.rank);
      if (cand.tensor.empty()) cand.tensor = t.tensor;
      if (cand.suggestion.empty()) cand.suggestion = suggestion(c, t.op);
      if (cand.suggestion.empty()) cand.suggestion = suggestion(CauseClass::Condition, t.op);
    }
  }

  // 4. reference comparisons
  const OpComparison* first = g ? first_divergence(in.comparisons, *g) : nullptr;
  for (const auto& c : in.comparisons) {
    if (c.pass || !c.skipped.empty()) continue;
    std::string ev = fmt::format("{} fails the reference comparison at step {} rank {}: cosine {:.6g}, max_abs_err {:.3g}, "
                                 "max_rel_err {:.3g}, max_ulp {}, {:.1f}% of elements within 0.5% ({})",
                                 c.op, c.step, c.rank, c.metrics.cosine, c.metrics.max_abs_err, c.metrics.max_rel_err,
                                 c.metrics.max_ulp, 100 * c.metrics.within_0_5pct, fmt::join(c.reasons, "; "));
    const bool is_first = &c == first;
    if (!c.culprit_inner_op.empty()) {
      auto& x = b.add(c.op, CauseClass::FusedOpPrecision, is_first ? 0.87 : 0.5,
                      fmt::format("{}; decomposition ({}) names inner op {}", ev, c.culprit_basis, c.culprit_inner_op),
                      c.step, c.rank);
      x.inner_op = c.culprit_inner_op;
      x.tensor = c.tensor;
      x.suggestion = suggestion(CauseClass::FusedOpPrecision, c.op);
      continue;
    }
    const bool sparse = corruption_pattern(c.metrics, g ? g->find_op(c.op) : nullptr);
    const CauseClass cause = sparse ? CauseClass::DataCorruption : CauseClass::Precision;
    double score = is_first ? 0.6 : 0.25;
    if (sparse)
      ev += fmt::format("; the error is confined to a few elements ({:.1f}% outside 0.5%, {:.1f}% within 0.1%, worst {} "
                        "ULP): a corruption pattern, not rounding",
                        100 * (1.0 - c.metrics.within_0_5pct), 100 * c.metrics.within_0_1pct, c.metrics.max_ulp);
    if (is_first && first_nonfinite && c.rank == first_nonfinite->rank &&
        (c.step < first_nonfinite->step ||
         (c.step == first_nonfinite->step && topo(c.op_id) < topo(first_nonfinite->op_id)))) {
      score = 0.97;
      ev += fmt::format("; it precedes the first non-finite value ({}@{}) in causal order",
                        op_at(first_nonfinite->op_id) ? op_at(first_nonfinite->op_id)->name : "?", first_nonfinite->step);
    }
    auto& x = b.add(c.op, cause, score, (is_first ? "first divergence: " : "") + ev, c.step, c.rank);
    x.tensor = c.tensor;
    x.element = c.metrics.worst_element;
    x.suggestion = suggestion(cause, c.op);
  }

  // 5. cross-rank consistency
  if (in.consistency && in.consistency->first) {
    const Divergence& d = *in.consistency->first;
    std::string growth;
    for (auto [s, v] : in.consistency->growth)
      growth += fmt::format("{}step {}: {:.3g}", growth.empty() ? "" : ", ", s, v);
    const std::string who = divergence_who(d, in.consistency->reference_rank);
    std::string ev = fmt::format("{} first at {} ({} {}{}) step {}: max abs diff {:.3g} ({}){}{}", who, d.op, d.tensor,
                                 d.is_input ? "in" : "out", d.index, d.step, d.max_abs_diff, d.basis,
                                 growth.empty() ? "" : "; growth " + growth, in.consistency->growing ? " (growing)" : "");
    const graph::Op* o = g ? g->find_op(d.op) : nullptr;
    const bool coll = o && is_collective_type(o->type);
    // One rank's NaN latched as produced there from finite inputs (no overflow before it): no
    // order of additions of finite values gives a NaN without an infinity first, so the
    // divergence is that value; it corroborates the origin's candidate.
    const bool nan_origin = first_nonfinite && first_nonfinite->kind == OriginKind::Op && first_nonfinite->latch &&
                            first_nonfinite->latch->kind == AnomalyKind::Invalid && d.ranks.size() == 1 &&
                            d.ranks[0] == first_nonfinite->rank && d.step == first_nonfinite->step && o &&
                            o->id == first_nonfinite->op_id;
    // A difference beyond what any order of additions changes in the result (a gather's or a
    // broadcast's: any) is not an order: the rank's result was corrupted.
    // A gather or a broadcast adds nothing: any difference, even one a hash basis cannot size.
    const bool moves_values = coll && collective_moves_values(o->type);
    // A hash-only divergence is sized from below by the captures of the edge, when there are some.
    const double size = std::isfinite(d.max_abs_diff) ? d.max_abs_diff : in.divergence_lower_bound.value_or(std::numeric_limits<double>::quiet_NaN());
    const bool beyond_order = coll && (moves_values || (std::isfinite(size) && in.divergence_order_limit &&
                                                        size > kOrderSlack * *in.divergence_order_limit));
    if (beyond_order && std::isfinite(d.max_abs_diff) && in.divergence_order_limit)
      ev += fmt::format("; beyond what an order of additions changes in it ({:.3g}{})", *in.divergence_order_limit,
                        *in.divergence_order_limit > 0 ? " from its members' captured inputs" : ": it moves values");
    else if (beyond_order && moves_values)
      ev += fmt::format("; {} moves values: no order of additions changes its result", o->type);
    else if (beyond_order)
      ev += fmt::format("; its captures differ by at least {:.3g}, beyond what an order of additions changes in it "
                        "({:.3g} from its members' captured inputs)",
                        size, *in.divergence_order_limit);
    auto& x = nan_origin ? b.add(d.op, op_cause(*first_nonfinite, facts, o), 0, "the consistency check sees it: " + ev, d.step)
              : beyond_order ? b.add(d.op, CauseClass::DataCorruption, 0.9, ev, d.step)
                             : b.add(d.op, coll ? CauseClass::CollectiveOrder : CauseClass::DataCorruption,
                                     coll ? 0.9 : 0.55, ev, d.step);
    if (!nan_origin) {
      x.tensor = d.tensor;
      if (d.ranks.size() == 1) x.rank = d.ranks[0];  // one rank out of line: it is the place
      x.suggestion = suggestion(x.cause, d.op);
    }
  }

  // 6. capture path corruption
  if (in.corrupt_records > 0) {
    auto& x = b.add("<capture path>", CauseClass::DataCorruption, 0.2,
                    fmt::format("{} capture record(s) failed their CRC/format check", in.corrupt_records));
    x.suggestion = suggestion(CauseClass::DataCorruption, "the capture path");
  }

  std::vector<Candidate> out;
  for (auto& [k, c] : b.cands) out.push_back(std::move(c));
  std::sort(out.begin(), out.end(), [&](const Candidate& x, const Candidate& y) {
    if (x.score != y.score) return x.score > y.score;
    std::uint32_t sx = x.step.value_or(UINT32_MAX), sy = y.step.value_or(UINT32_MAX);
    if (sx != sy) return sx < sy;
    std::uint32_t px = g && g->find_op(x.op) ? topo(g->find_op(x.op)->id) : UINT32_MAX;
    std::uint32_t py = g && g->find_op(y.op) ? topo(g->find_op(y.op)->id) : UINT32_MAX;
    if (px != py) return px < py;
    if (x.op != y.op) return x.op < y.op;
    return x.cause < y.cause;
  });
  if (out.size() > top_k) out.resize(top_k);
  return out;
}

nlohmann::json to_json(const Candidate& c) {
  nlohmann::json j = {{"op", c.op},
                      {"cause", cause_class_name(c.cause)},
                      {"score", std::round(c.score * 1000) / 1000},
                      {"evidence", c.evidence},
                      {"suggestion", c.suggestion},
                      {"explains", c.explains},
                      {"propagation_path", c.propagation_path}};
  if (!c.tensor.empty()) j["tensor"] = c.tensor;
  if (!c.inner_op.empty()) j["inner_op"] = c.inner_op;
  if (!c.forward_op.empty()) j["forward_op"] = c.forward_op;
  if (!c.replay.empty()) j["replay"] = c.replay;
  j["element"] = c.element ? nlohmann::json(*c.element) : nlohmann::json(nullptr);
  j["step"] = c.step ? nlohmann::json(*c.step) : nlohmann::json(nullptr);
  j["rank"] = c.rank ? nlohmann::json(*c.rank) : nlohmann::json(nullptr);
  return j;
}

}  // namespace probelab::probes
