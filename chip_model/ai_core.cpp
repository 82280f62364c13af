// AI cores: functional execution through kernels::OpRunner, timing through the tile pipeline.
#include "chip_model/ai_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <tuple>

#include "chip_model/capture_dma.h"
#include "chip_model/capture_unit.h"
#include "chip_model/hbm.h"
#include "chip_model/kernels/op_args_graph.h"
#include "chip_model/l2_cache.h"
#include "graph/format.h"
#include "chip_model/perf_monitor.h"
#include "chip_model/kernels/op_runner.h"
#include "chip_model/spec/capture_math.h"
#include "chip_model/trace.h"
#include "graph/dtype.h"

namespace probelab::chip {
namespace {

/// Functional operand movement (timing is charged per tile by the pipeline).
class HbmMemory final : public kernels::KernelMemory {
 public:
  explicit HbmMemory(Hbm& hbm) : hbm_(hbm) {}
  void read(std::uint64_t addr, std::span<std::byte> dst) override { hbm_.debug_read(addr, dst); }
  void write(std::uint64_t addr, std::span<const std::byte> src) override { hbm_.debug_write(addr, src); }
  std::optional<num::ScanReport> scanned(std::uint64_t addr, std::uint64_t len,
                                         const graph::TensorDesc& stored) const override {
    return hbm_.scans().find(addr, len, stored);
  }
  void note_scanned(std::uint64_t addr, std::uint64_t len, const graph::TensorDesc& stored,
                    const num::ScanReport& scan) override {
    hbm_.scans().note(addr, len, stored, scan);
  }

 private:
  Hbm& hbm_;
};

num::Mode mode_of(std::uint32_t fp_mode) {
  num::Mode m;
  m.overflow = (fp_mode & spec::kFpModeSaturation) ? num::OverflowMode::Saturation : num::OverflowMode::InfNan;
  m.denormal = (fp_mode & spec::kFpModeFlushDenormals) ? num::DenormalMode::FlushToZero : num::DenormalMode::Preserve;
  return m;
}

double gbps(std::uint64_t bytes_per_cycle, std::uint32_t mhz) {
  return static_cast<double>(bytes_per_cycle) * mhz / 1000.0;
}

/// Bytes of the tensors the task asks in-kernel statistics of; throws on a bit naming no tensor.
std::uint64_t stats_bytes(const spec::TaskDescriptor& task, const spec::OpArgs& args) {
  std::uint64_t bytes = 0;
  auto add = [&](std::uint16_t mask, const std::vector<spec::TensorRef>& refs, const char* what) {
    spec::for_each_bit(mask, [&](std::uint16_t i) {
      if (i >= refs.size() || refs[i].dtype == spec::kAbsentTensor)
        throw std::runtime_error(fmt::format("task {} (op {}): in-kernel statistics of {} {}, which the op does not have",
                                             task.task_id, task.op_id, what, i));
      bytes += static_cast<std::uint64_t>(spec::tensor_numel(refs[i])) * spec::element_bytes(refs[i].dtype);
    });
  };
  add(task.stats_inputs, args.inputs, "input");
  add(task.stats_outputs, args.outputs, "output");
  return bytes;
}

/// Writing the capture DMA descriptors of a kernel's output dumps (estimate).
constexpr std::uint64_t kDumpDescriptorCycles = 16;

/// A cross-core flag (CrossCoreSetFlag -> CrossCoreWaitFlag) between a Cube core and its Vector
/// cores (estimate: a synchronisation through the core's flag registers, tens of cycles).
constexpr std::uint64_t kCrossCoreFlagCycles = 32;

/// Merge of the per-core partial statistics on the lead core after the last tile's epilogue
/// (estimate): the partials of cores that finished earlier are combined while the others still
/// run, so what remains is reading the last 64-byte partial over the L2 port, one Vector
/// combine, and 16 cycles for the completion handshake.
std::uint64_t stats_merge_cycles(std::uint32_t l2_bytes_per_cycle) {
  const std::uint64_t port = std::max<std::uint32_t>(l2_bytes_per_cycle, 1);
  return (64 + port - 1) / port + 1 + 16;
}

}  // namespace

AiCore::AiCore(sc_core::sc_module_name name, const ChipServices& services, AiCoreOptions opts)
    : sc_core::sc_module(name), svc_(services), opts_(opts) {}

std::shared_ptr<const kernels::PreparedOp> AiCore::prepare(const spec::TaskDescriptor& task,
                                                           std::span<const std::byte> block) {
  // Bounded: a runtime that writes its blocks at ever new addresses starts the cache over.
  constexpr std::size_t kMaxPrepared = 4096;
  auto it = std::lower_bound(prepared_.begin(), prepared_.end(), task.args_addr,
                             [](const auto& e, std::uint64_t a) { return e.first < a; });
  const bool known = it != prepared_.end() && it->first == task.args_addr;
  if (known && it->second->bytes.size() == block.size() &&
      std::memcmp(it->second->bytes.data(), block.data(), block.size()) == 0)
    return it->second->op;
  std::shared_ptr<const kernels::PreparedOpPool::Entry> entry;
  try {
    entry = svc_.ops ? svc_.ops->get(block) : kernels::PreparedOpPool::make(block);
  } catch (const spec::OpArgsError& e) {
    throw std::runtime_error(fmt::format("task {} (op {}): {}", task.task_id, task.op_id, e.what()));
  }
  if (known) {
    it->second = entry;
  } else {
    if (prepared_.size() >= kMaxPrepared) {
      prepared_.clear();
      it = prepared_.end();
    }
    prepared_.emplace(it, task.args_addr, entry);
  }
  return entry->op;
}

std::uint32_t AiCore::aiv_per_core() const { return svc_.config->vector_per_core(); }

kernels::CoreTimingParams AiCore::timing_params(std::uint32_t cores) const {
  const ChipConfig& c = *svc_.config;
  kernels::CoreTimingParams p;
  p.cores = cores;
  p.clock_mhz = c.clock_mhz;
  p.cube_m = c.cube_m;
  p.cube_n = c.cube_n;
  p.cube_k = c.cube_k;
  p.vector_bytes_per_cycle = c.vector_bytes_per_cycle;
  p.mte_bytes_per_cycle = c.mte_bytes_per_cycle;
  p.l1_bytes = c.l1_bytes;
  p.l0a_bytes = c.l0a_bytes;
  p.l0b_bytes = c.l0b_bytes;
  p.l0c_bytes = c.l0c_bytes;
  p.ub_bytes = c.ub_bytes;
  p.l1_l0a_bytes_per_cycle = c.l1_l0a_bytes_per_cycle;
  p.l1_l0b_bytes_per_cycle = c.l1_l0b_bytes_per_cycle;
  p.l2_bytes = c.l2_bytes;
  p.l2_bytes_per_cycle = c.l2_read_bytes_per_cycle;
  return p;
}

void AiCore::execute(TaskContext& ctx) {
  const spec::TaskDescriptor& task = ctx.task;
  if (task.kernel != spec::kKernelOpArgs)
    throw std::runtime_error(fmt::format("task {} (op {}): unknown kernel id {} (only {} = op args kernel exists)",
                                         task.task_id, task.op_id, task.kernel, spec::kKernelOpArgs));
  if (ctx.cores.empty()) throw std::runtime_error(fmt::format("task {}: no cores granted", task.task_id));
  Hbm& hbm = *svc_.hbm;
  std::vector<std::byte> block(task.args_size);
  hbm.read(task.args_addr, block, ctx.qk, HbmClient::Core);

  const std::uint32_t lead = ctx.cores.front();
  FaultHooks* hooks = svc_.faults;
  HbmMemory mem(hbm);
  kernels::OpRunner run(prepare(task, block), mode_of(ctx.fp_mode));
  const std::string& label = run.args().op_name.empty() ? run.args().op_type : run.args().op_name;
  const sc_core::sc_time start = ctx.now();
  const std::uint64_t start_cycle = ctx.cycle();
  run.load(mem, hooks, ctx.site(lead));
  run.compute(hooks, ctx.site(lead));

  const auto ncores = static_cast<std::uint32_t>(ctx.cores.size());
  kernels::OpWork work = run.work();
  work.stats_bytes = stats_bytes(task, run.args());
  // On a split chip a Vector-only op tiles over the granted AI cores' Vector cores (AIV), each
  // with its own MTE port and Vector unit; Cube ops run on the Cube cores (AIC). A fused Cube +
  // Vector op, or a Cube op with in-kernel statistics, is a mixed kernel: its Cube part on the
  // AIC, its vector epilogue on that AIC's AIVs, tiles handed over through the L2 (pipeline).
  const bool split = aiv_per_core() > 1;
  const bool mixed = split && !work.gemms.empty() &&
                     (work.stats_bytes > 0 || (run.args().is_fused() && work.vector_elems > 0));
  const std::uint32_t units = work.gemms.empty() ? ncores * aiv_per_core() : ncores;
  const kernels::CoreTimingParams params = timing_params(units);
  const auto out_elems = static_cast<std::uint64_t>(spec::tensor_numel(run.args().outputs.at(0)));
  std::shared_ptr<const kernels::TilePlan> shared_plan = run.prepared().plan(work, params, units, out_elems);
  const kernels::TilePlan* plan_of_op = shared_plan.get();
  kernels::TilePlan slowed_plan;  // a copy only when a performance fault changes the steps
  if (svc_.perf && (svc_.perf->compute_slowdown != 1.0 || !svc_.perf->core_slowdown.empty())) {
    slowed_plan = *shared_plan;
    plan_of_op = &slowed_plan;
    if (svc_.perf->compute_slowdown != 1.0) {
      // A straggler (performance fault): every compute and epilogue step takes longer.
      const double f = svc_.perf->compute_slowdown;
      auto slow = [f](std::uint64_t c) { return static_cast<std::uint64_t>(std::ceil(static_cast<double>(c) * f)); };
      for (auto& core_steps : slowed_plan.steps)
        for (kernels::TileStep& st : core_steps) {
          st.compute_cycles = slow(st.compute_cycles);
          st.post_cycles = slow(st.post_cycles);
        }
    }
    // A throttled AI core (performance fault): its units' compute and epilogue steps take longer.
    const std::size_t per = std::max<std::size_t>(1, slowed_plan.steps.size() / std::max<std::uint32_t>(ncores, 1));
    for (std::size_t u = 0; u < slowed_plan.steps.size(); ++u) {
      const auto it = svc_.perf->core_slowdown.find(ctx.cores[std::min(u / per, ctx.cores.size() - 1)]);
      if (it == svc_.perf->core_slowdown.end()) continue;
      for (kernels::TileStep& st : slowed_plan.steps[u]) {
        st.compute_cycles = static_cast<std::uint64_t>(std::ceil(static_cast<double>(st.compute_cycles) * it->second));
        st.post_cycles = static_cast<std::uint64_t>(std::ceil(static_cast<double>(st.post_cycles) * it->second));
      }
    }
  }
  const kernels::TilePlan& plan = *plan_of_op;
  PipelineOptions popt;
  popt.clock_mhz = svc_.clock.mhz();
  popt.mte_gbps = gbps(params.mte_bytes_per_cycle, params.clock_mhz);
  popt.l2_gbps = gbps(params.l2_bytes_per_cycle, params.clock_mhz);
  if (svc_.perf && svc_.perf->compute_slowdown != 1.0) {  // the core's ports run on its (slower) clock
    popt.mte_gbps /= svc_.perf->compute_slowdown;
    popt.l2_gbps /= svc_.perf->compute_slowdown;
  }
  popt.hbm_latency_ps = static_cast<std::uint64_t>(svc_.config->hbm_latency_ns) * 1000;
  popt.l2_write_gbps = gbps(svc_.config->l2_write_bytes_per_cycle, params.clock_mhz);
  if (mixed) {
    popt.aiv_per_unit = aiv_per_core();
    popt.flag_ps = svc_.clock.cycles_to_ps(kCrossCoreFlagCycles);
    // Statistics of a plain Cube op only read its output: the AIV reads the stored tiles back.
    popt.epilogue_reads_output = !(run.args().is_fused() && work.vector_elems > 0);
  }
  popt.record_spans = opts_.verbose_trace && svc_.trace->enabled();
  if (svc_.l2) {
    popt.l2 = svc_.l2;
    popt.inputs = run.prepared().input_ranges;
    popt.outputs = run.prepared().output_ranges;
  }
  const PipelineResult r = run_pipeline(plan, hbm, start, popt);

  std::uint64_t last_tile_ps = r.start_ps, first_tile_ps = r.end_ps;
  for (std::uint64_t t : r.tile_done_ps) {
    last_tile_ps = std::max(last_tile_ps, t);
    first_tile_ps = std::min(first_tile_ps, t);
  }
  FaultSite out_site = ctx.site(lead);
  out_site.cycle = svc_.clock.ps_to_cycles(last_tile_ps);
  run.finish(hooks, out_site, svc_.config->vector_lanes());

  // Detection reports: one per anomalous tensor, each kind with its own element and the cycle of
  // the tile holding it (inputs: when the first tile was loaded).
  const kernels::OpDetection& det = run.detection();
  // The core whose work holds an element (split chips: which kind and which one).
  const std::uint32_t aiv = aiv_per_core();
  auto unit_of_tile = [&](std::int64_t tile) -> std::uint32_t {
    return tile < 0 ? 0u : static_cast<std::uint32_t>(static_cast<std::uint64_t>(tile) % units);
  };
  auto core_of = [&](std::int64_t tile, bool epilogue) -> std::uint32_t {
    if (!split) return lead;  // coupled: the task's lead core, as before
    if (work.gemms.empty()) {  // a Vector op: unit u is AIV u % aiv of AI core u / aiv
      const std::uint32_t u = unit_of_tile(tile);
      return spec::core_id(spec::CoreKind::Vector, ctx.cores[u / aiv] * aiv + u % aiv);
    }
    const std::uint32_t aic = ctx.cores[unit_of_tile(tile)];
    if (!mixed || !epilogue) return spec::core_id(spec::CoreKind::Cube, aic);
    const auto local = static_cast<std::uint32_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(tile, 0)) / units);
    return spec::core_id(spec::CoreKind::Vector, aic * aiv + local % aiv);
  };
  auto report = [&](const kernels::TensorFlags& f, bool inputs, std::uint16_t slot, std::uint8_t dtype,
                    auto&& cycle_of) {
    if (f.status == 0 && !f.any_kind()) return;
    DetectionEvent ev = ctx.detection_event(lead);
    ev.status = f.status;
    for (std::uint32_t k = 0; k < spec::kExcKindCount; ++k) {
      const kernels::KindHit& kh = f.kinds[k];
      if (!kh.hit()) continue;
      spec::ExcHit& h = ev.kinds[k];
      h.hit = true;
      h.element = static_cast<std::uint64_t>(kh.first);
      h.count = kh.count;
      h.value_bits = std::bit_cast<std::uint32_t>(kh.value);
      h.detail = kh.detail;
      h.is_input = inputs;
      h.slot = !inputs       ? slot
               : kh.slot >= 0 ? static_cast<std::uint16_t>(kh.slot)
                              : static_cast<std::uint16_t>(std::max(k == spec::kExcNanInput ? det.nan_input : det.inf_input, 0));
      h.dtype = inputs ? run.args().inputs.at(h.slot).dtype : dtype;
      h.cycle = svc_.clock.ps_to_cycles(cycle_of(h.element));
      // Inputs are read by the first tile's core; a result by the core that produced the element:
      // on a mixed kernel the AIV of its epilogue, unless only the Cube's accumulation raised it.
      const std::int64_t tile = inputs || slot != 0 ? 0 : plan.tile_of_element(h.element);
      const bool cube_only = (h.detail & (spec::kExcDetailAccumulator | spec::kExcDetailPartial)) != 0 &&
                             (h.detail & (spec::kExcDetailConversion | spec::kExcDetailCompute)) == 0;
      h.core = core_of(tile, !inputs && !cube_only);
    }
    ev.core = core_of(0, false);
    svc_.detection->report(ev);
  };
  report(det.inputs, true, 0, 0, [&](std::uint64_t) { return first_tile_ps; });
  for (std::size_t o = 0; o < det.outputs.size(); ++o)
    report(det.outputs[o], false, static_cast<std::uint16_t>(o), run.args().outputs[o].dtype, [&](std::uint64_t e) {
      if (o != 0) return last_tile_ps;
      const std::int64_t tile = plan.tile_of_element(e);
      return tile >= 0 && static_cast<std::size_t>(tile) < r.tile_done_ps.size() ? r.tile_done_ps[static_cast<std::size_t>(tile)]
                                                                                 : last_tile_ps;
    });

  run.store(mem);
  ctx.qk.set(ChipClock::from_ps(r.end_ps) - sc_core::sc_time_stamp());
  if (task.stats_inputs || task.stats_outputs) emit_statistics(ctx, run, last_tile_ps);
  if (task.dump_outputs) queue_dumps(ctx, run);

  OpRecord rec;
  rec.op_id = task.op_id;
  rec.task_id = task.task_id;
  rec.step = ctx.step;
  rec.stream = ctx.stream;
  rec.op_type = run.args().op_type;
  rec.op_name = run.args().op_name;
  rec.start_cycle = start_cycle;
  rec.end_cycle = svc_.clock.ps_to_cycles(r.end_ps);
  rec.cycles = rec.end_cycle - rec.start_cycle;
  rec.flops = work.flops;
  rec.hbm_read_bytes = r.hbm_read_bytes;
  rec.hbm_write_bytes = r.hbm_write_bytes;
  rec.l2_read_bytes = r.l2_read_bytes;
  rec.l2_write_bytes = r.l2_write_bytes;
  rec.l2_miss_bytes = r.l2_miss_bytes;
  rec.l2_writeback_bytes = r.l2_writeback_bytes;
  rec.cube_cycles = r.cube_cycles;
  rec.vector_cycles = r.vector_cycles;
  rec.cores = ncores;
  rec.units = mixed ? units * (1 + aiv_per_core()) : units;
  rec.tiles = static_cast<std::uint64_t>(plan.num_tiles);
  rec.quant = run.quant_records();
  std::uint64_t mte_ps = 0;
  for (const PipelineResult::CoreSpan& s : r.cores) mte_ps += s.mte_busy_ps;
  for (const PipelineResult::CoreSpan& s : r.aivs) mte_ps += s.mte_busy_ps;
  rec.mte_cycles = svc_.clock.ps_to_cycles(mte_ps);
  // Port time of the bytes moved: HBM bytes at the MTE port rate, L2 bytes at the L2 port rate.
  auto port_time_ps = [](std::uint64_t bytes, double gbps) { return gbps > 0 ? static_cast<double>(bytes) / gbps * 1000.0 : 0.0; };
  const double port_ps =
      port_time_ps(r.hbm_read_bytes + r.hbm_write_bytes, popt.mte_gbps) + port_time_ps(r.l2_read_bytes, popt.l2_gbps);
  const auto port = static_cast<std::uint64_t>(port_ps);
  rec.hbm_stall_cycles = mte_ps > port ? svc_.clock.ps_to_cycles(mte_ps - port) : 0;
  if (svc_.pmu) {
    PerfMonitor::Counters d{};
    d[spec::kPmuKernelOps] = 1;
    d[spec::kPmuKernelCycles] = rec.cycles;
    d[spec::kPmuCubeBusy] = rec.cube_cycles;
    d[spec::kPmuVectorBusy] = rec.vector_cycles;
    d[spec::kPmuMteBusy] = rec.mte_cycles;
    d[spec::kPmuHbmReadBytes] = rec.hbm_read_bytes;
    d[spec::kPmuHbmWriteBytes] = rec.hbm_write_bytes;
    d[spec::kPmuL2ReadBytes] = rec.l2_read_bytes;
    d[spec::kPmuCubeFlops] = rec.flops;
    d[spec::kPmuHbmStall] = rec.hbm_stall_cycles;
    svc_.pmu->add(r.end_ps, d, ChipClock::to_ps(sc_core::sc_time_stamp()));
  }
  if (sink_) sink_(rec);
  if (opts_.keep_records) records_.push_back(std::move(rec));
  account_cores(ctx, r);
  if (svc_.trace->enabled()) trace_op(ctx, label, r);
  if (svc_.l2 && svc_.trace->enabled()) {
    // The shared L2's traffic of this op on track "l2", its resident and dirty bytes as counters.
    svc_.trace->complete(svc_.rank, "l2", label, "l2", r.start_ps, r.end_ps - r.start_ps,
                         {{"op", std::uint64_t{task.op_id}}, {"task", std::uint64_t{task.task_id}},
                          {"hit_bytes", r.l2_read_bytes}, {"miss_bytes", r.l2_miss_bytes},
                          {"write_bytes", r.l2_write_bytes}, {"writeback_bytes", r.l2_writeback_bytes}});
    svc_.trace->counter(svc_.rank, "l2 resident", "bytes", r.end_ps, static_cast<double>(svc_.l2->resident_bytes()));
    svc_.trace->counter(svc_.rank, "l2 dirty", "bytes", r.end_ps, static_cast<double>(svc_.l2->dirty_bytes()));
  }
}

void AiCore::emit_statistics(TaskContext& ctx, const kernels::OpRunner& run, std::uint64_t last_tile_ps) {
  // The merge starts when the last tile's epilogue (its partial statistics) is done and runs
  // beside that tile's store; the records leave once both are done.
  const sc_core::sc_time merge_start = ChipClock::from_ps(last_tile_ps);
  const sc_core::sc_time merge_end = merge_start + svc_.clock.cycles(stats_merge_cycles(svc_.config->l2_read_bytes_per_cycle));
  if (merge_end > ctx.now()) ctx.qk.set(merge_end - sc_core::sc_time_stamp());
  if (svc_.trace->enabled())
    svc_.trace->complete(svc_.rank, TaskContext::core_track(ctx.cores.front(), aiv_per_core() > 1 ? "aiv0.vector" : "vector"),
                         "stats merge", "debug",
                         ChipClock::to_ps(merge_start), ChipClock::to_ps(merge_end - merge_start),
                         {{"task_id", std::uint64_t{ctx.task.task_id}}});
  auto emit = [&](const spec::TensorRef& ref, const graph::Tensor& t, std::uint16_t index, bool is_input) {
    const spec::CaptureStats s =
        spec::compute_stats(t.bytes(), ref.dtype, static_cast<std::size_t>(spec::tensor_numel(ref)));
    const auto payload = std::as_bytes(std::span(&s, 1));
    svc_.capture->produce(tensor_record_header(ctx.task, ref, spec::CapturePayload::Statistics, index, is_input),
                          payload, ctx.qk, ctx.site(ctx.cores.front()));
  };
  spec::for_each_bit(ctx.task.stats_inputs, [&](std::uint16_t i) { emit(run.args().inputs[i], run.inputs()[i], i, true); });
  spec::for_each_bit(ctx.task.stats_outputs,
                     [&](std::uint16_t o) { emit(run.args().outputs[o], run.outputs()[o], o, false); });
}

void AiCore::queue_dumps(TaskContext& ctx, const kernels::OpRunner& run) {
  if (!ctx.capture_dma)
    throw std::runtime_error(fmt::format("task {} (op {}): output dumps asked but no capture DMA engine is attached",
                                         ctx.task.task_id, ctx.task.op_id));
  ctx.qk.inc(svc_.clock.cycles(kDumpDescriptorCycles));
  spec::for_each_bit(ctx.task.dump_outputs, [&](std::uint16_t o) {
    if (o >= run.args().outputs.size())
      throw std::runtime_error(fmt::format("task {} (op {}): dump of output {}, which the op does not have",
                                           ctx.task.task_id, ctx.task.op_id, o));
    ctx.capture_dma->enqueue_dump(ctx.stream, ctx.task, run.args().outputs[o], o, ctx.now());
  });
}

void AiCore::trace_op(const TaskContext& ctx, const std::string& name, const PipelineResult& r) const {
  Trace& tr = *svc_.trace;
  // PMU counter tracks: busy cores of each unit and the cores' HBM traffic, spread over the op.
  {
    std::uint64_t busy[3] = {0, 0, 0};
    for (const auto* list : {&r.cores, &r.aivs})
      for (const PipelineResult::CoreSpan& s : *list) {
        busy[0] += s.cube_busy_ps;
        busy[1] += s.vec_busy_ps;
        busy[2] += s.mte_busy_ps;
      }
    const std::uint64_t dur = r.end_ps - r.start_ps;
    static const char* kTracks[] = {"pmu.cube_busy", "pmu.vector_busy", "pmu.mte_busy"};
    for (int u = 0; u < 3; ++u)
      if (busy[u]) tr.rate(svc_.rank, kTracks[u], "cores", r.start_ps, dur, (busy[u] + 500) / 1000);
    if (r.hbm_read_bytes + r.hbm_write_bytes)
      tr.rate(svc_.rank, "pmu.core_hbm", "GB/s", r.start_ps, dur, r.hbm_read_bytes + r.hbm_write_bytes);
  }
  const Trace::Args base{{"op", std::uint64_t{ctx.task.op_id}}, {"task", std::uint64_t{ctx.task.task_id}}};
  if (opts_.verbose_trace) {
    static const char* kPipes[] = {"mte", "cube", "vector", "mte"};
    static const char* kWhat[] = {"load", "compute", "epilogue", "store"};
    for (const PipelineResult::StepSpan& s : r.spans) {
      const char* pipe = s.pipe == 1 ? (s.cube ? "cube" : "vector") : kPipes[s.pipe];
      const std::size_t per = std::max<std::size_t>(1, r.units / std::max<std::size_t>(ctx.cores.size(), 1));
      const std::string track = per > 1 && !s.cube ? fmt::format("aiv{}.{}", s.core % per, pipe) : std::string(pipe);
      tr.complete(svc_.rank, TaskContext::core_track(ctx.cores[s.core / per], track.c_str()), name, kWhat[s.pipe], s.start_ps,
                  s.end_ps - s.start_ps, base);
    }
    return;
  }
  auto span = [&](std::uint32_t core, const char* pipe, std::uint64_t first, std::uint64_t last, std::uint64_t busy,
                  std::uint64_t tiles) {
    if (busy == 0) return;
    Trace::Args a = base;
    a.emplace_back("busy_cycles", svc_.clock.ps_to_cycles(busy));
    a.emplace_back("tiles", tiles);
    tr.complete(svc_.rank, TaskContext::core_track(core, pipe), name, "kernel", first, last - first, std::move(a));
  };
  // More pipeline units than granted cores: the Vector cores of a split chip, per AI core "aiv<j>.mte"/"aiv<j>.vector".
  const std::size_t per = std::max<std::size_t>(1, r.units / std::max<std::size_t>(ctx.cores.size(), 1));
  for (std::size_t c = 0; c < r.cores.size(); ++c) {
    const PipelineResult::CoreSpan& s = r.cores[c];
    const std::uint32_t core = ctx.cores[c / per];
    const std::string aiv = per > 1 ? fmt::format("aiv{}.", c % per) : std::string();
    span(core, (aiv + "mte").c_str(), s.mte_first_ps, s.mte_last_ps, s.mte_busy_ps, s.tiles);
    span(core, "cube", s.cube_first_ps, s.cube_last_ps, s.cube_busy_ps, s.tiles);
    span(core, (aiv + "vector").c_str(), s.vec_first_ps, s.vec_last_ps, s.vec_busy_ps, s.tiles);
  }
  if (!r.aivs.empty()) trace_handoffs(ctx, name, r);
}

void AiCore::trace_handoffs(const TaskContext& ctx, const std::string& name, const PipelineResult& r) const {
  // A mixed kernel: the AIVs' own spans, and per tile the hand-over — the AIC's fixpipe writing
  // the workspace slot (or storing the tile) and setting the flag ("core<i>.fixpipe"), the AIV
  // waiting for it, loading the tile and running its pass ("core<i>.aiv<j>.xcore"), joined by a flow.
  Trace& tr = *svc_.trace;
  const std::size_t per = r.aivs.size() / std::max<std::size_t>(r.cores.size(), 1);
  const Trace::Args base{{"op", std::uint64_t{ctx.task.op_id}}, {"task", std::uint64_t{ctx.task.task_id}}};
  for (std::size_t v = 0; v < r.aivs.size(); ++v) {
    const PipelineResult::CoreSpan& s = r.aivs[v];
    const std::uint32_t core = ctx.cores[v / per];
    for (const auto& [pipe, first, last, busy] :
         {std::tuple{"mte", s.mte_first_ps, s.mte_last_ps, s.mte_busy_ps},
          std::tuple{"vector", s.vec_first_ps, s.vec_last_ps, s.vec_busy_ps}}) {
      if (busy == 0) continue;
      Trace::Args a = base;
      a.emplace_back("busy_cycles", svc_.clock.ps_to_cycles(busy));
      a.emplace_back("tiles", s.tiles);
      tr.complete(svc_.rank, TaskContext::core_track(core, fmt::format("aiv{}.{}", v % per, pipe).c_str()), name,
                  "kernel", first, last - first, std::move(a));
    }
  }
  for (const PipelineResult::Handoff& h : r.handoffs) {
    const std::uint32_t core = ctx.cores[h.unit];
    const std::string key = fmt::format("xcore {}:{}:{}", svc_.rank, ctx.task.task_id, h.tile);
    const std::string fix = TaskContext::core_track(core, "fixpipe");
    Trace::Args a = base;
    a.emplace_back("tile", static_cast<std::uint64_t>(h.tile));
    a.emplace_back("aiv", std::uint64_t{h.aiv});
    tr.complete(svc_.rank, fix,
                fmt::format("{} t{}: {}, CrossCoreSetFlag", name, h.tile, r.readback ? "store" : "workspace"), "xcore",
                h.fix_start_ps, h.set_ps - h.fix_start_ps, a);
    const std::string aiv = TaskContext::core_track(core, fmt::format("aiv{}.xcore", h.aiv).c_str());
    a.emplace_back("wait_cycles", svc_.clock.ps_to_cycles(h.load_start_ps - h.wait_start_ps));
    tr.complete(svc_.rank, aiv, fmt::format("{} t{}: CrossCoreWaitFlag, epilogue", name, h.tile), "xcore",
                h.wait_start_ps, h.vec_end_ps - h.wait_start_ps, std::move(a));
    tr.flow(key, svc_.rank, fix, h.set_ps);
    tr.flow(key, svc_.rank, aiv, h.load_start_ps);
  }
}

void AiCore::account_cores(const TaskContext& ctx, const PipelineResult& r) {
  const std::size_t per = std::max<std::size_t>(1, r.units / std::max<std::size_t>(ctx.cores.size(), 1));
  // A mixed kernel's epilogue ran on the unit's AIVs: count it with the unit.
  const std::size_t aiv_per = r.aivs.size() / std::max<std::size_t>(r.cores.size(), 1);
  auto aiv_busy = [&](std::size_t c) {
    std::uint64_t b = 0;
    for (std::size_t a = 0; a < aiv_per; ++a) b += r.aivs[c * aiv_per + a].vec_busy_ps;
    return b;
  };
  std::vector<double>& pace = pace_;  // busy ps per tile of each unit that ran tiles
  pace.clear();
  for (std::size_t c = 0; c < r.cores.size(); ++c) {
    const PipelineResult::CoreSpan& s = r.cores[c];
    if (s.tiles) pace.push_back(static_cast<double>(s.cube_busy_ps + s.vec_busy_ps + aiv_busy(c)) / static_cast<double>(s.tiles));
  }
  if (pace.empty()) return;
  std::sort(pace.begin(), pace.end());
  const double median = pace[pace.size() / 2];
  for (std::size_t c = 0; c < r.cores.size(); ++c) {
    const PipelineResult::CoreSpan& s = r.cores[c];
    if (!s.tiles) continue;
    CoreLoad& l = core_loads_[ctx.cores[std::min(c / per, ctx.cores.size() - 1)]];
    l.busy_ps += s.cube_busy_ps + s.vec_busy_ps + aiv_busy(c);
    l.tiles += s.tiles;
    l.expected_ps += median * static_cast<double>(s.tiles);
  }
}

CoreFactory AiCore::factory(AiCoreOptions opts, AiCore** out) {
  return [opts, out](const char* name, const ChipServices& services) -> std::unique_ptr<CoreExecutor> {
    auto core = std::make_unique<AiCore>(name, services, opts);
    if (out) *out = core.get();
    return core;
  };
}

}  // namespace probelab::chip
