// The AI cores of one chip: executes Kernel tasks (kernel id spec::kKernelOpArgs, args block
// spec::OpArgs) on the cores the scheduler granted.
//
// Per task:
//  1. the args block is read through the timed HBM model and decoded (bad block -> exception);
//  2. values: kernels::OpRunner loads the operands (FaultHooks::on_op_input at the task start),
//     computes the whole op functionally (one numerics GEMM per matrix product, graph reference
//     kernels on the Vector side; FaultHooks::on_gemm_accumulation for Cube ops), see
//     kernels/kernel.h and kernels/op_runner.h for the semantics and the detection rules;
//  3. time: the op's work is tiled (kernels/tiling.h) over the granted cores and timed by the
//     double-buffered tile pipeline with HBM contention (ai_core_pipeline.h) — time is charged
//     per tile, never per element;
//  4. the outputs are converted through the chip's Mode (kRegFpMode at dispatch),
//     FaultHooks::on_vector_lanes / on_op_output are called (site cycle = the op's last tile),
//     the detection circuit gets one report per anomalous tensor (NaN input: output_index = the
//     input's index and the element is in that input; outputs: the output's index and element),
//     each with the cycle at which the tile holding that element completed;
//  5. the results are written to HBM, the task completes at the pipeline's end time;
//  6. in-kernel statistics (TaskDescriptor stats_outputs / stats_inputs): each tile's share is
//     one extra Vector pass in its epilogue (OpWork::stats_bytes), then the lead core merges the
//     per-core partials (beside the last tile's store) and hands one Statistics record per
//     tensor to the capture unit (values:
//     spec::compute_stats over the whole tensor, as a Capture task computes them); the task
//     completes once the records are handed over (posted writes);
//  7. output dumps (TaskDescriptor dump_outputs): the kernel queues one full-tensor copy per
//     output on the stream's capture DMA engine (capture_dma.h) and completes.
// Moving the operand bytes (step 2 and 5) is functional and costs no time by itself: every
// byte is charged by the pipeline's per-tile HBM transfers instead.
//
// Trace (when enabled): per op and core one span on each busy pipe track "core<i>.mte",
// "core<i>.cube", "core<i>.vector" (args: op, task, busy cycles, tiles); a Vector op on a split
// chip (ChipConfig::vector_cores) runs on the AI cores' Vector cores instead, tracks
// "core<i>.aiv<j>.mte" and "core<i>.aiv<j>.vector"; a mixed Cube + Vector kernel on a split chip
// (a fused op with a vector epilogue, a Cube op with in-kernel statistics) runs its Cube part on
// the AIC and its epilogue on that AIC's AIVs (ai_core_pipeline.h), with per tile a slice on
// "core<i>.fixpipe" (workspace write, CrossCoreSetFlag), one on "core<i>.aiv<j>.xcore" (wait,
// load, epilogue) and a flow arrow between them; anomalies name the core kind and index
// (spec::core_id: the AIV of an element's epilogue, the AIC of a Cube accumulation); with
// AiCoreOptions::verbose_trace one span per tile step instead. PMU counter tracks per chip:
// "pmu.cube_busy", "pmu.vector_busy", "pmu.mte_busy" (busy cores, averaged per rate bin) and
// "pmu.core_hbm" (the cores' HBM bytes per ns = GB/s), each op's amount spread over its span.
// Every op gets an OpRecord with its simulated cycles, handed to the record sink (when set) and
// kept in records() (unless AiCoreOptions::keep_records is off: a long run's consumer folds them
// as they come), and its counters go to the chip's PMU (perf_monitor.h) at the op's end time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <systemc>

#include "chip_model/ai_core_pipeline.h"
#include "chip_model/core_interface.h"
#include "chip_model/kernels/kernel.h"
#include "chip_model/kernels/prepared_op_pool.h"
#include "chip_model/kernels/tiling.h"

namespace probelab::chip::kernels {
class OpRunner;
struct PreparedOp;
}

namespace probelab::chip {

struct AiCoreOptions {
  bool verbose_trace = false;  // one trace span per tile step (large traces)
  bool keep_records = true;    // records() holds every op's record (else only the sink sees them)
};

/// What one executed compute op cost.
struct OpRecord {
  std::uint32_t op_id = 0, task_id = 0, step = 0, stream = 0;
  std::string op_type, op_name;
  std::uint64_t start_cycle = 0, end_cycle = 0, cycles = 0;
  std::uint64_t flops = 0;                 // Cube FLOPs (2 per MAC)
  std::uint64_t hbm_read_bytes = 0, hbm_write_bytes = 0, l2_read_bytes = 0;
  std::uint64_t l2_write_bytes = 0, l2_miss_bytes = 0, l2_writeback_bytes = 0;  // shared L2 (l2_model)
  std::uint64_t cube_cycles = 0, vector_cycles = 0;  // busy cycles summed over cores
  std::uint64_t mte_cycles = 0;       // MTE busy cycles (loads and stores) summed over cores
  std::uint64_t hbm_stall_cycles = 0; // MTE cycles beyond the port rate (HBM bandwidth, contention, latency)
  std::uint32_t cores = 0;                 // AI cores granted
  std::uint32_t units = 0;                 // pipelines timed: cores, or their Vector cores (split chip, Vector op)
  std::uint64_t tiles = 0;
  std::vector<kernels::QuantOpRecord> quant;  // quantized Cube ops: what quantization did
};

class AiCore : public sc_core::sc_module, public CoreExecutor {
 public:
  AiCore(sc_core::sc_module_name name, const ChipServices& services, AiCoreOptions opts = {});

  void execute(TaskContext& ctx) override;

  /// One record per executed Kernel task, in completion order (empty unless keep_records).
  const std::vector<OpRecord>& records() const { return records_; }
  /// Called with each op's record as the op completes (in completion order).
  void set_record_sink(std::function<void(const OpRecord&)> sink) { sink_ = std::move(sink); }
  /// Per AI core over the run: its Cube + Vector busy time, its tiles, and the busy time it would
  /// have had at the pace of its op's median core (per op: median busy per tile x its tiles), so
  /// busy / expected ~ 1 for a healthy core and ~ f for one f times slower.
  struct CoreLoad {
    std::uint64_t busy_ps = 0, tiles = 0;
    double expected_ps = 0;
  };
  const std::map<std::uint32_t, CoreLoad>& core_loads() const { return core_loads_; }
  /// Vector cores per granted AI core: ChipConfig::vector_per_core().
  std::uint32_t aiv_per_core() const;
  /// Timing parameters for `cores` cores of this chip.
  kernels::CoreTimingParams timing_params(std::uint32_t cores) const;

  /// Factory for Chip::Options::make_cores; `out` (optional) receives the created AiCore.
  static CoreFactory factory(AiCoreOptions opts = {}, AiCore** out = nullptr);

 private:
  void trace_op(const TaskContext& ctx, const std::string& name, const PipelineResult& r) const;
  void trace_handoffs(const TaskContext& ctx, const std::string& name, const PipelineResult& r) const;
  void account_cores(const TaskContext& ctx, const PipelineResult& r);
  void emit_statistics(TaskContext& ctx, const kernels::OpRunner& run, std::uint64_t last_tile_ps);
  void queue_dumps(TaskContext& ctx, const kernels::OpRunner& run);
  /// The op of a task's args block (decoded and validated; throws naming the task on a bad block).
  std::shared_ptr<const kernels::PreparedOp> prepare(const spec::TaskDescriptor& task, std::span<const std::byte> block);

  const ChipServices& svc_;
  AiCoreOptions opts_;
  std::vector<OpRecord> records_;
  std::function<void(const OpRecord&)> sink_;
  std::map<std::uint32_t, CoreLoad> core_loads_;
  std::vector<double> pace_;  // account_cores' working storage, kept between ops
  /// The args blocks decoded so far, by HBM address, with what they prepare: a block read again
  /// with the same bytes (every step of a training or inference loop) is not decoded again
  /// (the entries come from the chips' shared pool when there is one: ChipServices::ops). By args
  /// address, ascending: a contiguous array, searched at every task by every chip.
  std::vector<std::pair<std::uint64_t, std::shared_ptr<const kernels::PreparedOpPool::Entry>>> prepared_;
};

}  // namespace probelab::chip
