// ProbeRuntime: the facade the host executor drives. One instance per chip (rank). It reaches the
// chip only through Device (MMIO, DMA, interrupts) and never through a simulator backdoor.
//
// Contract with the host executor (sim/ or a real graph engine), in call order:
//
//   ProbeRuntime rt(config, executed_snapshot, device, {.rank = r, .seed = s, .output_dir = d},
//                   &original_snapshot);
//   graph::Graph g = executed_snapshot;   // the graph the executor will compile
//   const InsertionResult& ins = rt.instrument(g);   // appends ProbeCapture/ProbeSync/ProbeBreakpoint
//                                                    // ops; ids of existing ops do not change
//   rt.configure_device();               // capture buffers, exception enables, IRQ mask, counters
//   rt.set_tensor_locator(fn);           // tensor name -> where it lives in HBM (see TensorLocator)
//   device.set_irq_handler([&](uint32_t l) { rt.on_interrupt(l); /* + the executor's own lines */ });
//                                        // or rt.install_irq_handler() when the runtime owns all lines
//   for each step s:
//     rt.begin_step(s);
//     for each op in the executor's order (graph::Graph::topo_order() of g, probe ops skipped):
//       for p in ins.before(op.id): submit_probe(p)
//       submit the op's kernel task (TaskDescriptor.op_id = op.id, .step = s), with
//         rt.plan_kernel(op, s, desc) applied (in-kernel statistics masks; the step's last
//         task also gets kTaskFlagStatusRecord when rt.step_status_records())
//       for p in ins.after(op.id):  submit_probe(p)
//     device.synchronize(stream);        // breakpoints are handled inside on_interrupt meanwhile
//     rt.end_step(s);                    // drain policy Step: flush + drain, rules, manifest
//     if (rt.stop_requested()) break;
//   rt.finish();                         // reference comparison, final manifest
//   RuntimeReport rep = rt.report();     // or rt.report_json()
//
//   submit_probe(p):                     // p is a ProbeSite of ins
//     TensorRef ref = <HBM location of p.tensor, with its physical format>;
//     if (auto t = rt.plan_probe(g.op(p.probe_op_id), s, ref, next_task_id)) {
//       write t->args_bytes() to HBM (args block), then submit
//       TaskDescriptor{.task_id = next_task_id, .op_id = t->target_op_id, .kind = t->kind,
//                      .flags = default | t->flags, .args_addr = ..., .args_size = ..., .step = s}
//       (a kernel task that overwrites a tensor in place must then carry kTaskFlagWaitCaptures)
//       (t->barrier_before: submit a Barrier task first, so that the capture sees every earlier
//        task of the stream complete: used by sync probes at collectives)
//     }
//
// Task ids must be unique per chip and run (the runtime maps kStreamHaltTask back to a probe).
// Capture and breakpoint tasks carry the *target* op's id (the op observed), so capture records,
// exception latches and breakpoint halts all name ops of the executed snapshot.
//
// Threading: the runtime is not thread-safe; on_interrupt may be entered while another runtime
// call is blocked inside a Device call (SimDevice delivers interrupts to a host ISR process). The
// drain is guarded against re-entry: an interrupt arriving during a drain is folded into it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/spec/kernel_args.h"
#include "chip_model/spec/task.h"
#include "graph/graph.h"
#include "probes/anomaly.h"
#include "probes/compare.h"
#include "probes/consistency.h"
#include "probes/device.h"
#include "probes/diagnosis.h"
#include "probes/insertion_pass.h"
#include "probes/probe_config.h"
#include "probes/report.h"

namespace probelab::probes {

struct RuntimeOptions {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  /// Replica group of this rank's sync samples of collective `op` (consistency.h: the ranks
  /// whose values must agree), or nullopt when they are not compared (e.g. a ReduceScatter's
  /// shards). Unset: every rank in group 0.
  std::function<std::optional<std::uint32_t>(const graph::Op& op)> consistency_group = {};
  /// The communicator this rank runs collective `op` in: the ranks with the same id take part in
  /// the same instance of it (the provenance follows a collective's values among those ranks
  /// only). Unset: every rank in one communicator.
  std::function<std::uint32_t(const graph::Op& op)> comm_group = {};
  /// Seed of the sampling decisions (ProbeConfig::seed overrides it when set).
  std::uint64_t seed = 0;
  /// Root of everything the runtime writes; dumps go to <output_dir>/<output.dir>/rank<r>/.
  std::filesystem::path output_dir = ".";
  /// Streams scanned for a halted breakpoint on kIrqBreakpoint.
  std::uint32_t num_streams = spec::kNumStreams;
  /// False in a re-execution started by a rewind: its rewind actions are recorded as triggers but
  /// request nothing (no second rewind, no stop).
  bool rewind_enabled = true;
};

/// Where a tensor lives in HBM while the current step runs (valid until end_step()). Returns
/// nullopt for a tensor the executor does not keep (breakpoint dumps then record it as missing).
using TensorLocator = std::function<std::optional<spec::TensorRef>(const std::string& tensor)>;

/// What the executor submits for one probe op in one step.
struct ProbeTask {
  spec::TaskKind kind = spec::TaskKind::Capture;  // Capture or Breakpoint
  std::uint32_t target_op_id = 0;                 // TaskDescriptor::op_id
  bool barrier_before = false;
  /// TaskDescriptor flags the task needs (kTaskFlagAsync: a full-tensor capture the capture DMA
  /// engine may run while the stream goes on).
  std::uint16_t flags = 0;
  std::variant<spec::CaptureArgs, spec::BreakpointArgs> args;
  /// The argument block exactly as the device reads it (little endian, fixed layout).
  std::vector<std::byte> args_bytes() const;
};

struct JobReport;

class ProbeRuntime {
 public:
  /// `executed` is the snapshot whose op ids the device reports (copied); `original` (optional,
  /// copied) is the pre-fusion snapshot used to resolve fused-op provenance to scopes.
  /// Throws ConfigError when the config does not fit the graph (e.g. a watch point glob that
  /// selects nothing is only a warning; a scope regex that fails to compile is an error).
  ProbeRuntime(ProbeConfig config, const graph::Graph& executed, Device& device, RuntimeOptions options,
               const graph::Graph* original = nullptr);
  ~ProbeRuntime();
  ProbeRuntime(const ProbeRuntime&) = delete;
  ProbeRuntime& operator=(const ProbeRuntime&) = delete;

  /// Runs the insertion pass on `g` (which must hold the executed snapshot's ops with the same
  /// ids) and keeps a copy of the instrumented graph. Call once.
  const InsertionResult& instrument(graph::Graph& g);
  const InsertionResult& insertion() const;

  /// Programs the chip: capture unit (buffers allocated with Device::alloc, ping-pong or single,
  /// overrun policy), exception enables, exception counters cleared, float status cleared, IRQ
  /// lines unmasked. Call once, after instrument().
  void configure_device();
  /// Convenience: Device::set_irq_handler forwarding every interrupt to on_interrupt().
  void install_irq_handler();
  void set_tensor_locator(TensorLocator locator);

  /// Host ISR entry. Handles kIrqException, kIrqCaptureFull and kIrqBreakpoint (each acknowledged
  /// in kRegIrqAck); other lines are left pending for their owner. Returns the lines handled.
  std::uint32_t on_interrupt(std::uint32_t lines);

  void begin_step(std::uint32_t step);
  /// After the step's tasks completed. Drain policy Step: flushes and drains the capture unit,
  /// checks accounting, reads the float status, evaluates conditions and rules, writes dump
  /// files and the manifest. Policy BufferFull: host bookkeeping only, no device access (records
  /// arrive with buffer-full interrupts and at finish()).
  void end_step(std::uint32_t step);
  /// End of run: drains what is left (policy BufferFull), reference comparisons of fully
  /// captured ops, final manifest.
  void finish();

  /// Whether probe op `probe_op` produces a task at `step` on this rank (step/rank filters,
  /// deterministic sampling, rules that changed the mode). Pure: same answer for the same inputs.
  bool should_capture(const graph::Op& probe_op, std::uint32_t step) const;
  /// The task to submit for probe op `probe_op` at `step` reading `tensor`, or nullopt when the
  /// probe is inactive this step. Records task_id so breakpoint halts map back to the probe.
  std::optional<ProbeTask> plan_probe(const graph::Op& probe_op, std::uint32_t step, const spec::TensorRef& tensor,
                                      std::uint32_t task_id);
  /// Whether probe op `probe_op` is captured at `step` by its target op's kernel: a statistics
  /// probe on a kernel op (capture.in_kernel_statistics), or a full capture of a kernel output
  /// (capture.async_full: the kernel queues the copy on the capture DMA engine). plan_probe()
  /// then returns nullopt and plan_kernel() sets the probe's bit in the kernel task. Pure.
  bool in_kernel(const graph::Op& probe_op, std::uint32_t step) const;
  /// Sets the in-kernel capture masks (stats_outputs / stats_inputs / dump_outputs) of `op`'s
  /// kernel task at `step` for every probe in_kernel() there; leaves other fields alone.
  void plan_kernel(const graph::Op& op, std::uint32_t step, spec::TaskDescriptor& task) const;
  /// Drain policy in effect (capture.drain with Auto resolved; valid after instrument()).
  DrainPolicy drain_policy() const;
  /// True when the executor must set kTaskFlagStatusRecord on each step's last task: whenever
  /// the capture unit is in use, per-step float status arrives as a record (drained with the
  /// step's records, or later under policy BufferFull) instead of a register read.
  bool step_status_records() const;

  /// A `stop` action fired: the executor should stop after the current step.
  bool stop_requested() const;
  /// Whether the configuration can ask for a stop (a `stop` action, or a `rewind` one when
  /// rewinds are enabled). The same on every rank: a job whose ranks may stop agrees on it.
  bool may_stop() const;

  /// Partial dumps of a fused op's inner tensors ("<fused>/<inner>:<i>" -> value) captured at
  /// `step`, used by the fused-op decomposition in finish().
  void add_partial_dump(std::uint32_t step, const std::string& tensor, graph::Tensor value);
  /// Whether the decomposition of fused op `op` wants partial dumps of its inner tensors (the
  /// reference comparison covers it and `compare.decompose_fused` is on): the graph engine then
  /// builds the kernel with partial outputs and hands them to add_partial_dump after each step.
  bool wants_partial_dumps(const graph::Op& op) const;

  /// The host uploaded these initial values in place of the graph's initializers (this rank's
  /// tensor-parallel or ZeRO-1 shards, a checkpoint's state when the run resumes): the
  /// provenance then bounds and checks those tensors' first-step reads by what was uploaded.
  void note_uploads(const std::map<std::string, graph::Tensor>& values);
  /// The host fed `value` into graph input `input` at `step`: the provenance bounds that step's
  /// reads of the input by its magnitudes (what a framework hook sees of the batch it feeds).
  void note_feed(std::uint32_t step, const std::string& input, const graph::Tensor& value);
  /// The host multiplies the optimizer updates' `lr` attribute by at most `factor` (1: runs them
  /// as written; a dynamic loss scaler divides lr by its scale): the provenance bounds what an
  /// update can write by it (0, the default: unknown, lr taken as at least 1).
  void note_lr_factor(double factor);

  /// Samples of sync probes (and captures of collective outputs) for the cross-rank check.
  std::vector<SyncSample> sync_samples() const;
  /// The same, moved out (a long run's samples are not copied): call once, at the end.
  std::vector<SyncSample> take_sync_samples();

  RuntimeReport report() const;
  /// The report, its per-step parts moved out instead of copied (a long run's edge observations
  /// and feed summaries grow with its steps): call once, at the end, instead of report().
  RuntimeReport take_report();
  nlohmann::json report_json() const;

 private:
  friend JobReport combine_ranks(std::span<const ProbeRuntime* const> ranks);
  RuntimeReport finish_report(RuntimeReport r) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Cross-rank view of a job: every rank's report, the consistency check over all ranks' sync
/// samples (against config.consistency.reference_rank) and a diagnosis over all evidence.
struct JobReport {
  std::vector<RuntimeReport> ranks;
  ConsistencyResult consistency;
  std::vector<Candidate> diagnosis;
  nlohmann::json to_json() const;
};
JobReport combine_ranks(std::span<const ProbeRuntime* const> ranks);
/// The same from the ranks' reports and sync samples (e.g. gathered from the processes of a
/// distributed run), with the runtime's consistency options and its executed snapshot.
JobReport combine_reports(std::vector<RuntimeReport> reports, std::span<const SyncSample> samples,
                          const ConsistencyOptions& consistency, const graph::Graph& executed);

}  // namespace probelab::probes
