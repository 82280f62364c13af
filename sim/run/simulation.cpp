#include "sim/run/simulation.h"

#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "chip_model/hooks/hooks_tee.h"
#include "chip_model/spec/registers.h"
#include "graph/npy.h"
#include "probes/dump_writer.h"
#include "probes/probe_runtime.h"
#include "sim/platform/core_factory.h"
#include "sim/scenario/data_gen.h"
#include "sim/platform/executor.h"
#include "sim/scenario/injections.h"
#include "sim/platform/platform.h"
#include "sim/run/checkpoint_store.h"
#include "sim/run/perf_report.h"
#include "sim/run/probe_results.h"
#include "sim/run/trace_flows.h"
#include "sim/run/trace_stats.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

std::string sanitize_name(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    if (c == '/') c = '.';
    else if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  }
  return s;
}

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
};

}  // namespace

json simulate(const SimRequest& req) {
  const PreparedRun& run = *req.run;
  const Scenario& s = run.scenario;
  const Workload& w = run.workload;
  const auto ranks = static_cast<std::uint32_t>(s.ranks);
  fs::create_directories(req.out_dir);

  chip::Trace trace(req.trace);
  const graph::Graph& executed = w.snapshots.fused;

  PlatformOptions po;
  po.chip = run.chip;
  po.ranks = ranks;
  auto cores = std::make_shared<AiCoreSet>();
  po.make_cores = ai_core_factory(cores);
  po.trace = &trace;
  Platform platform("platform", po);

  const bool probes_on = req.probes && run.probes.has_value();
  std::vector<RankState> st(ranks);
  const DataGenerator gen(s.data);
  // The chip's float mode (preset, chip.overrides.fp_mode, or precision.overflow_mode: prepare_run
  // reconciles them) and its flush-to-zero setting.
  const std::uint32_t fp_mode = run.chip.fp_mode_bits();
  std::vector<std::string> outputs = w.reference.outputs();
  for (std::uint32_t r = 0; r < ranks; ++r) {
    RankState& rs = st[r];
    rs.graph = executed;
    SimDevice& dev = platform.host(r).device();
    if (probes_on) {
      probes::RuntimeOptions ro;
      ro.rank = r;
      ro.world_size = ranks;
      ro.seed = s.seed;
      ro.output_dir = req.out_dir;
      rs.runtime = std::make_unique<probes::ProbeRuntime>(*run.probes, executed, dev, ro, &w.snapshots.original);
      rs.runtime->instrument(rs.graph);
    }
    ExecutorConfig ec;
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
      ec.initial_values = read_checkpoint(s.resume->checkpoints, r, s.resume->from_step);
    }
    ec.fp_mode = fp_mode;
    ec.feeds = [&rs, &w, &gen, r](std::uint32_t step) {
      std::map<std::string, graph::Tensor> f;
      for (const auto& name : w.data_inputs) {
        const graph::TensorDesc& d = rs.graph.tensor(name).desc;
        auto it = w.input_inits.find(name);
        f.emplace(name, gen.make_input(name, d, step, r, it == w.input_inits.end() ? nullptr : &it->second));
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
        if (r >= st.size()) return std::nullopt;
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
    for (std::uint32_t r = 0; r < ranks; ++r) platform.chip(r).set_fault_hooks(hooks);

  platform.run();

  const chip::ChipClock& clock = platform.chip(0).clock();
  json res;
  res["status"] = "ok";
  json per_rank = json::array(), per_step = json::array();
  for (std::uint32_t r = 0; r < ranks; ++r) {
    per_rank.push_back(clock.cycle_at(platform.host(r).finish_time()));
    json steps = json::array();
    for (std::size_t k = 0; k < st[r].step_end_ps.size(); ++k)
      steps.push_back(clock.ps_to_cycles(st[r].step_end_ps[k]) - clock.ps_to_cycles(st[r].step_begin_ps[k]));
    per_step.push_back(steps);
  }
  res["cycles"] = {{"total", clock.cycle_at(platform.end_time())}, {"per_rank", per_rank}, {"per_step", per_step}};

  json tasks = {{"kernel", 0}, {"collective", 0}, {"probe", 0}, {"barrier", 0}, {"in_kernel_statistics", 0}, {"in_kernel_dumps", 0}};
  json losses = json::array(), warnings = json::array();
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const ExecutorResult& er = st[r].result;
    tasks["kernel"] = tasks["kernel"].get<std::uint64_t>() + er.kernel_tasks;
    tasks["collective"] = tasks["collective"].get<std::uint64_t>() + er.collective_tasks;
    tasks["probe"] = tasks["probe"].get<std::uint64_t>() + er.probe_tasks;
    tasks["barrier"] = tasks["barrier"].get<std::uint64_t>() + er.barrier_tasks;
    tasks["in_kernel_statistics"] = tasks["in_kernel_statistics"].get<std::uint64_t>() + er.in_kernel_statistics;
    tasks["in_kernel_dumps"] = tasks["in_kernel_dumps"].get<std::uint64_t>() + er.in_kernel_dumps;
    json l = json::array();
    for (const auto& step : er.fetched)
      if (auto it = step.find(w.loss); it != step.end()) l.push_back(it->second.to_f64().at(0));
    losses.push_back(l);
    for (const auto& wmsg : er.warnings) warnings.push_back(wmsg);
    if (req.save_outputs) save_outputs(req.out_dir / "outputs" / fmt::format("rank{}", r), er.final_values);
  }
  res["tasks"] = tasks;
  if (s.checkpoint_every > 0 || s.resume) {
    std::uint64_t count = 0, bytes = 0;
    for (const RankState& rs : st) {
      count += rs.result.checkpoints;
      bytes += rs.result.checkpoint_bytes;
    }
    res["checkpoints"] = {{"every", s.checkpoint_every}, {"taken", count}, {"bytes", bytes},
                          {"resumed_from_step", s.resume ? json(s.resume->from_step) : json(nullptr)}};
  }
  res["losses"] = w.loss.empty() ? json(nullptr) : losses;

  {
    std::vector<const graph::Graph*> graphs;
    std::vector<const std::vector<chip::OpRecord>*> records;
    for (std::uint32_t r = 0; r < ranks; ++r) {
      graphs.push_back(&st[r].graph);
      records.push_back(r < cores->by_rank.size() && cores->by_rank[r] ? &cores->by_rank[r]->records() : nullptr);
    }
    res["ops"] = op_cycles(records, graphs, trace.enabled() ? &trace : nullptr, clock);
    std::vector<PerfRank> perf(ranks);
    for (std::uint32_t r = 0; r < ranks; ++r) {
      chip::Chip& c = platform.chip(r);
      PerfRank& p = perf[r];
      p.graph = &st[r].graph;
      p.ops = records[r];
      p.tasks = &c.streams().task_records();
      p.counters = c.pmu().at(chip::ChipClock::to_ps(platform.end_time()));
      p.counters[spec::kPmuCaptureStall] = c.capture().counters().stall_cycles;
      p.cycles = clock.cycle_at(platform.host(r).finish_time());
      for (std::size_t k = 0; k < st[r].step_end_ps.size(); ++k)
        p.steps.emplace_back(clock.ps_to_cycles(st[r].step_begin_ps[k]), clock.ps_to_cycles(st[r].step_end_ps[k]));
      p.first_step = s.resume ? s.resume->from_step : 0;
      p.profiler = st[r].profiler.get();
      for (const auto& ch : c.hbm().channel_stats()) p.hbm_channels.emplace_back(ch.bytes, ch.busy_ps);
    }
    std::vector<PerfLink> links;
    if (chip::CollectiveFabric* f = platform.fabric())
      for (const chip::Link* l : f->links())
        links.push_back({l->src(), l->dst(), l->bandwidth_gbps(), l->stats().bytes, l->stats().transfers,
                         l->stats().busy_ps, l->stats().wait_ps});
    res["perf"] = perf_section(run.chip, perf, links, chip::ChipClock::to_ps(platform.end_time()));
  }

  if (probes_on) {
    std::vector<const probes::ProbeRuntime*> rts;
    for (const auto& rs : st) rts.push_back(rs.runtime.get());
    merge_probe_results(res, probes::combine_ranks(rts), executed);
    for (const auto& wmsg : res["probe_warnings"]) warnings.push_back(wmsg);
    res.erase("probe_warnings");
  }
  if (trace.enabled()) {
    if (res.contains("anomalies")) add_anomaly_flows(trace, res["anomalies"], clock);
    for (const auto f : req.trace_formats) trace.write_file((req.out_dir / chip::Trace::file_name(f)).string(), f);
  }
  res["warnings"] = warnings;
  res["injections"] = injections ? injections->report() : json::array();
  return res;
}

}  // namespace probelab::sim
