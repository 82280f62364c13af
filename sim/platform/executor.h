// The host executor: stands in for the framework's graph engine. Given the executed graph
// snapshot (optionally instrumented by the probe runtime) it
//   - allocates HBM for every tensor (in-place optimizer updates: "<x>/updated" shares the buffer
//     of initializer <x> when their descs agree, so parameters and optimizer state are updated
//     on the device step after step),
//   - writes initializers by DMA (converted to each tensor's device format),
//   - compiles every op into a task: compute ops into Kernel tasks with an op-args block
//     (chip_model/spec/op_args.h), collective ops into Collective tasks
//     (chip_model/spec/collective_args.h), probe ops into the Capture/Breakpoint tasks the probe
//     runtime plans (probes::ProbeRuntime::plan_probe),
//   - runs the steps: step register, input DMA, submission in topological order (probes right
//     before/after their target op), stream synchronisation (breakpoint halts are handled by the
//     runtime's ISR; a stream nobody resumes is resumed after a bounded wait), end of step,
//     read-back of the fetched tensors.
// Everything goes through probes::Device, so the same executor runs on SimDevice and FakeDevice.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "chip_model/spec/kernel_args.h"
#include "chip_model/spec/op_args.h"
#include "graph/graph.h"
#include "probes/device.h"
#include "probes/float_status.h"
#include "probes/loss_scaler.h"
#include "probes/probe_runtime.h"
#include "probes/rank_vote.h"

namespace probelab::sim {

struct ExecutorConfig {
  std::uint32_t rank = 0;
  std::uint32_t world = 1;
  std::uint32_t steps = 1;
  std::uint32_t stream = 0;
  spec::AccumDType accum = spec::AccumDType::FP32;
  /// Extra attributes of an op's (or fused inner op's) args block by op name: quantization
  /// (spec/quant_args.h). A `<key>.meta` attribute holding a string names a tensor of the graph
  /// (a state buffer, e.g. delayed scaling's): the kernel gets its HBM address.
  std::map<std::string, spec::OpAttrs> op_attrs;
  std::uint32_t fp_mode = 0;  // kRegFpMode bits written before the first step
  /// Device tensors of the graph inputs for one step (every non-initializer input).
  std::function<std::map<std::string, graph::Tensor>(std::uint32_t step)> feeds;
  /// This rank's own values of some initializers (ZeRO shards), uploaded instead of the graph's.
  std::map<std::string, graph::Tensor> rank_initializers;
  std::vector<std::string> fetch_each_step;  // read back after every step (e.g. the loss)
  std::vector<std::string> fetch_at_end;     // read back after the last step (outputs, weights)
  /// Called in the host thread at the start and end of every step (tracing).
  std::function<void(std::uint32_t step, bool begin)> on_step;
  /// Time travel: the first step to run (a resumed run starts at a checkpoint's step; data feeds
  /// and per-step arguments follow the step index, so steps first_step.. repeat the original).
  std::uint32_t first_step = 0;
  /// Values uploaded instead of the graph's initializers (a checkpoint's weights and optimizer
  /// state); every name must be an initializer of the graph.
  std::map<std::string, graph::Tensor> initial_values;
  /// Checkpoints: at the start of every step s with s % checkpoint_every == 0 (and s > first_step
  /// or the run is not resumed), every initializer (weights, optimizer state, constants) is read
  /// back from HBM by DMA (simulated PCIe time, like a capture drain) and handed to on_checkpoint.
  /// 0: no checkpoints.
  std::uint32_t checkpoint_every = 0;
  std::function<void(std::uint32_t step, const std::map<std::string, graph::Tensor>&)> on_checkpoint;
  /// Polls of a halted stream before the executor resumes it itself.
  std::uint32_t max_halted_polls = 64;
  /// Dynamic loss scaling on the device's float status, as a mixed-precision framework does it
  /// on CANN. Each step: a float-status reset task before the first op; every op but the
  /// optimizer updates (SgdUpdate / AdamUpdate and whatever reads their results); then the status
  /// read (probes::FloatStatusClient: status task, synchronise, DMA of the 64-byte record, with
  /// the guard and the all-reduce of `status`); the scaler's decision; the updates only when no
  /// overflow was found. The Scale op `scale_op` multiplies the loss by the current scale and
  /// every SgdUpdate's learning rate is divided by it (the unscale folded into the update).
  struct LossScaling {
    bool enabled = false;
    probes::LossScalerConfig scaler;
    probes::FloatStatusOptions status;  // `stream` is set to ExecutorConfig::stream
    std::string scale_op;
  } loss_scaling;
};

struct ExecutorResult {
  std::vector<std::map<std::string, graph::Tensor>> fetched;  // per step run
  std::map<std::string, graph::Tensor> final_values;           // logical layout
  std::uint32_t steps_run = 0;
  bool stopped = false;  // the probe runtime asked to stop
  std::uint64_t kernel_tasks = 0, collective_tasks = 0, probe_tasks = 0, barrier_tasks = 0;
  std::uint64_t in_kernel_statistics = 0;  // statistics records requested from kernel tasks
  std::uint64_t in_kernel_dumps = 0;       // output dumps kernel tasks queued on the capture DMA
  std::uint64_t hbm_bytes = 0;  // bytes allocated for tensors and argument blocks
  std::uint64_t checkpoints = 0, checkpoint_bytes = 0;  // checkpoints taken, bytes read back for them
  std::vector<std::string> warnings;
  std::vector<probes::LossScaleStep> loss_scale;  // per step run, with loss scaling
  /// With loss scaling: FNV-1a 64 of every parameter the optimizer updates that every rank holds
  /// whole (read back after the last step, in name order; a ZeRO-1 shard counts as its gathered
  /// parameter, a tensor-parallel shard not at all), so ranks that took different skip decisions
  /// show it.
  std::uint64_t param_digest = 0;
};

class Executor {
 public:
  /// `g` is copied; `rt` may be null (no probes). When `rt` is set, `g` must be the graph
  /// rt->instrument() returned.
  Executor(const graph::Graph& g, probes::Device& dev, probes::ProbeRuntime* rt, ExecutorConfig cfg);

  /// Allocates HBM for every tensor (no data moves). May run before the simulation starts, so
  /// that fault injectors can resolve tensors to addresses; run() calls it when not done yet.
  void plan();

  /// Runs every step; call from the host thread of the device.
  ExecutorResult run();

  /// What run() has gathered so far: its result when it returned; the steps completed before
  /// a run that did not return (a job hang) stopped.
  const ExecutorResult& progress() const { return res_; }

  /// Where a tensor lives in HBM (valid after run() started); nullopt for unknown names.
  std::optional<spec::TensorRef> locate(const std::string& tensor) const;

 private:
  struct Compiled {
    std::uint32_t op_id = 0;
    spec::TaskKind kind = spec::TaskKind::Kernel;
    std::uint64_t args_addr = 0;
    std::uint32_t args_size = 0;
    bool per_step_args = false;  // args re-encoded every step (AdamUpdate's step)
    bool writes_in_place = false;  // an output aliases an input's memory: waits for async captures
    bool scaled = false;           // args follow the loss scale (the scale op, SgdUpdate)
  };
  void plan_memory();
  void plan_partial_dumps(const graph::Op& op);
  void read_partial_dumps(std::uint32_t step);
  void upload_initializers();
  void checkpoint(std::uint32_t step);
  void compile();
  std::vector<std::byte> kernel_args(const graph::Op& op, std::uint32_t step) const;
  spec::OpAttrs resolve_attrs(spec::OpAttrs attrs) const;
  void submit_op(std::uint32_t id, std::uint32_t step, bool last);
  void plan_loss_scaling();
  /// Status read and the scaler's decision at the end of phase 1; true: skip the updates.
  bool loss_scale_decision(std::uint32_t step);
  std::vector<std::byte> collective_args(const graph::Op& op) const;
  void submit_probe(std::uint32_t probe_op_id, std::uint32_t step);
  void submit_task(spec::TaskDescriptor t);
  void synchronize();
  void on_interrupt(std::uint32_t lines);
  graph::Tensor read_tensor(const std::string& name);
  void write_tensor(const std::string& name, const graph::Tensor& value);

  graph::Graph g_;
  probes::Device& dev_;
  probes::ProbeRuntime* rt_;
  ExecutorConfig cfg_;
  std::map<std::string, std::uint64_t> addr_;  // tensor -> HBM address
  std::set<std::string> in_place_;              // tensors sharing the memory of another (X/updated)
  std::vector<std::uint32_t> order_;           // non-probe op ids, topological
  std::map<std::uint32_t, Compiled> compiled_;
  struct ProbeArgsBlock {
    std::uint64_t addr = 0;
    std::uint32_t capacity = 0;
    std::vector<std::byte> written;  // what the block holds (rewritten only when it changes)
  };
  std::map<std::uint32_t, ProbeArgsBlock> probe_args_;  // probe op -> its argument block
  /// Fused op -> (inner tensor name, HBM buffer) per intermediate, in body order: the partial
  /// dumps the probe runtime's decomposition asked for (absent dtype: not dumped).
  std::map<std::uint32_t, std::vector<std::pair<std::string, spec::TensorRef>>> partials_;
  std::uint32_t next_task_id_ = 1;
  std::uint32_t step_ = 0;
  bool planned_ = false;
  ExecutorResult res_;
  // Loss scaling: ops submitted after the decision, the scaler, the status client, the scale
  // the ops' args blocks were last encoded with.
  std::set<std::uint32_t> update_ops_;
  std::unique_ptr<probes::LossScaler> scaler_;
  std::unique_ptr<probes::FloatStatusClient> status_;
  std::unique_ptr<probes::RankVote> stop_vote_;  // ranks > 1 whose probes may stop: the job stops together
  double encoded_scale_ = 0;
};

}  // namespace probelab::sim
