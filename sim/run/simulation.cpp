#include "sim/run/simulation.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "chip_model/hooks/hooks_tee.h"
#include "chip_model/spec/registers.h"
#include "graph/npy.h"
#include "probes/dump_writer.h"
#include "probes/insertion_pass.h"
#include "probes/log.h"
#include "probes/probe_runtime.h"
#include "sim/platform/core_factory.h"
#include "sim/scenario/data_gen.h"
#include "sim/platform/executor.h"
#include "sim/scenario/injections.h"
#include "sim/platform/platform.h"
#include "sim/run/checkpoint_store.h"
#include "sim/run/hang_report.h"
#include "sim/run/loss_scaling_report.h"
#include "sim/run/probe_codec.h"
#include "sim/run/perf_ledger.h"
#include "sim/run/perf_report.h"
#include "sim/run/probe_results.h"
#include "sim/run/quant_report.h"
#include "sim/run/trace_flows.h"
#include "sim/run/op_cycles.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

std::string sanitize_name(const std::string& name) { return probes::file_stem(name); }

std::map<std::string, std::string> output_file_names(const std::vector<std::string>& tensors) {
  std::map<std::string, std::string> out;
  std::set<std::string> used;
  for (const auto& name : tensors) {
    const std::string base = sanitize_name(name);
    std::string file = base + ".npy";
    for (int n = 2; !used.insert(file).second; ++n) file = fmt::format("{}#{}.npy", base, n);
    out[name] = file;
  }
  return out;
}

std::vector<std::uint8_t> PartitionResult::encode() const {
  return json::to_msgpack(json{{"data", data},
                               {"trace", json::binary_t(live_trace ? live_trace->serialize() : trace)},
                               {"probes", json::binary_t(live_probes ? encode_probe_results(*live_probes) : probes)}});
}

PartitionResult PartitionResult::decode(const std::vector<std::uint8_t>& bytes) {
  try {
    const json j = json::from_msgpack(bytes);
    PartitionResult r;
    r.data = j.at("data");
    r.trace = j.at("trace").get_binary();
    r.probes = j.at("probes").get_binary();
    return r;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("partition result: ") + e.what());
  }
}

namespace {

// outputs/rank<r>/: one .npy per fetched tensor (each written atomically) and outputs.json
// mapping tensor names to files (two names may sanitize to the same file name).
void save_outputs(const fs::path& dir, const std::map<std::string, graph::Tensor>& values) {
  std::vector<std::string> names;
  for (const auto& [name, t] : values) names.push_back(name);
  const auto files = output_file_names(names);
  json index = json::object();
  for (const auto& [name, t] : values) {
    const std::string& file = files.at(name);
    const std::vector<std::byte> bytes = graph::encode_npy(t);
    probes::write_file_atomic(dir / file, bytes);
    index[name] = file;
  }
  const std::string text = index.dump(1) + "\n";
  probes::write_file_atomic(dir / "outputs.json", std::as_bytes(std::span(text.data(), text.size())));
}

spec::AccumDType accum_of(const std::string& a) {
  if (a == "fp16") return spec::AccumDType::FP16_RN;
  if (a == "fp16_via_fp32") return spec::AccumDType::FP16_VIA_FP32;
  return spec::AccumDType::FP32;
}

struct RankState {
  graph::Graph graph;
  std::unique_ptr<probes::ProbeRuntime> runtime;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<probes::PerfProfiler> profiler;
  ExecutorResult result;
  std::vector<std::uint64_t> step_begin_ps, step_end_ps;
  PerfLedger ledger;  // its chip's op and task records, folded as they complete
};

/// The communicator a rank runs collective `op` in (its `comm` attribute on the topology).
std::uint32_t comm_group(const chip::ClusterTopology& topo, std::uint32_t rank, const graph::Op& op) {
  return topo.group(chip::parse_comm_kind(op.attr_str("comm", "world")), rank).comm_id;
}

/// The replica group of a rank's sync samples of collective `op` (probes/consistency.h).
std::optional<std::uint32_t> replica_group(const chip::ClusterTopology& topo, std::uint32_t rank, const graph::Op& op) {
  if (!probes::is_collective_type(op.type)) return 0;
  const std::string replicas = op.attr_str("replicas", "");
  if (replicas == "none" || (replicas.empty() && op.type == "ReduceScatter")) return std::nullopt;
  if (replicas == "world") return 0;
  return comm_group(topo, rank, op);
}

/// This partition's part of report.json `perf`: its ranks' op and task records, PMU counters,
/// steps and HBM channels, and the network links it owns.
json perf_of_partition(const PreparedRun& run, Platform& platform, const std::vector<RankState>& st,
                       const AiCoreSet& cores) {
  const chip::ChipClock clock(run.chip.clock_mhz);
  const std::uint64_t end_ps = chip::ChipClock::to_ps(platform.end_time());
  std::map<std::uint32_t, PerfRank> perf;
  for (std::uint32_t r : platform.local_ranks()) {
    chip::Chip& c = platform.chip(r);
    PerfRank& p = perf[r];
    p.graph = &st[r].graph;
    p.ledger = &st[r].ledger;
    p.counters = c.pmu().at(end_ps);
    p.counters[spec::kPmuCaptureStall] = c.capture().counters().stall_cycles;
    p.cycles = clock.ps_to_cycles(platform.finish_ps(r));
    for (std::size_t k = 0; k < st[r].step_end_ps.size(); ++k)
      p.steps.emplace_back(clock.ps_to_cycles(st[r].step_begin_ps[k]), clock.ps_to_cycles(st[r].step_end_ps[k]));
    p.first_step = run.scenario.resume ? run.scenario.resume->from_step : 0;
    p.profiler = st[r].profiler.get();
    for (const auto& ch : c.hbm().channel_stats()) p.hbm_channels.emplace_back(ch.bytes, ch.busy_ps);
    if (r < cores.by_rank.size() && cores.by_rank[r]) p.cores = &cores.by_rank[r]->core_loads();
  }
  std::vector<PerfLink> links;
  if (const chip::CollectiveFabric* f = platform.fabric()) {
    const chip::Network& net = f->network();
    const chip::ClusterTopology& topo = f->topology();
    for (std::size_t id = 0; id < net.num_links(); ++id) {
      if (!net.owns(id)) continue;
      const chip::Link& l = net.link(id);
      const chip::LinkSpec& spec = topo.link(id);
      PerfLink pl{static_cast<std::uint32_t>(id), topo.link_name(id), std::string(chip::link_kind_name(spec.kind)),
                  std::nullopt, std::nullopt, l.nominal_gbps(), l.stats().bytes, l.stats().transfers,
                  l.stats().busy_ps, l.stats().wait_ps};
      if (spec.kind == chip::LinkKind::Hccs || spec.kind == chip::LinkKind::NicTx) pl.src = spec.from;
      if (spec.kind == chip::LinkKind::Hccs || spec.kind == chip::LinkKind::SwitchPort) pl.dst = spec.to;
      links.push_back(std::move(pl));
    }
  }
  return perf_partition(run.chip, perf, links);
}

}  // namespace

PartitionResult simulate_partition(const SimRequest& req) {
  // The ranks' held-back runtime warnings print when the simulation ends, error or not: a forked
  // simulation process ends without exit handlers.
  struct FlushWarnings {
    ~FlushWarnings() { probes::log::flush_rank_warnings(); }
  } flush_warnings;
  const PreparedRun& run = *req.run;
  const Scenario& s = run.scenario;
  const Workload& w = run.workload;
  const auto ranks = static_cast<std::uint32_t>(s.ranks);
  fs::create_directories(req.out_dir);

  auto trace_ptr = std::make_shared<chip::Trace>(req.trace);
  chip::Trace& trace = *trace_ptr;
  if (req.trace_steps) trace.set_step_window(req.trace_steps->first, req.trace_steps->second);
  const graph::Graph& executed = w.snapshots.fused;

  PlatformOptions po;
  po.chip = run.chip;
  po.cluster = run.cluster;
  po.host.sync_timeout_ns = std::uint64_t{run.cluster.exec_timeout_ms} * 1'000'000;
  po.ranks = ranks;
  po.partition = req.partition;
  po.process = req.process;
  auto cores = std::make_shared<AiCoreSet>();
  chip::AiCoreOptions core_opts;
  core_opts.keep_records = false;  // folded into each rank's PerfLedger instead
  po.make_cores = ai_core_factory(cores, core_opts);
  po.trace = &trace;
  Platform platform("platform", po);

  const bool probes_on = req.probes && run.probes.has_value();
  std::vector<RankState> st(ranks);
  const DataGenerator gen(s.data);
  // The chip's float mode (preset, chip.overrides.fp_mode, or precision.overflow_mode: prepare_run
  // reconciles them) and its flush-to-zero setting.
  const std::uint32_t fp_mode = run.chip.fp_mode_bits();
  std::vector<std::string> outputs = w.reference.outputs();
  const chip::ClusterTopology& topo = platform.topology();
  for (std::uint32_t r : platform.local_ranks()) {
    RankState& rs = st[r];
    rs.graph = executed;
    SimDevice& dev = platform.host(r).device();
    if (probes_on) {
      probes::RuntimeOptions ro;
      ro.rank = r;
      ro.world_size = ranks;
      ro.seed = s.seed;
      ro.output_dir = req.out_dir;
      ro.rewind_enabled = !s.rewind_pass;
      ro.consistency_group = [&topo, r](const graph::Op& op) { return replica_group(topo, r, op); };
      ro.comm_group = [&topo, r](const graph::Op& op) { return comm_group(topo, r, op); };
      rs.runtime = std::make_unique<probes::ProbeRuntime>(*run.probes, executed, dev, ro, &w.snapshots.original);
      rs.runtime->instrument(rs.graph);
    }
    ExecutorConfig ec;
    for (const auto& [name, spec] : w.shards) ec.rank_initializers[name] = shard_value(executed, name, spec, r);
    ec.rank = r;
    ec.world = ranks;
    ec.steps = static_cast<std::uint32_t>(s.steps);
    ec.accum = accum_of(s.precision.accumulation);
    ec.op_attrs = run.quantization;
    if (s.checkpoint_every > 0 && req.save_outputs) {
      if (r == 0) write_checkpoint_scenario(req.out_dir / "checkpoints", s);
      ec.checkpoint_every = static_cast<std::uint32_t>(s.checkpoint_every);
      ec.on_checkpoint = [root = req.out_dir / "checkpoints", r](std::uint32_t step,
                                                                  const std::map<std::string, graph::Tensor>& state) {
        write_checkpoint(root, r, step, state);
      };
    }
    if (s.resume) {
      ec.first_step = s.resume->from_step;
      const auto read = run.resume_values.find(r);
      ec.initial_values = read != run.resume_values.end() ? read->second
                                                          : read_checkpoint(s.resume->checkpoints, r, s.resume->from_step);
    }
    if (rs.runtime) {
      rs.runtime->note_uploads(ec.rank_initializers);
      rs.runtime->note_uploads(ec.initial_values);  // a checkpoint's state replaces both
    }
    ec.fp_mode = fp_mode;
    if (const auto& ls = s.training.loss_scaling) {
      ec.loss_scaling.enabled = true;
      ec.loss_scaling.scale_op = ls->scale_op;
      ec.loss_scaling.scaler = {ls->initial, ls->backoff, ls->growth, ls->growth_interval, ls->min_scale};
      ec.loss_scaling.status.guard = ls->guard;
      ec.loss_scaling.status.all_reduce = ls->all_reduce;
    }
    if (rs.runtime) {  // the scaler divides lr by its scale, which never drops below min(initial, min_scale)
      const auto& ls = s.training.loss_scaling;
      rs.runtime->note_lr_factor(ls ? 1.0 / std::min({1.0, ls->initial, ls->min_scale}) : 1.0);
    }
    ec.feeds = [&rs, &w, &gen, r](std::uint32_t step) {
      std::map<std::string, graph::Tensor> f;
      for (const auto& name : w.data_inputs) {
        const graph::TensorDesc& d = rs.graph.tensor(name).desc;
        auto it = w.input_inits.find(name);
        f.emplace(name, gen.make_input(name, d, step, w.replicated_data ? 0 : r,
                                       it == w.input_inits.end() ? nullptr : &it->second));
      }
      return f;
    };
    if (!w.loss.empty()) ec.fetch_each_step = {w.loss};
    for (const auto& o : outputs)
      if (rs.graph.find_tensor(o)) ec.fetch_at_end.push_back(o);
    if (s.profile) rs.profiler = std::make_unique<probes::PerfProfiler>(dev);
    ec.on_step = [&rs, &dev, &trace, r](std::uint32_t step, bool begin) {
      if (rs.profiler && !begin) rs.profiler->step_end(step);
      const std::uint64_t now = chip::ChipClock::to_ps(dev.local_now());
      if (begin) {
        rs.step_begin_ps.push_back(now);
        if (rs.profiler) rs.profiler->step_begin(step);
      } else {
        rs.step_end_ps.push_back(now);
        if (trace.enabled())
          trace.complete(chip::Trace::kHostPid + r, "main", fmt::format("step {}", step), "host",
                         rs.step_begin_ps.back(), now - rs.step_begin_ps.back());
      }
    };
    rs.executor = std::make_unique<Executor>(rs.graph, dev, rs.runtime.get(), ec);
    rs.executor->plan();
    platform.host(r).set_program([&rs] { rs.result = rs.executor->run(); });
  }

  // Injectors resolve tensors to HBM addresses through the executors' memory plans.
  std::unique_ptr<InjectionSet> injections =
      make_injections(run, executed, [&st](std::uint32_t r, const std::string& t) -> std::optional<inject::TensorPlacement> {
        if (r >= st.size() || !st[r].executor) return std::nullopt;
        auto ref = st[r].executor->locate(t);
        if (!ref) return std::nullopt;
        return inject::TensorPlacement{ref->addr, st[r].graph.tensor(t).desc};
      });
  chip::FaultHooks* hooks = injections ? injections->hooks() : nullptr;
  std::unique_ptr<chip::HooksTee> tee;
  if (req.observer) {
    tee = std::make_unique<chip::HooksTee>(hooks, *req.observer);
    hooks = tee.get();
  }
  if (hooks)
    for (std::uint32_t r : platform.local_ranks()) platform.chip(r).set_fault_hooks(hooks);

  for (std::uint32_t r : platform.local_ranks()) {
    PerfLedger& ledger = st[r].ledger;
    platform.chip(r).streams().set_task_sink([&ledger](const chip::StreamEngine::TaskRecord& t) { ledger.add_task(t); });
    if (r < cores->by_rank.size() && cores->by_rank[r])
      cores->by_rank[r]->set_record_sink([&ledger](const chip::OpRecord& rec) { ledger.add_op(rec); });
  }
  if (req.link) platform.run_partition(*req.link);
  else platform.run();
  // A job hang: the ranks whose programs did not return report the steps they completed.
  if (platform.hang())
    for (std::uint32_t r : platform.local_ranks()) st[r].result = st[r].executor->progress();

  PartitionResult out;
  json per_rank = json::array();
  std::vector<const PerfLedger*> ledgers(ranks, nullptr);
  std::vector<const graph::Graph*> graphs(ranks, nullptr);
  for (std::uint32_t r : platform.local_ranks()) {
    const RankState& rs = st[r];
    const ExecutorResult& er = rs.result;
    json steps = json::array();
    for (std::size_t k = 0; k < rs.step_end_ps.size(); ++k) steps.push_back({rs.step_begin_ps[k], rs.step_end_ps[k]});
    json l = json::array();
    for (const auto& step : er.fetched)
      if (auto it = step.find(w.loss); it != step.end()) l.push_back(it->second.to_f64().at(0));
    per_rank.push_back({{"rank", r},
                        {"finish_ps", platform.finish_ps(r)},
                        {"steps", std::move(steps)},
                        {"tasks", {er.kernel_tasks, er.collective_tasks, er.probe_tasks, er.barrier_tasks,
                                   er.in_kernel_statistics, er.in_kernel_dumps}},
                        {"losses", std::move(l)},
                        {"checkpoints", {er.checkpoints, er.checkpoint_bytes}},
                        {"loss_scale", loss_scale_json(er, s.training.loss_scaling.has_value())},
                        {"warnings", er.warnings}});
    if (req.save_outputs) save_outputs(req.out_dir / "outputs" / fmt::format("rank{}", r), er.final_values);
    graphs[r] = &rs.graph;
    if (r < cores->by_rank.size() && cores->by_rank[r]) ledgers[r] = &rs.ledger;
  }
  json quant = json::array();
  for (std::uint32_t r : platform.local_ranks())
    if (ledgers[r]) quant.push_back(quant_executions(*ledgers[r], r));
  out.data["quantization"] = std::move(quant);
  out.data["end_ps"] = chip::ChipClock::to_ps(platform.end_time());
  out.data["ranks"] = std::move(per_rank);
  {
    // Every local rank's tasks, the AI cores' kernels where there are cores.
    std::vector<const PerfLedger*> all(ranks, nullptr);
    for (std::uint32_t r : platform.local_ranks()) all[r] = &st[r].ledger;
    out.data["ops"] = op_cycles(all, graphs, platform.chip(platform.local_ranks().front()).clock());
  }
  out.data["perf"] = perf_of_partition(run, platform, st, *cores);
  out.data["injections"] = injections ? injections->partial_report() : json(nullptr);
  if (platform.hang())
    out.data["hang"] = hang_part(*platform.hang(), [&st](std::uint32_t r, std::uint32_t op) {
      return op < st[r].graph.ops().size() ? st[r].graph.ops()[op].name : fmt::format("op #{}", op);
    });
  if (trace.enabled()) out.live_trace = trace_ptr;
  if (probes_on) {
    auto pr = std::make_shared<ProbeRankResults>();
    for (std::uint32_t r : platform.local_ranks()) {
      pr->reports.push_back(st[r].runtime->take_report());
      auto smp = st[r].runtime->take_sync_samples();
      pr->samples.insert(pr->samples.end(), std::make_move_iterator(smp.begin()), std::make_move_iterator(smp.end()));
    }
    out.live_probes = std::move(pr);
  }
  return out;
}

json merge_partitions(const SimRequest& req, std::vector<PartitionResult> parts) {
  const PreparedRun& run = *req.run;
  const Workload& w = run.workload;
  const chip::ChipClock clock(run.chip.clock_mhz);
  std::map<std::uint32_t, json*> ranks;  // the partitions' rank entries, moved from below
  std::uint64_t end_ps = 0;
  json ops = json::array();
  std::map<std::uint32_t, json> ops_by_rank;
  std::vector<json> injections;
  for (auto& p : parts) {
    end_ps = std::max(end_ps, p.data.at("end_ps").get<std::uint64_t>());
    for (auto& r : p.data.at("ranks")) ranks[r.at("rank").get<std::uint32_t>()] = &r;
    for (auto& o : p.data.at("ops")) ops_by_rank[o.at("rank").get<std::uint32_t>()].push_back(std::move(o));
    if (!p.data.at("injections").is_null()) injections.push_back(p.data.at("injections"));
  }
  for (auto& [r, list] : ops_by_rank)
    for (auto& o : list) ops.push_back(std::move(o));

  json res;
  res["status"] = "ok";
  json per_rank = json::array(), per_step = json::array(), losses = json::array(), warnings = json::array();
  json loss_scale = json::array();
  std::uint64_t tasks[6] = {}, checkpoints = 0, checkpoint_bytes = 0;
  for (const auto& [r, rj] : ranks) {
    per_rank.push_back(clock.cycle_at(chip::ChipClock::from_ps(rj->at("finish_ps").get<std::uint64_t>())));
    json steps = json::array();
    for (const auto& be : rj->at("steps"))
      steps.push_back(clock.ps_to_cycles(be.at(1).get<std::uint64_t>()) - clock.ps_to_cycles(be.at(0).get<std::uint64_t>()));
    per_step.push_back(std::move(steps));
    for (int k = 0; k < 6; ++k) tasks[k] += rj->at("tasks").at(k).get<std::uint64_t>();
    checkpoints += rj->at("checkpoints").at(0).get<std::uint64_t>();
    checkpoint_bytes += rj->at("checkpoints").at(1).get<std::uint64_t>();
    losses.push_back(std::move(rj->at("losses")));
    if (!rj->at("loss_scale").is_null()) loss_scale.push_back(rj->at("loss_scale"));
    for (const auto& wmsg : rj->at("warnings")) warnings.push_back(wmsg);
  }
  res["cycles"] = {{"total", clock.cycle_at(chip::ChipClock::from_ps(end_ps))}, {"per_rank", std::move(per_rank)},
                   {"per_step", std::move(per_step)}};
  res["tasks"] = {{"kernel", tasks[0]},  {"collective", tasks[1]}, {"probe", tasks[2]}, {"barrier", tasks[3]},
                  {"in_kernel_statistics", tasks[4]}, {"in_kernel_dumps", tasks[5]}};
  const Scenario& s = run.scenario;
  if (s.checkpoint_every > 0 || s.resume)
    res["checkpoints"] = {{"every", s.checkpoint_every}, {"taken", checkpoints}, {"bytes", checkpoint_bytes},
                          {"resumed_from_step", s.resume ? json(s.resume->from_step) : json(nullptr)}};
  res["losses"] = w.loss.empty() ? json(nullptr) : std::move(losses);
  {
    std::vector<json> quant;
    for (const auto& p : parts)
      if (p.data.contains("quantization"))
        for (const auto& list : p.data["quantization"]) quant.push_back(list);
    res["quantization"] = quant_section(quant);
  }
  if (!loss_scale.empty()) res["loss_scaling"] = loss_scaling_section(loss_scale, *run.scenario.training.loss_scaling);
  {
    std::vector<json> hang;
    for (const auto& p : parts)
      if (p.data.contains("hang")) hang.push_back(p.data.at("hang"));
    if (!hang.empty()) {
      res["status"] = "hang";
      res["hang"] = merge_hang(hang, res.value("loss_scaling", json(nullptr)), res["cycles"]["per_rank"], clock);
      res["error"] = res["hang"].at("summary");  // why the run did not complete, for every reader
      end_ps = res["hang"].at("time_ps").get<std::uint64_t>();
      res["cycles"]["total"] = clock.cycle_at(chip::ChipClock::from_ps(end_ps));
    }
  }
  res["ops"] = std::move(ops);
  {
    std::vector<json> perf;
    for (auto& p : parts) perf.push_back(std::move(p.data.at("perf")));
    res["perf"] = perf_section(run.chip, std::move(perf), end_ps);
  }

  chip::Trace trace(req.trace);
  for (auto& p : parts) {
    if (trace.enabled()) {
      if (p.live_trace)
        trace.append(std::move(*p.live_trace));
      else
        trace.append_serialized(p.trace);
    }
    p.live_trace.reset();
  }
  if (req.probes && run.probes) {
    ProbeRankResults all;
    for (auto& p : parts) {
      ProbeRankResults pr = p.live_probes ? std::move(*p.live_probes) : decode_probe_results(p.probes);
      for (auto& r : pr.reports) all.reports.push_back(std::move(r));
      for (auto& smp : pr.samples) all.samples.push_back(std::move(smp));
    }
    std::stable_sort(all.reports.begin(), all.reports.end(),
                     [](const probes::RuntimeReport& a, const probes::RuntimeReport& b) { return a.rank < b.rank; });
    const graph::Graph& executed = w.snapshots.fused;
    merge_probe_results(res, probes::combine_reports(std::move(all.reports), all.samples, run.probes->consistency, executed),
                        executed);
    for (const auto& wmsg : res["probe_warnings"]) warnings.push_back(wmsg);
    res.erase("probe_warnings");
  }
  if (trace.enabled()) {
    if (res.contains("anomalies")) add_anomaly_flows(trace, res["anomalies"], clock);
    if (req.trace_steps) {
      trace.set_step_window(req.trace_steps->first, req.trace_steps->second);
      trace.close_step_window();
    }
    for (const auto f : req.trace_formats) trace.write_file((req.out_dir / chip::Trace::file_name(f)).string(), f);
  }
  res["warnings"] = warnings;
  res["injections"] = injections.empty() ? json::array() : merge_injection_reports(injections);
  return res;
}

json simulate(const SimRequest& req) {
  std::vector<PartitionResult> parts;  // not `{simulate_partition(req)}`: an initializer list copies its elements
  parts.push_back(simulate_partition(req));
  return merge_partitions(req, std::move(parts));
}

}  // namespace probelab::sim
