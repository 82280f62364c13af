// ProbeRuntime: the breakpoint ISR (halt -> action -> resume) and the reference comparison run at
// the end of the run.
#include <fmt/format.h>

#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"
#include "probes/detail/runtime_impl.h"
#include "probes/log.h"
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
      if (tracker && compute_stats(*v).nan_count > 0) tracker->note_nonfinite(target.id, is_input);
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
    if (!wanted || is_probe_op(o)) continue;
    std::vector<const graph::Tensor*> ins_v, outs_v;
    std::string missing;
    for (std::size_t i = 0; i < o.inputs.size(); ++i) {
      const std::string& name = o.inputs[i];
      const graph::Tensor* t = nullptr;
      if (!name.empty()) {
        if (auto it = store.find({st, op_id, true, static_cast<std::uint16_t>(i)}); it != store.end()) t = &it->second;
        if (!t)
          if (const graph::Op* p = graph.producer(name))
            for (std::size_t j = 0; j < p->outputs.size() && !t; ++j)
              if (p->outputs[j] == name)
                if (auto it = store.find({st, p->id, false, static_cast<std::uint16_t>(j)}); it != store.end()) t = &it->second;
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

}  // namespace probelab::probes::detail
