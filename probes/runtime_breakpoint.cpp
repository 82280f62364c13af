// ProbeRuntime: the breakpoint ISR (halt -> action -> resume) and the reference comparison run at
// the end of the run.
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "graph/op_registry.h"

#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"
#include "probes/detail/runtime_impl.h"
#include "probes/log.h"
#include "probes/provenance.h"
#include "probes/tensor_stats.h"

namespace probelab::probes::detail {

void RuntimeState::on_breakpoint() {
  dev.write_reg(spec::kRegIrqAck, spec::kIrqBreakpoint);
  for (std::uint32_t s = 0; s < opts.num_streams; ++s) {
    if (!(dev.read_reg(spec::stream_reg(s, spec::kStreamStatus)) & spec::kStreamHalted)) continue;
    handle_halt(s, dev.read_reg(spec::stream_reg(s, spec::kStreamHaltTask)));
  }
}

void RuntimeState::handle_halt(std::uint32_t stream, std::uint32_t task_id) {
  BreakpointHit hit;
  hit.halt_cycle = dev.cycles();
  hit.task_id = task_id;
  hit.stream = stream;
  hit.step = step;
  auto t = tasks.find(task_id);
  const ProbeSite* site = t == tasks.end() ? nullptr : ins.site(t->second);
  if (!site || site->kind != ProbeKind::Breakpoint) {
    warn(fmt::format("stream {} halted after task {}, which is no breakpoint probe of this runtime; resuming", stream, task_id));
    dev.write_reg(spec::stream_reg(stream, spec::kStreamResume), 1);
    return;
  }
  const BreakCondition& bc = breaks.at(site->probe_op_id);
  const graph::Op& target = op(site->target_op_id);
  hit.op = target.name;
  hit.op_id = target.id;
  hit.condition = bc.expr.empty() ? "<exception latched>" : bc.expr.text();

  // the op's output observed by the probe, for the host re-check and the trigger statistics
  std::optional<graph::Tensor> out = fetch(site->tensor);
  std::optional<spec::CaptureStats> stats;
  if (out) stats = compute_stats(*out);
  if (!bc.expr.empty() && !bc.device) {
    EvalContext ctx = context(step);
    if (stats) ctx.set_stats(*stats);
    hit.condition_held = stats && bc.expr.test(ctx);
  }
  if (hit.condition_held) {
    // action: full dump of every input and output of the op, converted to the logical layout
    auto dump_edge = [&](bool is_input, std::size_t i, const std::string& name) {
      if (name.empty()) return;
      auto v = fetch(name);
      if (!v) {
        hit.missing.push_back(name);
        return;
      }
      const spec::CaptureStats st = compute_stats(*v);
      observe({step, target.id, is_input, static_cast<std::uint16_t>(i)}, &st, std::nullopt, hit.halt_cycle);
      keep({step, target.id, is_input, static_cast<std::uint16_t>(i)}, *v);
      const auto* info = graph.find_tensor(name);
      auto f = dump_tensor(target.id, is_input, static_cast<std::uint16_t>(i), step, *v, "break",
                           std::string(graph::format_name(info ? info->desc.format : graph::Format::ND)));
      if (!f.empty()) hit.dumped.push_back(f);
    };
    for (std::size_t i = 0; i < target.inputs.size(); ++i) dump_edge(true, i, target.inputs[i]);
    for (std::size_t i = 0; i < target.outputs.size(); ++i) dump_edge(false, i, target.outputs[i]);
    TriggerEvent ev;
    ev.watch_point = bc.watch_point;
    ev.condition = hit.condition;
    for (Action a : bc.actions) ev.actions.emplace_back(action_name(a));
    if (bc.actions.empty()) ev.actions.emplace_back("break");
    ev.op = target.name;
    ev.op_id = target.id;
    ev.tensor = site->tensor;
    ev.index = site->index;
    ev.step = step;
    ev.rank = opts.rank;
    ev.stats = stats;
    ev.origin = bc.expr.empty() ? "exception" : "breakpoint";
    ev.dumped = hit.dumped;
    apply_actions(bc.actions, *site, ev);
    rep.triggers.push_back(std::move(ev));
  }
  hit.resume_cycle = dev.cycles();
  dev.write_reg(spec::stream_reg(stream, spec::kStreamResume), 1);
  log::debug("break", "stream {} halted after {} (task {}), condition {} {}, resumed", stream, hit.op, task_id,
             hit.condition, hit.condition_held ? "held" : "did not hold");
  rep.breakpoints.push_back(std::move(hit));
}

std::vector<const graph::Tensor*> RuntimeState::captured_inputs(std::uint32_t st, std::uint32_t op_id,
                                                                 std::string& missing) const {
  const graph::Op& o = op(op_id);
  if (!carried) carried = carried_tensors(graph);
  // the kept output `tensor` of its producer at step `at`
  auto output_of = [&](const std::string& tensor, std::uint32_t at) -> const graph::Tensor* {
    if (const graph::Op* p = graph.producer(tensor))
      for (std::size_t j = 0; j < p->outputs.size(); ++j)
        if (p->outputs[j] == tensor)
          if (auto it = store.find({at, p->id, false, static_cast<std::uint16_t>(j)}); it != store.end()) return &it->second;
    return nullptr;
  };
  std::vector<const graph::Tensor*> ins_v;
  for (std::size_t i = 0; i < o.inputs.size(); ++i) {
    const std::string& name = o.inputs[i];
    const graph::Tensor* t = nullptr;
    if (!name.empty()) {
      if (auto it = store.find({st, op_id, true, static_cast<std::uint16_t>(i)}); it != store.end()) t = &it->second;
      if (!t) t = output_of(name, st);
      // a tensor updated in place (a weight, an optimizer state): the update of the step before
      if (auto c = carried->find(name); !t && c != carried->end() && first_step && st > *first_step)
        t = output_of(c->second, st - 1);
      if (!t)
        if (auto it = graph.initializers().find(name); it != graph.initializers().end()) {
          const auto* info = graph.find_tensor(name);
          bool constant = info && info->kind == graph::TensorKind::Constant;
          if (constant || (first_step && st == *first_step)) t = &it->second;
        }
      if (!t) missing += (missing.empty() ? "" : ", ") + name;
    }
    ins_v.push_back(t);
  }
  return ins_v;
}

void RuntimeState::run_comparisons() {
  // group kept tensors by (step, op): outputs define what is compared
  std::map<std::pair<std::uint32_t, std::uint32_t>, bool> candidates;
  for (const auto& [k, t] : store)
    if (!std::get<2>(k)) candidates[{std::get<0>(k), std::get<1>(k)}] = true;
  for (const auto& [key, unused] : candidates) {
    auto [st, op_id] = key;
    const graph::Op& o = op(op_id);
    bool wanted = false;
    for (const auto& g : cfg.compare.ops)
      if (graph::glob_match(g, o.name)) wanted = true;
    // collectives have no CPU reference: the cross-rank consistency check covers them
    if (!wanted || is_probe_op(o) || is_collective_type(o.type)) continue;
    std::string missing;
    const std::vector<const graph::Tensor*> ins_v = captured_inputs(st, op_id, missing);
    std::vector<const graph::Tensor*> outs_v;
    for (std::size_t j = 0; j < o.outputs.size(); ++j) {
      auto it = store.find({st, op_id, false, static_cast<std::uint16_t>(j)});
      outs_v.push_back(it == store.end() ? nullptr : &it->second);
    }
    std::vector<OpComparison> res;
    if (!missing.empty()) {
      OpComparison c;
      c.op = o.name;
      c.op_id = op_id;
      c.op_type = o.type;
      c.skipped = fmt::format("inputs not captured at step {}: {}", st, missing);
      res.push_back(std::move(c));
    } else {
      auto p = partials.find(st);
      res = compare_op(o, ins_v, outs_v, cfg.compare.criteria, cfg.compare.decompose_fused,
                       p == partials.end() ? nullptr : &p->second);
    }
    for (auto& c : res) {
      c.step = st;
      c.rank = opts.rank;
      rep.comparisons.push_back(std::move(c));
    }
  }
}

namespace {

/// Whether `v`, delivered in `dtype`, shows anomaly `kind` (NaN for invalid; overflow: beyond the
/// dtype's range or infinite).
bool shows(AnomalyKind kind, double v, graph::DType dtype) {
  if (kind == AnomalyKind::Invalid) return std::isnan(v);
  if (kind != AnomalyKind::Overflow) return false;
  if (std::isinf(v)) return true;
  const double limit = dtype == graph::DType::F16    ? 65520.0
                       : dtype == graph::DType::BF16 ? 3.3961776e38  // rounds to Inf in BF16
                       : dtype == graph::DType::F32  ? 3.4028235677973366e38
                                                     : std::numeric_limits<double>::infinity();
  return std::fabs(v) >= limit;
}

/// A value for the report's text: a NaN as "nan" whatever its sign (which NaN the host's
/// arithmetic gives depends on the CPU and the compiler, not on the data).
std::string value_text(double v) { return std::isnan(v) ? std::string("nan") : fmt::format("{:g}", v); }

}  // namespace

void RuntimeState::run_replays() {
  std::set<std::tuple<std::uint32_t, std::uint32_t, int>> done;
  for (const AnomalyRecord& a : rep.anomalies) {
    if (a.kind != AnomalyKind::Invalid && a.kind != AnomalyKind::Overflow) continue;
    if (a.op_id >= graph.ops().size() || a.on_input) continue;
    if (!done.insert({a.step, a.op_id, static_cast<int>(a.kind)}).second) continue;
    const graph::Op& o = op(a.op_id);
    if (is_collective_type(o.type) || a.output_index >= o.outputs.size()) continue;
    std::string missing;
    const auto ins_v = captured_inputs(a.step, a.op_id, missing);
    if (!missing.empty()) continue;
    const graph::DType out_dtype = graph.tensor(o.outputs[a.output_index]).desc.dtype;
    ReplayCheck rc;
    rc.rank = opts.rank;
    rc.step = a.step;
    rc.op_id = a.op_id;
    rc.kind = a.kind;
    std::vector<std::string> got;
    try {
      // the device computes in FP32 (Vector) or accumulates exactly (Cube): replay in FP32 and in FP64
      for (graph::RefPrecision p : {graph::RefPrecision::F32, graph::RefPrecision::F64}) {
        const auto outs = graph::run_reference(o, ins_v, p);
        if (a.output_index >= outs.size()) throw std::runtime_error("the reference produced fewer outputs");
        const auto v = outs[a.output_index].to_f64();
        if (a.element >= v.size()) throw std::runtime_error("latched element outside the output");
        const double x = v[a.element];
        rc.reproduced = rc.reproduced || shows(a.kind, x, out_dtype);
        got.push_back(fmt::format("{} {}", p == graph::RefPrecision::F32 ? "FP32" : "FP64", value_text(x)));
      }
    } catch (const std::exception& e) {
      warn(fmt::format("replay of {} at step {}: {}", o.name, a.step, e.what()));
      continue;
    }
    rc.detail = fmt::format("the replay gives {} at element {}; the device latched {} (value {}) in {}",
                            fmt::join(got, ", "), a.element, anomaly_kind_name(a.kind), value_text(a.value),
                            graph::dtype_name(out_dtype));
    rep.replays.push_back(std::move(rc));
  }
}

}  // namespace probelab::probes::detail
