// ProbeRuntime: handling of drained capture records, host-evaluated conditions and rules.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "graph/format.h"
#include "probes/provenance.h"
#include "probes/detail/runtime_impl.h"
#include "probes/log.h"
#include "probes/tensor_stats.h"

namespace probelab::probes::detail {

namespace {

graph::Tensor record_tensor(const CaptureRecord& rec) {
  graph::TensorDesc d;
  d.dtype = static_cast<graph::DType>(rec.header.dtype);
  d.format = graph::Format::ND;
  for (int i = 0; i < rec.header.rank_dims; ++i) d.shape.push_back(rec.header.dims[i]);
  return graph::Tensor(d, rec.payload);
}

}  // namespace

std::optional<graph::Tensor> RuntimeState::fetch(const std::string& tensor) {
  if (!locator) return std::nullopt;
  auto ref = locator(tensor);
  if (!ref) return std::nullopt;
  graph::TensorDesc d;
  d.dtype = static_cast<graph::DType>(ref->dtype);
  d.format = static_cast<graph::Format>(ref->format);
  for (int i = 0; i < ref->rank; ++i) d.shape.push_back(ref->dims[i]);
  graph::Tensor t = graph::Tensor::for_overwrite(d);
  if (t.nbytes() != 0) dev.dma_read(ref->addr, t.bytes());
  return graph::to_logical(std::move(t));  // format conversion on the host
}

void RuntimeState::keep(const EdgeKey& key, const graph::Tensor& t) {
  if (!cfg.compare.enabled) return;
  const graph::Op& o = op(std::get<1>(key));
  // every full tensor is kept while under budget: compared ops need their producers' outputs too
  auto it = store.find(key);
  if (it != store.end()) store_bytes -= it->second.nbytes();
  if (store_bytes + t.nbytes() > cfg.compare.max_store_bytes) {
    warn(fmt::format("comparison store full ({} bytes): {} step {} not kept", cfg.compare.max_store_bytes, o.name,
                     std::get<0>(key)));
    if (it != store.end()) store.erase(it);
    return;
  }
  store_bytes += t.nbytes();
  store[key] = t;
}

std::string RuntimeState::dump_tensor(std::uint32_t op_id, bool is_input, std::uint16_t index, std::uint32_t at_step,
                                      const graph::Tensor& t, const std::string& trigger, const std::string& source_format) {
  if (cfg.output.level == OutputLevel::None) return {};
  const graph::Op& o = op(op_id);
  DumpEntry e;
  e.op = o.name;
  e.op_id = op_id;
  e.is_input = is_input;
  e.index = index;
  e.tensor = is_input ? (index < o.inputs.size() ? o.inputs[index] : "") : (index < o.outputs.size() ? o.outputs[index] : "");
  e.step = at_step;
  e.trigger = trigger;
  e.payload = "full";
  e.source_format = graph::parse_format(source_format).value_or(graph::Format::ND);
  try {
    return dumps->write_tensor(std::move(e), t).file;
  } catch (const std::exception& ex) {
    warn(fmt::format("dump of {} failed: {}", o.name, ex.what()));
    return {};
  }
}

void RuntimeState::on_record(CaptureRecord&& rec) {
  const auto& h = rec.header;
  ++summary(h.step).records;
  rep.fingerprint = xxh64(rec.payload, rep.fingerprint);
  if (h.payload == spec::CapturePayload::StepStatus) {
    spec::StepStatus st;
    std::memcpy(&st, rec.payload.data(), sizeof st);
    summary(h.step).float_status |= st.float_status;
    rep.step_evidence[h.step].suppressed_kinds |= st.suppressed_kinds;
    return;
  }
  // which probe produced it: by task id, else by edge (capture probe first, then sync probe)
  const ProbeSite* site = nullptr;
  if (auto t = tasks.find(h.task_id); t != tasks.end()) site = ins.site(t->second);
  if (!site || site->target_op_id != h.op_id || site->is_input != (h.is_input != 0) || site->index != h.output_index) {
    site = nullptr;
    for (int kind : {static_cast<int>(ProbeKind::Capture), static_cast<int>(ProbeKind::Sync)})
      if (auto p = edge_probe.find({h.op_id, h.is_input != 0, h.output_index, kind}); p != edge_probe.end() && !site)
        site = ins.site(p->second);
  }
  if (!site) {
    warn(fmt::format("capture record seq {} for op id {} edge {}{} matches no probe", h.seq, h.op_id,
                     h.is_input ? "in" : "out", h.output_index));
    return;
  }
  std::optional<graph::Tensor> full;
  spec::CaptureStats stats{};
  std::optional<std::uint64_t> hash;
  switch (h.payload) {
    case spec::CapturePayload::FullTensor:
      full = record_tensor(rec);
      stats = compute_stats(*full);
      break;
    case spec::CapturePayload::Statistics: std::memcpy(&stats, rec.payload.data(), sizeof stats); break;
    case spec::CapturePayload::Hash: {
      std::uint64_t d = 0;
      std::memcpy(&d, rec.payload.data(), 8);
      hash = d;
      break;
    }
    case spec::CapturePayload::StepStatus: break;  // handled above
  }
  bool have_stats = h.payload != spec::CapturePayload::Hash;
  const EdgeKey key{h.step, h.op_id, h.is_input != 0, h.output_index};
  observe(key, have_stats ? &stats : nullptr, hash, h.cycle);
  const graph::Op& target = op(h.op_id);
  if (site->kind == ProbeKind::Integrity) {
    if (!hash) return;
    const HashSeen seen{*hash, h.cycle, h.op_id};
    if (h.is_input) read_hash.push_back({h.step, h.op_id, h.output_index, seen});
    else written_hash[{h.step, site->tensor}] = seen;
    return;
  }

  const std::optional<std::uint32_t> group =
      site->kind == ProbeKind::Sync && opts.consistency_group ? opts.consistency_group(target) : std::optional<std::uint32_t>(0);
  if (site->kind == ProbeKind::Sync && group) {
    SyncSample smp;
    smp.rank = h.rank;
    smp.group = *group;
    smp.step = h.step;
    smp.op = target.name;
    smp.order = topo(h.op_id);
    smp.tensor = site->tensor;
    smp.is_input = site->is_input;
    smp.index = site->index;
    smp.hash = hash;
    if (have_stats) smp.stats = stats;
    if (full) smp.data = *full;
    sync.push_back(std::move(smp));
  }
  if (full) keep({h.step, h.op_id, h.is_input != 0, h.output_index}, *full);

  // manifest entry / file
  if (cfg.output.level == OutputLevel::All) {
    if (full) {
      dump_tensor(h.op_id, h.is_input != 0, h.output_index, h.step, *full, "capture",
                  op(site->probe_op_id).attr_str("source_format", "ND"));
    } else {
      DumpEntry e;
      e.op = target.name;
      e.op_id = h.op_id;
      e.tensor = site->tensor;
      e.is_input = h.is_input != 0;
      e.index = h.output_index;
      e.step = h.step;
      e.dtype = static_cast<graph::DType>(h.dtype);
      for (int i = 0; i < h.rank_dims; ++i) e.shape.push_back(h.dims[i]);
      e.format = static_cast<graph::Format>(h.format);
      e.payload = have_stats ? "statistics" : "hash";
      if (have_stats) e.stats = stats;
      e.hash = hash;
      e.trigger = "capture";
      dumps->add_entry(std::move(e));
    }
  }
  if (site->kind == ProbeKind::Capture && have_stats) run_host_conditions(*site, rec, stats, full ? &*full : nullptr);
}

void RuntimeState::observe(const EdgeKey& key, const spec::CaptureStats* stats, std::optional<std::uint64_t> hash,
                           std::uint64_t cycle) {
  constexpr std::size_t kMaxObservations = 1u << 20;
  auto it = rep.observations.find(key);
  if (it == rep.observations.end()) {
    if (rep.observations.size() >= kMaxObservations) return;
    it = rep.observations.emplace(key, EdgeObservation{}).first;
  }
  EdgeObservation& o = it->second;
  if (stats) {
    o.has_stats = true;
    o.nan_count = std::max(o.nan_count, stats->nan_count);
    o.inf_count = std::max(o.inf_count, stats->inf_count);
    o.count = stats->count;
    if (stats->finite_max_abs >= 0 && std::isfinite(stats->finite_max_abs))
      o.max_abs = std::max(o.max_abs.value_or(0.0), stats->finite_max_abs);
    if (stats->nan_count + stats->inf_count == 0 && std::isfinite(stats->l2)) o.l2 = std::max(o.l2.value_or(0.0), stats->l2);
    if (std::isfinite(stats->finite_min)) o.min = std::min(o.min.value_or(stats->finite_min), stats->finite_min);
  }
  if (hash) o.hash = hash;
  if (cycle && (!o.cycle || cycle < o.cycle)) o.cycle = cycle;
}

void RuntimeState::check_integrity() {
  if (!carried) carried = carried_tensors(graph);
  std::map<std::string, std::uint64_t> initial;  // initializer -> hash of the uploaded value
  for (const HashRead& r : read_hash) {
    const graph::Op& reader = op(r.op_id);
    const std::string& tensor = reader.inputs.at(r.slot);
    std::optional<HashSeen> want;
    bool by_host = false;
    std::uint32_t writer_step = r.step;
    auto c = carried->find(tensor);
    if (graph.producer(tensor)) {
      if (auto w = written_hash.find({r.step, tensor}); w != written_hash.end()) want = w->second;
    } else if (c != carried->end() && first_step && r.step > *first_step) {
      writer_step = r.step - 1;
      if (auto w = written_hash.find({writer_step, c->second}); w != written_hash.end()) want = w->second;
    } else if (auto it = graph.initializers().find(tensor); it != graph.initializers().end()) {
      // the host uploaded the initial value: its bytes in the device dtype, logical layout
      auto h = initial.find(tensor);
      if (h == initial.end()) {
        const graph::TensorDesc& d = graph.tensor(tensor).desc;
        const graph::Tensor v = graph::Tensor::from_f64(d.shape, graph::to_logical(it->second).to_f64(), d.dtype);
        h = initial.emplace(tensor, xxh64(v.bytes())).first;
      }
      want = HashSeen{h->second, 0, r.op_id};
      by_host = true;
    }
    if (!want || want->hash == r.seen.hash) continue;
    const std::string writer = by_host ? std::string() : op(want->op_id).name;
    IntegrityViolation v;
    v.rank = opts.rank;
    v.tensor = tensor;
    v.writer_op = writer;
    v.writer_step = writer_step;
    v.reader_op = reader.name;
    v.reader_step = r.step;
    v.written_hash = want->hash;
    v.read_hash = r.seen.hash;
    v.window_lo = want->cycle;
    v.window_hi = r.seen.cycle;
    rep.integrity.push_back(v);
  }
}

void RuntimeState::run_host_conditions(const ProbeSite& site, const CaptureRecord& rec, const spec::CaptureStats& stats,
                                       const graph::Tensor* full) {
  EvalContext ctx = context(rec.header.step);
  ctx.set_stats(stats);
  for (std::size_t w : site.watch_points) {
    const WatchPoint& wp = cfg.watch_points[w];
    if (!wp_active(wp, rec.header.step)) continue;  // merged on this edge, but not at this step
    for (const auto& c : wp.conditions) {
      bool has_break = std::find(c.actions.begin(), c.actions.end(), Action::Break) != c.actions.end();
      if (has_break || !c.expr.test(ctx)) continue;  // break conditions run on the device
      TriggerEvent ev;
      ev.watch_point = wp.id;
      ev.condition = c.expr.text();
      for (Action a : c.actions) ev.actions.emplace_back(action_name(a));
      ev.op = site.target_op;
      ev.op_id = site.target_op_id;
      ev.tensor = site.tensor;
      ev.is_input = site.is_input;
      ev.index = site.index;
      ev.step = rec.header.step;
      ev.rank = rec.header.rank;
      ev.stats = stats;
      ev.origin = "host";
      if (std::find(c.actions.begin(), c.actions.end(), Action::FullDump) != c.actions.end()) {
        std::optional<graph::Tensor> t;
        if (full) t = *full;
        else if (rec.header.step == step) t = fetch(site.tensor);
        if (t) {
          keep({rec.header.step, site.target_op_id, site.is_input, site.index}, *t);
          auto f = dump_tensor(site.target_op_id, site.is_input, site.index, rec.header.step, *t, "full_dump",
                               op(site.probe_op_id).attr_str("source_format", "ND"));
          if (!f.empty()) ev.dumped.push_back(f);
        } else {
          warn(fmt::format("full_dump of {} at step {}: tensor not locatable", site.tensor, rec.header.step));
        }
      }
      apply_actions(c.actions, site, ev);
      if (std::find(c.actions.begin(), c.actions.end(), Action::Rewind) != c.actions.end())
        request_rewind(c.rewind, "condition", c.expr.text(), wp.id, site.target_op_id, site.tensor, rec.header.step);
      log::debug("runtime", "condition '{}' held on {} step {}", ev.condition, ev.tensor, ev.step);
      rep.triggers.push_back(std::move(ev));
    }
  }
}

void RuntimeState::apply_actions(const std::vector<Action>& actions, const ProbeSite& site, TriggerEvent& ev) {
  for (Action a : actions) {
    switch (a) {
      case Action::StatsDump:
        if (ev.stats && cfg.output.level != OutputLevel::None) {
          DumpEntry e;
          e.op = ev.op;
          e.op_id = ev.op_id;
          e.tensor = ev.tensor;
          e.is_input = ev.is_input;
          e.index = ev.index;
          e.step = ev.step;
          if (const auto* t = graph.find_tensor(ev.tensor)) {
            e.dtype = t->desc.dtype;
            e.shape = t->desc.shape;
          }
          e.payload = "statistics";
          e.stats = ev.stats;
          e.trigger = "stats_dump";
          dumps->add_entry(std::move(e));
        }
        break;
      case Action::EnableVerbose:
        // every capture probe of the watch points involved: full capture from the next step
        for (const auto& p : ins.probes)
          if (p.kind == ProbeKind::Capture)
            for (std::size_t w : site.watch_points)
              if (std::find(p.watch_points.begin(), p.watch_points.end(), w) != p.watch_points.end() &&
                  !verbose_from.count(p.probe_op_id))
                verbose_from[p.probe_op_id] = step + 1;
        break;
      case Action::Stop: stop = true; break;
      case Action::FullDump:
      case Action::Rewind:  // request_rewind, by the caller (it knows the arguments)
      case Action::Break: break;  // handled by the caller / the breakpoint ISR
    }
  }
}

void RuntimeState::refresh_counters() {
  if (!isr) return;
  for (auto& [k, v] : isr->read_counters()) counters[k] = v;
  counters["anomaly_count"] = rep.anomalies.size();
}

void RuntimeState::evaluate_rules() {
  EvalContext ctx = context(step);
  for (std::size_t i = 0; i < cfg.rules.size(); ++i) {
    const Rule& r = cfg.rules[i];
    bool now = r.expr.test(ctx);
    bool fire = now && !rule_state[i];
    rule_state[i] = now;
    if (!fire) continue;
    RuleEvent ev;
    ev.rule = r.expr.text();
    ev.step = step;
    for (Action a : r.actions) ev.actions.emplace_back(action_name(a));
    ev.counters = counters;
    if (std::find(r.actions.begin(), r.actions.end(), Action::Rewind) != r.actions.end())
      request_rewind(r.rewind, "rule", r.expr.text(), "", std::nullopt, "", step);
    for (Action a : r.actions) {
      if (a == Action::Stop) stop = true;
      if (a != Action::EnableVerbose) continue;
      for (const auto& p : ins.probes) {
        if (p.kind != ProbeKind::Capture) continue;
        bool match = r.ops.empty();
        for (const auto& g : r.ops)
          if (graph::glob_match(g, p.target_op)) match = true;
        if (!match || verbose_from.count(p.probe_op_id)) continue;
        verbose_from[p.probe_op_id] = step + 1;
        ev.ops_switched.push_back(p.probe_op);
      }
    }
    log::debug("runtime", "rule '{}' fired at step {}", ev.rule, step);
    rep.rules_fired.push_back(std::move(ev));
  }
}

}  // namespace probelab::probes::detail

namespace probelab::probes::detail {

void RuntimeState::request_rewind(const RewindSpec& spec, const std::string& by, const std::string& expression,
                                  const std::string& watch_point, std::optional<std::uint32_t> target,
                                  const std::string& tensor, std::uint32_t at_step) {
  if (!opts.rewind_enabled || !rep.rewinds.empty()) return;
  RewindRequest r;
  r.step = at_step;
  r.rank = opts.rank;
  r.by = by;
  r.expression = expression;
  r.watch_point = watch_point;
  r.tensor = tensor;
  r.full = spec.full;
  r.all_ops = spec.all_ops;
  r.then_continue = spec.then_continue;
  // The op it fired on (rules: every op that latched an anomaly this step) and their inputs' writers.
  std::vector<std::uint32_t> at;
  if (target) at.push_back(*target);
  else
    for (const AnomalyRecord& a : rep.anomalies)
      if (a.step == at_step && a.op_id < graph.ops().size() &&
          std::find(at.begin(), at.end(), a.op_id) == at.end())
        at.push_back(a.op_id);
  if (!at.empty()) r.op = op(at.front()).name;
  std::set<std::string> names;
  for (std::uint32_t id : at) {
    const graph::Op& o = op(id);
    names.insert(o.name);
    for (const auto& in : o.inputs)
      if (const graph::Op* w = in.empty() ? nullptr : graph.producer(in); w && !is_probe_op(*w)) names.insert(w->name);
  }
  if (!spec.all_ops) r.ops.assign(names.begin(), names.end());
  if (!spec.all_ops && r.ops.empty()) {
    r.all_ops = true;  // nothing latched to point at: capture everything
    warn(fmt::format("rewind at step {}: no op latched an anomaly for rule '{}'; the re-execution captures every op",
                     at_step, expression));
  }
  rep.rewinds.push_back(std::move(r));
  stop = true;
}

}  // namespace probelab::probes::detail
