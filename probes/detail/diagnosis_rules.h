// The rules diagnose() applies (probes/diagnosis.h): what the graph says about an op's
// configuration, the cause class of an origin, of a user condition and of a failing comparison,
// and the one-line texts a candidate carries (where an anomaly is, what to change, who diverges).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "graph/format.h"
#include "graph/graph.h"
#include "probes/diagnosis.h"
#include "probes/provenance.h"

namespace probelab::probes::diagnosis_detail {

/// What the graph says about the configuration an op ran with (for suggestions).
struct Facts {
  const graph::Graph* g = nullptr;

  std::string dtype_of(const std::string& tensor) const {
    if (g)
      if (const auto* t = g->find_tensor(tensor)) return std::string(graph::dtype_name(t->desc.dtype));
    return "?";
  }
  /// "loss scale 1024 (Scale op 'scaled_loss')" or "no loss scale".
  std::string loss_scale() const {
    if (g)
      for (const auto& op : g->ops())
        if (op.type == "Scale" && op.direction == graph::Direction::Forward && !op.outputs.empty() &&
            std::find(g->outputs().begin(), g->outputs().end(), op.outputs[0]) != g->outputs().end())
          return fmt::format("loss scale {:g} (Scale op '{}')", op.attr_float("alpha", 1.0), op.name);
    return "no loss scale in the graph";
  }
  std::string collective_accumulation(const std::string& op) const {
    if (g)
      if (const auto* o = g->find_op(op)) return o->attr_str("accumulation", "fp32");
    return "fp32";
  }
};

/// The accumulator an overflow report's detail bits name ("an FP16 accumulator", ...), for a
/// Cube op (`cube`) or a Vector one.
std::string accumulator_name(std::uint32_t detail, bool cube);

/// Whether op type `t` runs on the Cube unit (MatMul, Conv and their variants, Gemm).
bool is_cube_type(std::string_view t);

/// An anomaly in one line: kind, op, element (and coordinate), step, rank, value, cycle, latency.
std::string where(const AnomalyRecord& a);

/// Cause of an origin at an op from its latch (before any replay).
CauseClass op_cause(const Origin& o, const Facts& f, const graph::Op* op);

/// What to change for cause `c` at the origin's op, from what the graph says about it.
std::string op_suggestion(CauseClass c, const Origin& o, const Facts& f, const graph::Op* op);

/// What to change for cause `c` at `op`: the class's general advice.
std::string suggestion(CauseClass c, const std::string& op);

/// Class of a user condition from its statistic and the direction of its comparison.
CauseClass condition_class(const TriggerEvent& t);

/// A failing comparison whose error has the shape of corrupted values rather than lost precision:
/// no NaN/Inf mismatch, and the elements outside 0.5% are a few (at most 2, or 10% of them) —
/// one bad operand reaches one element, a row or a window of the result — and either the worst
/// is >= 1024 ULP off, or it is >= 32 ULP off while at least 90% of the elements stay within
/// 0.1% (the op's arithmetic is right to rounding everywhere else). Lost precision (an FP16
/// accumulator, an inexact inner op) spreads errors of a few ULP over most elements instead.
bool corruption_pattern(const Metrics& m, const graph::Op* op);

/// Who diverges from whom: each rank is compared with its own group's reference (a member of a
/// sub-communicator, or of a hierarchical stage's group, with that group's lowest rank when the
/// reference rank is not a member). Divergences built without references name `reference_rank`.
std::string divergence_who(const Divergence& d, std::uint32_t reference_rank);

/// "abs_mean = 3.2e-06 (threshold < 1e-05)" for each statistic the condition compares.
std::string condition_values(const TriggerEvent& t);

}  // namespace probelab::probes::diagnosis_detail
