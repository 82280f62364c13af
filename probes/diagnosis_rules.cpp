#include "probes/detail/diagnosis_rules.h"

#include <algorithm>
#include <set>

#include "chip_model/spec/registers.h"
#include "probes/insertion_pass.h"

namespace probelab::probes::diagnosis_detail {

std::string accumulator_name(std::uint32_t detail, bool cube) {
  if (detail & spec::kExcDetailAccFp16) return "an FP16 accumulator";
  if (detail & spec::kExcDetailPartial) return "FP32 accumulation with FP16 split-K partial sums";
  return cube ? "the FP32 accumulator (L0C)" : "FP32 Vector arithmetic";
}

bool is_cube_type(std::string_view t) {
  return t.find("MatMul") != std::string_view::npos || t.find("Conv") != std::string_view::npos || t == "Gemm";
}

std::string where(const AnomalyRecord& a) {
  return fmt::format("{} at {} element {}{} step {} rank {} (value {}, cycle {}, latency {} cycles)",
                     anomaly_kind_name(a.kind), a.op, a.element,
                     a.coordinate.empty() ? "" : fmt::format(" [{}]", fmt::join(a.coordinate, ", ")), a.step, a.rank,
                     a.value, a.cycle, a.latency_cycles);
}

/// Cause of an origin at an op from its latch (before any replay).
CauseClass op_cause(const Origin& o, const Facts& f, const graph::Op* op) {
  if (!o.latch || o.latch->kind != AnomalyKind::Overflow) return CauseClass::NanSource;
  const std::uint32_t d = o.latch->detail;
  if ((d & spec::kExcDetailAccFp16) && (d & spec::kExcDetailAccumulator)) return CauseClass::Fp16AccumulationOverflow;
  if (d & spec::kExcDetailPartial) return CauseClass::Fp16AccumulationOverflow;
  if (d & spec::kExcDetailCollective) {
    // Only a collective that adds can overflow its accumulator; a gather or a broadcast moves
    // values (its `accumulation` is its gradient's, a ReduceScatter's).
    const bool adds = op && is_collective_type(op->type) && !collective_moves_values(op->type);
    return adds && f.collective_accumulation(op->name) == "fp16" ? CauseClass::Fp16AccumulationOverflow
                                                                 : CauseClass::Overflow;
  }
  if (d & spec::kExcDetailConversion) return CauseClass::OutputRangeOverflow;
  return CauseClass::Overflow;
}

std::string op_suggestion(CauseClass c, const Origin& o, const Facts& f, const graph::Op* op) {
  const std::string name = op ? op->name : "?";
  const std::string out_dtype = o.latch ? f.dtype_of(o.latch->tensor) : (op && !op->outputs.empty() ? f.dtype_of(op->outputs[0]) : "?");
  const std::uint32_t d = o.latch ? o.latch->detail : 0;
  const bool cube = op && is_cube_type(op->type);
  switch (c) {
    case CauseClass::NanSource:
      return fmt::format("inspect the inputs of {} at step {} (0*Inf, Inf-Inf, division by zero, log/sqrt of a negative); "
                         "guard it with an epsilon or clamp; it computes in {} with a {} output",
                         name, o.step, accumulator_name(d, cube), out_dtype);
    case CauseClass::Fp16AccumulationOverflow:
      if (d & spec::kExcDetailCollective)
        return fmt::format("{} reduces in an FP16 communication buffer: accumulate it in FP32 (allreduce accumulation: "
                           "fp32); {}",
                           name, f.loss_scale());
      return fmt::format("{} overflowed in {}: accumulate in FP32 (the Cube default) or keep split-K partials in FP32; "
                         "{}",
                         name, accumulator_name(d, cube), f.loss_scale());
    case CauseClass::OutputRangeOverflow:
      return fmt::format("{} accumulates in FP32 ({}) and only the conversion to its {} output overflowed: lower the loss "
                         "scale ({}), or give the op a BF16/FP32 output",
                         name, o.latch ? fmt::format("value {:g}", o.latch->value) : std::string("value unknown"), out_dtype,
                         f.loss_scale());
    case CauseClass::Overflow:
      return fmt::format("{} overflowed in its computation ({} output): clamp its input range, use dynamic loss scaling "
                         "({}) and gradient clipping",
                         name, out_dtype, f.loss_scale());
    default: return {};
  }
}

std::string suggestion(CauseClass c, const std::string& op) {
  switch (c) {
    case CauseClass::Underflow:
      return fmt::format("values vanish at {}: re-initialise this path (e.g. He/Xavier scaling), add loss scaling so "
                         "small gradients stay representable, and clip/normalise between the layers",
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
      return fmt::format("values at {} changed without an arithmetic cause: check memory (ECC), DMA and on-chip buffers; "
                         "rerun to see whether it reproduces",
                         op);
    case CauseClass::Precision:
      return fmt::format("{} deviates from the FP64 reference: raise its compute/accumulation precision or check its "
                         "kernel",
                         op);
    case CauseClass::Condition:
      return fmt::format("a condition you set held on {}: inspect its dump and the ops feeding it", op);
    default: return {};
  }
}

/// Class of a user condition from its statistic and the direction of its comparison.
CauseClass condition_class(const TriggerEvent& t) {
  Expr e;
  try {
    e = Expr::parse(t.condition);
  } catch (const std::exception&) {
    return CauseClass::Condition;
  }
  const auto pred = e.to_device_predicate();
  if (!pred) {
    for (Var v : e.vars())
      if (v == Var::NanCount || v == Var::InfCount) return CauseClass::NanSource;
    return CauseClass::Condition;
  }
  for (const auto& c : pred->clauses) {
    const auto f = static_cast<spec::StatField>(c.field);
    const auto op = static_cast<spec::CmpOp>(c.cmp);
    const bool upper = op == spec::CmpOp::Gt || op == spec::CmpOp::Ge;
    const bool lower = op == spec::CmpOp::Lt || op == spec::CmpOp::Le;
    switch (f) {
      case spec::StatField::NanCount:
      case spec::StatField::InfCount:
        if (upper || op == spec::CmpOp::Ne) return CauseClass::NanSource;
        break;
      case spec::StatField::MaxAbs:
      case spec::StatField::FiniteMaxAbs:
      case spec::StatField::AbsMean:
      case spec::StatField::FiniteAbsMean:
      case spec::StatField::L2:
        if (upper) return CauseClass::Overflow;
        if (lower) return CauseClass::Underflow;
        break;
      case spec::StatField::Max:
      case spec::StatField::FiniteMax:
        if (upper) return CauseClass::Overflow;
        break;
      case spec::StatField::Std:
        if (lower) return CauseClass::Underflow;
        break;
      case spec::StatField::ZeroCount:
        if (upper) return CauseClass::Underflow;
        break;
      default: break;
    }
  }
  return CauseClass::Condition;
}

/// A failing comparison whose error has the shape of corrupted values rather than lost precision:
/// no NaN/Inf mismatch, and the elements outside 0.5% are a few (at most 2, or 10% of them) —
/// one bad operand reaches one element, a row or a window of the result — and either the worst
/// is >= 1024 ULP off, or it is >= 32 ULP off while at least 90% of the elements stay within
/// 0.1% (the op's arithmetic is right to rounding everywhere else). Lost precision (an FP16
/// accumulator, an inexact inner op) spreads errors of a few ULP over most elements instead.
bool corruption_pattern(const Metrics& m, const graph::Op* op) {
  if (m.nonfinite_mismatch != 0 || m.count == 0) return false;
  // ops whose every result element is one of their input elements: a replay on the captured
  // inputs is bit-exact, so any difference is a changed value
  static const std::set<std::string> kExact = {"Identity", "Reshape", "Flatten", "Transpose", "Expand", "Squeeze",
                                               "Unsqueeze", "Concat", "Slice", "Split", "Gather", "GatherElements",
                                               "MaxPool", "Relu", "Neg", "Abs", "Max", "Min"};
  if (op && kExact.count(op->type)) return true;
  const double n = static_cast<double>(m.count);
  const double few = std::max(2.0, 0.1 * n);
  const double off = std::round((1.0 - m.within_0_5pct) * n);
  const double beyond_rounding = std::round((1.0 - m.within_0_1pct) * n);
  if (off < 1 || off > few) return false;
  return m.max_ulp >= 1024 || (m.max_ulp >= 32 && beyond_rounding <= few);
}

/// Who diverges from whom: each rank is compared with its own group's reference (a member of a
/// sub-communicator, or of a hierarchical stage's group, with that group's lowest rank when the
/// reference rank is not a member). Divergences built without references name `reference_rank`.
std::string divergence_who(const Divergence& d, std::uint32_t reference_rank) {
  auto ref = [&](std::size_t i) { return i < d.references.size() ? d.references[i] : reference_rank; };
  if (d.ranks.size() == 1 && ref(0) == d.ranks[0])
    return fmt::format("reference rank {} diverges from the other ranks of its group", d.ranks[0]);
  std::set<std::uint32_t> refs;
  for (std::size_t i = 0; i < d.ranks.size(); ++i) refs.insert(ref(i));
  if (refs.size() == 1) return fmt::format("ranks {} diverge from reference rank {}", fmt::join(d.ranks, ","), *refs.begin());
  return fmt::format("ranks {} diverge from the reference ranks of their groups ({})", fmt::join(d.ranks, ","),
                     fmt::join(refs, ","));
}

/// "abs_mean = 3.2e-06 (threshold < 1e-05)" for each statistic the condition compares.
std::string condition_values(const TriggerEvent& t) {
  if (!t.stats) return "no statistics";
  Expr e;
  try {
    e = Expr::parse(t.condition);
  } catch (const std::exception&) {
    return "unparsable condition";
  }
  static const char* kCmp[] = {"<", "<=", ">", ">=", "==", "!="};
  std::vector<std::string> parts;
  if (auto pred = e.to_device_predicate()) {
    for (const auto& c : pred->clauses) {
      const auto f = static_cast<spec::StatField>(c.field);
      parts.push_back(fmt::format("{} = {:.4g} (threshold {} {:.4g})", var_name(static_cast<Var>(c.field)),
                                  stat_field_value(*t.stats, f), kCmp[c.cmp % 6], c.value));
    }
  } else {
    EvalContext ctx;
    ctx.set_stats(*t.stats);
    for (Var v : e.vars())
      if (is_stat_var(v)) parts.push_back(fmt::format("{} = {:.4g}", var_name(v), ctx.get(v)));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace probelab::probes::diagnosis_detail
