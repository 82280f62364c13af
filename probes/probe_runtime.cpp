#include "probes/probe_runtime.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "chip_model/spec/irq.h"
#include "chip_model/spec/exception_unit.h"
#include "chip_model/spec/registers.h"
#include "probes/detail/runtime_impl.h"
#include "probes/log.h"
#include "probes/sampling.h"

namespace probelab::probes {

using detail::RuntimeState;

struct ProbeRuntime::Impl : RuntimeState {
  using RuntimeState::RuntimeState;
};

namespace detail {

RuntimeState::RuntimeState(ProbeConfig c, const graph::Graph& g, Device& d, RuntimeOptions o, const graph::Graph* orig)
    : cfg(std::move(c)), graph(g), dev(d), opts(std::move(o)) {
  if (orig) original = *orig;
  seed = cfg.seed.value_or(opts.seed);
  rep.rank = opts.rank;
  rule_state.assign(cfg.rules.size(), false);
  for (const char* k : {"overflow_count", "underflow_count", "invalid_count", "nan_input_count", "inf_input_count",
                        "anomaly_count"})
    counters[k] = 0;
}

EvalContext RuntimeState::context(std::uint32_t at_step) const {
  EvalContext ctx;
  ctx.set(Var::Step, at_step);
  ctx.set(Var::Rank, opts.rank);
  ctx.set(Var::OverflowCount, static_cast<double>(counters.at("overflow_count")));
  ctx.set(Var::UnderflowCount, static_cast<double>(counters.at("underflow_count")));
  ctx.set(Var::InvalidCount, static_cast<double>(counters.at("invalid_count")));
  ctx.set(Var::NanInputCount, static_cast<double>(counters.at("nan_input_count")));
  ctx.set(Var::InfInputCount, static_cast<double>(counters.at("inf_input_count")));
  ctx.set(Var::AnomalyCount, static_cast<double>(counters.at("anomaly_count")));
  return ctx;
}

void RuntimeState::warn(std::string msg) {
  log::warn_rank("runtime", opts.rank, opts.world_size, msg);
  if (rep.warnings.size() < 256) rep.warnings.push_back(std::move(msg));
}

void RuntimeState::report_capture_losses() {
  if (!drain->programmed()) return;
  const auto& acc = drain->accounting();
  if (acc.oversize > 0)
    warn(fmt::format("{} capture record(s) of up to {} bytes were larger than the {}-byte capture buffer and were "
                     "dropped (under either overrun policy): raise probes.capture.buffer_bytes to at least {}",
                     acc.oversize, acc.oversize_max_bytes, cfg.capture.buffer_bytes, acc.oversize_max_bytes));
  if (acc.corrupt > 0)
    warn(fmt::format("{} capture record(s) were corrupt and not used: {} rejected by their checks, {} lost inside "
                     "damaged buffer regions ({} bytes skipped); {} of {} records drained",
                     acc.corrupt, acc.corrupt - acc.lost_in_corrupt_regions, acc.lost_in_corrupt_regions,
                     acc.bytes_skipped, acc.drained, acc.produced));
}

void RuntimeState::flush_capture(const std::string& when) {
  if (!drain->programmed()) return;
  dev.wait_deferred();  // a drain started by an interrupt finishes first
  drain->flush(true);   // called between steps: nothing produces records
  // a breakpoint or condition may have produced more records while draining: drain until quiet
  for (int i = 0; i < 4 && !drain->accounting().balanced(); ++i) drain->flush(true);
  drain->settle();  // records lost inside corrupt buffer regions are counted as corrupt
  const auto& acc = drain->accounting();
  if (!acc.balanced())
    warn(fmt::format("{}: {} capture record(s) neither drained nor reported dropped after flush", when,
                     acc.unaccounted()));
}

namespace {

int detail(CaptureMode m) { return m == CaptureMode::Full ? 2 : m == CaptureMode::Statistics ? 1 : 0; }

}  // namespace

bool RuntimeState::wp_active(const WatchPoint& wp, std::uint32_t at_step) const {
  return wp.steps.contains(at_step) && wp.ranks.contains(opts.rank);
}

// A site merges every watch point selecting its edge; at each step only those whose steps and
// ranks include it, and whose own sample rate draws it, apply. The same draw serves all of them
// (one hash per probe, step and rank compared with each rate), so the site captures when the
// most generous applying watch point does, in the most detailed mode among those drawn.
std::optional<CaptureMode> RuntimeState::drawn_mode(const ProbeSite& site, std::uint32_t at_step) const {
  std::optional<CaptureMode> mode;
  const auto& override_rate = op(site.target_op_id).debug.sample_rate;
  for (std::size_t w : site.watch_points) {
    const WatchPoint& wp = cfg.watch_points[w];
    if (!wp_active(wp, at_step)) continue;
    if (!sampled(seed, site.probe_op, at_step, opts.rank, override_rate.value_or(wp.sample_rate))) continue;
    if (!mode || detail(wp.mode) > detail(*mode)) mode = wp.mode;
  }
  return mode;
}

bool RuntimeState::should_capture(const ProbeSite& site, std::uint32_t at_step) const {
  if (!cfg.enabled) return false;
  if (site.kind == ProbeKind::Sync) return cfg.consistency.steps.contains(at_step);
  if (site.kind == ProbeKind::Integrity) return cfg.integrity.steps.contains(at_step);
  bool active = false;
  for (std::size_t w : site.watch_points) active = active || wp_active(cfg.watch_points[w], at_step);
  if (!active) return false;
  if (site.kind == ProbeKind::Breakpoint) return true;
  auto v = verbose_from.find(site.probe_op_id);
  if (v != verbose_from.end() && at_step >= v->second) return true;
  return drawn_mode(site, at_step).has_value();
}

CaptureMode RuntimeState::mode_at(const ProbeSite& site, std::uint32_t at_step) const {
  auto v = verbose_from.find(site.probe_op_id);
  if (v != verbose_from.end() && at_step >= v->second) return CaptureMode::Full;
  if (site.kind != ProbeKind::Capture) return site.mode;
  return drawn_mode(site, at_step).value_or(site.mode);
}

bool RuntimeState::kernel_captures(const ProbeSite& site, std::uint32_t at_step) const {
  if (site.kind != ProbeKind::Capture || site.index >= 16 || is_collective_type(op(site.target_op_id).type))
    return false;
  const CaptureMode mode = mode_at(site, at_step);
  const bool stats = mode == CaptureMode::Statistics && cfg.capture.in_kernel_statistics;
  const bool dump = mode == CaptureMode::Full && cfg.capture.async_full && !site.is_input;
  return stats || dump;
}

bool RuntimeState::in_kernel(const ProbeSite& site, std::uint32_t at_step) const {
  return kernel_captures(site, at_step) && should_capture(site, at_step);
}

}  // namespace detail

std::vector<std::byte> ProbeTask::args_bytes() const {
  return std::visit(
      [](const auto& a) {
        std::vector<std::byte> b(sizeof a);
        std::memcpy(b.data(), &a, sizeof a);
        return b;
      },
      args);
}

ProbeRuntime::ProbeRuntime(ProbeConfig config, const graph::Graph& executed, Device& device, RuntimeOptions options,
                           const graph::Graph* original)
    : impl_(std::make_unique<Impl>(std::move(config), executed, device, std::move(options), original)) {}

ProbeRuntime::~ProbeRuntime() = default;

const InsertionResult& ProbeRuntime::instrument(graph::Graph& g) {
  auto& s = *impl_;
  if (s.instrumented) throw std::logic_error("ProbeRuntime::instrument called twice");
  if (g.ops().size() != s.graph.ops().size())
    throw std::invalid_argument(fmt::format("ProbeRuntime::instrument: graph has {} ops, the executed snapshot {}",
                                            g.ops().size(), s.graph.ops().size()));
  s.ins = insert_probes(g, s.cfg);
  for (auto& w : s.ins.warnings) s.warn(w);
  s.graph = g;
  s.instrumented = true;
  if (s.opts.comm_group)
    for (const graph::Op& op : s.graph.ops())
      if (is_collective_type(op.type)) s.rep.comm_groups[op.id] = s.opts.comm_group(op);
  auto order = s.graph.topo_order();
  s.topo_pos.assign(s.graph.ops().size(), 0);
  for (std::size_t i = 0; i < order.size(); ++i) s.topo_pos[order[i]] = static_cast<std::uint32_t>(i);
  for (const auto& site : s.ins.probes) {
    s.edge_probe[{site.target_op_id, site.is_input, site.index, static_cast<int>(site.kind)}] = site.probe_op_id;
    if (site.kind != ProbeKind::Breakpoint) continue;
    detail::BreakCondition bc;
    const graph::Op& p = s.graph.op(site.probe_op_id);
    std::string text = p.attr_str("condition", "");
    const WatchPoint& wp = s.cfg.watch_points.at(site.watch_points.at(0));
    bc.watch_point = wp.id;
    if (!text.empty()) {
      bc.expr = Expr::parse(text);
      bc.device = bc.expr.to_device_predicate();
      for (const auto& c : wp.conditions)
        if (c.expr.text() == text) bc.actions = c.actions;
    }
    s.breaks[site.probe_op_id] = std::move(bc);
  }
  s.isr = std::make_unique<ExceptionIsr>(s.dev, s.graph, s.original ? &*s.original : nullptr);
  s.dumps = std::make_unique<DumpWriter>(s.opts.output_dir / s.cfg.output.dir / fmt::format("rank{}", s.opts.rank),
                                         s.cfg.output, s.opts.rank);
  s.drain = std::make_unique<CaptureDrain>(s.dev, s.cfg.capture, [&s](CaptureRecord&& r) { s.on_record(std::move(r)); });
  s.drain_policy = s.cfg.capture.drain;
  if (s.drain_policy == DrainPolicy::Auto) {
    bool step_sync = !s.cfg.rules.empty();
    for (const auto& wp : s.cfg.watch_points) step_sync = step_sync || !wp.conditions.empty();
    s.drain_policy = step_sync ? DrainPolicy::Step : DrainPolicy::BufferFull;
  }
  return s.ins;
}

const InsertionResult& ProbeRuntime::insertion() const { return impl_->ins; }

void ProbeRuntime::configure_device() {
  auto& s = *impl_;
  if (!s.instrumented) throw std::logic_error("ProbeRuntime::configure_device before instrument()");
  using namespace spec;
  s.dev.write_reg(kRegExcCountClear, 1);
  s.dev.write_reg(kRegFloatStatusClear, 0xFFFFFFFFu);
  s.dev.write_reg(kRegExcAck, ExceptionUnit::kAllKinds);
  s.dev.write_reg(kRegExcEnable, s.cfg.enabled ? s.cfg.exceptions.enable_mask : 0);
  s.dev.write_reg(kRegExcLimit, s.cfg.exceptions.latch_limit);
  s.rep.enabled_kinds = s.cfg.enabled ? s.cfg.exceptions.enable_mask : 0;
  s.suppressed_seen.assign(kExcKindCount, 0);
  bool capture = s.cfg.enabled && !s.ins.probes.empty();
  if (capture) s.drain->program();
  std::uint32_t mask = s.dev.read_reg(kRegIrqMask);
  mask &= ~(kIrqException | kIrqBreakpoint | (capture ? kIrqCaptureFull : 0u));
  s.dev.write_reg(kRegIrqMask, mask);
  s.configured = true;
}

void ProbeRuntime::install_irq_handler() {
  impl_->dev.set_irq_handler([this](std::uint32_t lines) { on_interrupt(lines); });
}

void ProbeRuntime::set_tensor_locator(TensorLocator locator) { impl_->locator = std::move(locator); }

std::uint32_t ProbeRuntime::on_interrupt(std::uint32_t lines) {
  auto& s = *impl_;
  if (!s.instrumented) return 0;
  std::uint32_t handled = 0;
  if (lines & spec::kIrqException) {
    handled |= spec::kIrqException;
    for (AnomalyRecord& a : s.isr->handle()) {
      ++s.counters["anomaly_count"];
      ++s.summary(a.step).anomalies;
      s.rep.anomalies.push_back(std::move(a));
    }
  }
  if (lines & spec::kIrqCaptureFull) {
    handled |= spec::kIrqCaptureFull;
    s.dev.write_reg(spec::kRegIrqAck, spec::kIrqCaptureFull);
    s.dev.defer([&s] {  // bottom half: the ISR returns at once
      s.drain->drain();
      if (!s.cfg.rules.empty()) {
        s.refresh_counters();
        s.evaluate_rules();
      }
    });
  }
  if (lines & spec::kIrqBreakpoint) {
    handled |= spec::kIrqBreakpoint;
    s.on_breakpoint();
  }
  if (handled & ~spec::kIrqCaptureFull) {  // a capture drain evaluates rules in its deferred work
    s.refresh_counters();
    s.evaluate_rules();
  }
  return handled;
}

void ProbeRuntime::begin_step(std::uint32_t step) {
  auto& s = *impl_;
  s.step = step;
  if (!s.first_step) {
    s.first_step = step;
    s.rep.first_step = step;
  }
  s.summary(step);
  s.dev.write_reg(spec::kRegStep, step);
}

void ProbeRuntime::end_step(std::uint32_t step) {
  auto& s = *impl_;
  if (!s.instrumented) return;
  if (!step_status_records() && s.configured && s.isr) {
    // no status records: the step's suppressed reports come from the counters (one burst read)
    const auto now = s.isr->read_suppressed();
    StepEvidence& e = s.rep.step_evidence[step];
    for (std::uint32_t k = 0; k < now.size() && k < s.suppressed_seen.size(); ++k)
      if (now[k] != s.suppressed_seen[k]) e.suppressed_kinds |= 1u << k;
    s.suppressed_seen = now;
  }
  if (s.drain_policy != DrainPolicy::Step) return;  // records and the step's status arrive later
  s.flush_capture(fmt::format("step {}", step));
  if (!step_status_records()) {  // else the step's float status came with its status record
    StepSummary& sm = s.summary(step);
    sm.float_status = s.dev.read_reg(spec::kRegFloatStatus);
    if (sm.float_status) s.dev.write_reg(spec::kRegFloatStatusClear, sm.float_status);
  }
  if (!s.cfg.rules.empty()) {
    s.refresh_counters();
    s.evaluate_rules();
  }
  if (s.cfg.output.level != OutputLevel::None) s.dumps->write_manifest();
}

void ProbeRuntime::finish() {
  auto& s = *impl_;
  if (!s.instrumented) return;
  if (s.configured) {
    if (s.drain_policy != DrainPolicy::Step) s.flush_capture("end of run");
    s.refresh_counters();
    s.evaluate_rules();
  }
  s.report_capture_losses();
  if (s.cfg.compare.enabled) {
    s.run_comparisons();
    s.run_replays();
  }
  s.check_integrity();
  s.rep.capture = s.drain->accounting();
  s.rep.diagnosis = detail::diagnose_reports(s.graph, std::span(&s.rep, 1), nullptr);
  if (s.cfg.output.level != OutputLevel::None) s.dumps->write_manifest();
}

bool ProbeRuntime::should_capture(const graph::Op& probe_op, std::uint32_t step) const {
  const ProbeSite* site = impl_->ins.site(probe_op.id);
  return site && impl_->should_capture(*site, step);
}

bool ProbeRuntime::in_kernel(const graph::Op& probe_op, std::uint32_t step) const {
  const ProbeSite* site = impl_->ins.site(probe_op.id);
  return site && impl_->in_kernel(*site, step);
}

void ProbeRuntime::plan_kernel(const graph::Op& op, std::uint32_t step, spec::TaskDescriptor& task) const {
  const auto& s = *impl_;
  if (!s.instrumented) return;
  for (const std::vector<std::uint32_t>& ids : {s.ins.before(op.id), s.ins.after(op.id)})
    for (std::uint32_t p : ids) {
      const ProbeSite* site = s.ins.site(p);
      if (!site || site->target_op_id != op.id || !s.in_kernel(*site, step)) continue;
      const auto bit = static_cast<std::uint16_t>(1u << site->index);
      if (s.mode_at(*site, step) == CaptureMode::Full) task.dump_outputs |= bit;
      else (site->is_input ? task.stats_inputs : task.stats_outputs) |= bit;
    }
}

DrainPolicy ProbeRuntime::drain_policy() const { return impl_->drain_policy; }

bool ProbeRuntime::step_status_records() const {
  const auto& s = *impl_;
  return s.configured && s.drain && s.drain->programmed();
}

std::optional<ProbeTask> ProbeRuntime::plan_probe(const graph::Op& probe_op, std::uint32_t step, const spec::TensorRef& tensor,
                                                  std::uint32_t task_id) {
  auto& s = *impl_;
  if (!should_capture(probe_op, step)) return std::nullopt;
  const ProbeSite& site = *s.ins.site(probe_op.id);
  if (s.kernel_captures(site, step)) return std::nullopt;  // the target's kernel task captures it
  ProbeTask t;
  t.target_op_id = site.target_op_id;
  if (site.kind == ProbeKind::Breakpoint) {
    const auto& bc = s.breaks.at(probe_op.id);
    spec::BreakpointArgs a{};
    a.tensor = tensor;
    a.halt_on_exception = probe_op.attr_int("halt_on_exception", 0) != 0;
    if (!bc.expr.empty()) {
      if (bc.device) {
        a.any = bc.device->any;
        for (const auto& c : bc.device->clauses) a.clauses[a.num_clauses++] = c;
      } else {  // the device cannot evaluate it: halt always (count >= 0), the ISR re-checks on the host
        a.num_clauses = 1;
        a.clauses[0].field = static_cast<std::uint8_t>(spec::StatField::Count);
        a.clauses[0].cmp = static_cast<std::uint8_t>(spec::CmpOp::Ge);
        a.clauses[0].value = 0;
      }
    }
    t.kind = spec::TaskKind::Breakpoint;
    t.args = a;
  } else {
    const CaptureMode mode = s.mode_at(site, step);
    spec::CaptureArgs a{};
    a.tensor = tensor;
    a.payload = static_cast<std::uint16_t>(mode == CaptureMode::Full   ? spec::CapturePayload::FullTensor
                                           : mode == CaptureMode::Hash ? spec::CapturePayload::Hash
                                                                       : spec::CapturePayload::Statistics);
    a.output_index = site.index;
    a.is_input = site.is_input ? 1 : 0;
    t.kind = spec::TaskKind::Capture;
    t.barrier_before = site.kind == ProbeKind::Sync;
    if (mode == CaptureMode::Full && s.cfg.capture.async_full) t.flags |= spec::kTaskFlagAsync;
    t.args = a;
  }
  s.tasks[task_id] = probe_op.id;
  return t;
}

bool ProbeRuntime::stop_requested() const { return impl_->stop; }

bool ProbeRuntime::may_stop() const {
  const auto& s = *impl_;
  if (!s.cfg.enabled) return false;
  auto stops = [&](const std::vector<Action>& actions) {
    for (Action a : actions)
      if (a == Action::Stop || (a == Action::Rewind && s.opts.rewind_enabled)) return true;
    return false;
  };
  for (const auto& wp : s.cfg.watch_points)
    for (const auto& c : wp.conditions)
      if (stops(c.actions)) return true;
  for (const auto& r : s.cfg.rules)
    if (stops(r.actions)) return true;
  return false;
}

bool ProbeRuntime::wants_partial_dumps(const graph::Op& op) const {
  const auto& c = impl_->cfg;
  if (!c.enabled || !c.compare.enabled || !c.compare.decompose_fused || op.fused_body.empty()) return false;
  for (const auto& g : c.compare.ops)
    if (graph::glob_match(g, op.name)) return true;
  return false;
}

void ProbeRuntime::add_partial_dump(std::uint32_t step, const std::string& tensor, graph::Tensor value) {
  impl_->partials[step][tensor] = std::move(value);
}

std::vector<SyncSample> ProbeRuntime::sync_samples() const { return impl_->sync; }

std::vector<SyncSample> ProbeRuntime::take_sync_samples() { return std::move(impl_->sync); }

void ProbeRuntime::note_uploads(const std::map<std::string, graph::Tensor>& values) {
  for (const auto& [name, value] : values) impl_->rep.uploads[name] = summarize_upload(value);
}

void ProbeRuntime::note_feed(std::uint32_t step, const std::string& input, const graph::Tensor& value) {
  impl_->rep.feeds[{step, input}] = summarize_upload(value);
}

void ProbeRuntime::note_lr_factor(double factor) { impl_->rep.lr_factor = factor; }

RuntimeReport ProbeRuntime::report() const { return finish_report(impl_->rep); }

RuntimeReport ProbeRuntime::take_report() { return finish_report(std::move(impl_->rep)); }

RuntimeReport ProbeRuntime::finish_report(RuntimeReport r) const {
  const auto& s = *impl_;
  for (const auto& [step, sm] : s.summaries) r.steps.push_back(sm);
  if (s.drain) r.capture = s.drain->accounting();
  r.counters = s.counters;
  if (s.dumps) {
    r.dump_entries = s.dumps->entry_count();
    r.dump_files = s.dumps->files();
    r.dump_bytes = s.dumps->bytes_written();
    r.dump_raw_bytes = s.dumps->raw_bytes();
  }
  if (auto* f = first_divergence(r.comparisons, s.graph)) r.first_divergence = *f;
  r.stop_requested = s.stop;
  return r;
}

nlohmann::json ProbeRuntime::report_json() const { return report().to_json(); }

JobReport combine_ranks(std::span<const ProbeRuntime* const> ranks) {
  if (ranks.empty()) return {};
  std::vector<RuntimeReport> reports;
  std::vector<SyncSample> samples;
  for (const auto* r : ranks) {
    reports.push_back(r->report());
    auto s = r->sync_samples();
    samples.insert(samples.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
  }
  const auto& s0 = *ranks.front()->impl_;
  return combine_reports(std::move(reports), samples, s0.cfg.consistency, s0.graph);
}

JobReport combine_reports(std::vector<RuntimeReport> reports, std::span<const SyncSample> samples,
                          const ConsistencyOptions& consistency, const graph::Graph& executed) {
  JobReport job;
  if (reports.empty()) return job;
  job.ranks = std::move(reports);
  job.consistency = check_consistency(samples, consistency);
  job.diagnosis = detail::diagnose_reports(executed, job.ranks, &job.consistency);
  return job;
}

namespace detail {

namespace {

// A divergence known only by its hash, sized from below by what the captures saw of the same edge
// on the divergent rank and its reference: max |x| and the smallest value each move by at most
// max |x_r - x_ref| (1-Lipschitz in the largest difference). Null without both observations.
std::optional<double> divergence_lower_bound(std::span<const RankEvidence> ev, const Divergence& d, std::uint32_t op) {
  if (d.ranks.empty() || d.references.empty() || d.ranks.front() == d.references.front()) return std::nullopt;
  auto observed = [&](std::uint32_t rank) -> const EdgeObservation* {
    for (const RankEvidence& e : ev)
      if (e.rank == rank && e.observations) {
        const auto it = e.observations->find(EdgeKey{d.step, op, d.is_input, d.index});
        return it == e.observations->end() || !it->second.finite() ? nullptr : &it->second;
      }
    return nullptr;
  };
  const EdgeObservation *a = observed(d.ranks.front()), *b = observed(d.references.front());
  if (!a || !b) return std::nullopt;
  std::optional<double> lb;
  if (a->max_abs && b->max_abs) lb = std::fabs(*a->max_abs - *b->max_abs);
  if (a->min && b->min) lb = std::max(lb.value_or(0.0), std::fabs(*a->min - *b->min));
  return lb;
}

}  // namespace

std::vector<Candidate> diagnose_reports(const graph::Graph& g, std::span<RuntimeReport> reports,
                                        const ConsistencyResult* consistency) {
  std::vector<RankEvidence> ev;
  for (RuntimeReport& r : reports)
    ev.push_back({r.rank, &r.anomalies, &r.observations, &r.step_evidence, r.enabled_kinds, r.first_step, &r.uploads, &r.feeds,
                  &r.comm_groups, r.lr_factor});
  const std::vector<Origin> origins = resolve_provenance(g, ev);
  std::vector<TriggerEvent> triggers;
  std::vector<OpComparison> comparisons;
  std::vector<ReplayCheck> replays;
  std::vector<IntegrityViolation> integrity;
  std::uint64_t corrupt = 0;
  for (const auto& r : reports) {
    triggers.insert(triggers.end(), r.triggers.begin(), r.triggers.end());
    comparisons.insert(comparisons.end(), r.comparisons.begin(), r.comparisons.end());
    replays.insert(replays.end(), r.replays.begin(), r.replays.end());
    integrity.insert(integrity.end(), r.integrity.begin(), r.integrity.end());
    corrupt += r.capture.corrupt;
  }
  DiagnosisInput in;
  in.graph = &g;
  in.origins = origins;
  in.triggers = triggers;
  in.comparisons = comparisons;
  in.replays = replays;
  in.integrity = integrity;
  in.consistency = consistency;
  if (consistency && consistency->first && !consistency->first->ranks.empty())
    if (const graph::Op* o = g.find_op(consistency->first->op)) {
      in.divergence_order_limit =
          collective_order_limit(g, ev, consistency->first->ranks.front(), consistency->first->step, o->id);
      if (!std::isfinite(consistency->first->max_abs_diff))
        in.divergence_lower_bound = divergence_lower_bound(ev, *consistency->first, o->id);
    }
  in.corrupt_records = corrupt;
  return diagnose(in);
}

}  // namespace detail

nlohmann::json JobReport::to_json() const {
  nlohmann::json j;
  j["ranks"] = nlohmann::json::array();
  for (const auto& r : ranks) j["ranks"].push_back(r.to_json());
  j["consistency"] = probes::to_json(consistency);
  j["diagnosis"] = nlohmann::json::array();
  for (const auto& c : diagnosis) j["diagnosis"].push_back(probes::to_json(c));
  return j;
}

}  // namespace probelab::probes
