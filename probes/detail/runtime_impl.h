// Internal state of ProbeRuntime, shared by the translation units that implement it
// (probe_runtime.cpp: facade, planning, steps; runtime_records.cpp: capture records, conditions,
// rules; runtime_breakpoint.cpp: breakpoint ISR, reference comparison). Not a public header.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "probes/capture_drain.h"
#include "probes/dump_writer.h"
#include "probes/exception_isr.h"
#include "probes/probe_runtime.h"

namespace probelab::probes::detail {

struct BreakCondition {
  Expr expr;                              // empty: exception-only breakpoint
  std::optional<DevicePredicate> device;  // nullopt: device halts always, host re-checks
  std::vector<Action> actions;
  std::string watch_point;
};

struct RuntimeState {
  RuntimeState(ProbeConfig c, const graph::Graph& g, Device& d, RuntimeOptions o, const graph::Graph* orig);

  ProbeConfig cfg;
  graph::Graph graph;                      // executed snapshot, instrumented by instrument()
  std::optional<graph::Graph> original;
  Device& dev;
  RuntimeOptions opts;
  std::uint64_t seed = 0;
  bool instrumented = false, configured = false;
  InsertionResult ins;
  std::vector<std::uint32_t> topo_pos;     // op id -> topological position
  std::map<std::uint32_t, BreakCondition> breaks;  // breakpoint probe op id -> condition
  std::map<std::tuple<std::uint32_t, bool, std::uint16_t, int>, std::uint32_t> edge_probe;  // (op,in,idx,kind)->probe
  TensorLocator locator;
  std::unique_ptr<CaptureDrain> drain;
  std::unique_ptr<ExceptionIsr> isr;
  std::unique_ptr<DumpWriter> dumps;

  std::uint32_t step = 0;
  std::optional<std::uint32_t> first_step;
  std::map<std::uint32_t, std::uint32_t> verbose_from;  // probe op id -> first step captured in full
  std::map<std::uint32_t, std::uint32_t> tasks;         // task id -> probe op id
  std::vector<bool> rule_state;
  bool stop = false;
  /// A rewind action fired at the current step: record the request (the first only) and stop
  /// after the step. `target`: the op it fired on (conditions), or nullopt (rules: the ops that
  /// latched this step are implicated).
  void request_rewind(const RewindSpec& spec, const std::string& by, const std::string& expression,
                      const std::string& watch_point, std::optional<std::uint32_t> target, const std::string& tensor,
                      std::uint32_t at_step);

  RuntimeReport rep;
  std::map<std::string, std::uint64_t> counters;
  std::map<std::uint32_t, StepSummary> summaries;  // by step; records and anomalies by their step
  DrainPolicy drain_policy = DrainPolicy::Step;   // capture.drain with Auto resolved
  StepSummary& summary(std::uint32_t at_step) {
    StepSummary& sm = summaries[at_step];
    sm.step = at_step;
    return sm;
  }
  std::map<EdgeKey, graph::Tensor> store;  // full tensors kept for the reference comparison
  std::uint64_t store_bytes = 0;
  std::map<std::uint32_t, std::map<std::string, graph::Tensor>> partials;  // step -> inner tensor -> value
  std::vector<SyncSample> sync;
  mutable std::optional<std::map<std::string, std::string>> carried;  // carried_tensors(graph), built on first use
  std::vector<std::uint32_t> suppressed_seen;  // kRegExcSuppressedBase at the previous step end
  /// Edge integrity: hash of each tensor value as written ((step, tensor as written) -> hash,
  /// record cycle, writer op) and each read as captured before its consumer.
  struct HashSeen {
    std::uint64_t hash = 0, cycle = 0;
    std::uint32_t op_id = 0;
  };
  std::map<std::pair<std::uint32_t, std::string>, HashSeen> written_hash;
  struct HashRead {
    std::uint32_t step = 0, op_id = 0;
    std::uint16_t slot = 0;
    HashSeen seen;
  };
  std::vector<HashRead> read_hash;

  // probe_runtime.cpp
  const graph::Op& op(std::uint32_t id) const { return graph.op(id); }
  std::uint32_t topo(std::uint32_t id) const { return id < topo_pos.size() ? topo_pos[id] : id; }
  EvalContext context(std::uint32_t at_step) const;
  void warn(std::string msg);
  /// Flushes and drains the capture unit until every produced record is accounted for; warns
  /// (naming `when`) about records neither drained nor reported dropped.
  void flush_capture(const std::string& when);
  /// Probe `site` captured by its target's kernel at `at_step`: statistics computed in the kernel,
  /// or a full output dump the kernel queues on the capture DMA engine.
  bool in_kernel(const ProbeSite& site, std::uint32_t at_step) const;
  /// The part of in_kernel() that does not depend on sampling.
  bool kernel_captures(const ProbeSite& site, std::uint32_t at_step) const;
  /// Capture mode of `site` at `at_step` (Full once enable_verbose switched it).
  CaptureMode mode_at(const ProbeSite& site, std::uint32_t at_step) const;
  /// End of run: warnings for capture records lost to a too small buffer or to corruption.
  void report_capture_losses();
  /// Whether watch point `wp` applies at `at_step` on this rank (its steps and ranks).
  bool wp_active(const WatchPoint& wp, std::uint32_t at_step) const;
  /// The most detailed mode among the site's watch points that apply at `at_step` and draw it
  /// by their sample rates; nullopt when none does.
  std::optional<CaptureMode> drawn_mode(const ProbeSite& site, std::uint32_t at_step) const;
  bool should_capture(const ProbeSite& site, std::uint32_t at_step) const;

  // runtime_records.cpp
  void on_record(CaptureRecord&& rec);
  void run_host_conditions(const ProbeSite& site, const CaptureRecord& rec, const spec::CaptureStats& stats,
                           const graph::Tensor* full);
  void apply_actions(const std::vector<Action>& actions, const ProbeSite& site, TriggerEvent& ev);
  void evaluate_rules();
  void refresh_counters();
  std::optional<graph::Tensor> fetch(const std::string& tensor);
  void keep(const EdgeKey& key, const graph::Tensor& t);
  /// Writes a dump file for edge (op_id, is_input, index) at `at_step`; returns the file name.
  std::string dump_tensor(std::uint32_t op_id, bool is_input, std::uint16_t index, std::uint32_t at_step,
                          const graph::Tensor& t, const std::string& trigger, const std::string& source_format);

  /// A capture showed tensor edge `key` (NaN/Inf counts from `stats` when given, `hash`).
  void observe(const EdgeKey& key, const spec::CaptureStats* stats, std::optional<std::uint64_t> hash,
               std::uint64_t cycle);
  /// Compares the integrity hashes read with those written (IntegrityViolation per mismatch).
  void check_integrity();

  // runtime_breakpoint.cpp
  void on_breakpoint();
  void handle_halt(std::uint32_t stream, std::uint32_t task_id);
  void run_comparisons();
  /// The kept tensors of op `op_id`'s inputs at `st` (nullptr for omitted optional inputs);
  /// `missing` lists the inputs that were not captured.
  std::vector<const graph::Tensor*> captured_inputs(std::uint32_t st, std::uint32_t op_id, std::string& missing) const;
  /// CPU replays of every op that latched invalid/overflow, on its captured inputs.
  void run_replays();
};

/// Causal provenance over the ranks' reports (their anomalies get roles and paths) and the
/// diagnosis of all their evidence.
std::vector<Candidate> diagnose_reports(const graph::Graph& g, std::span<RuntimeReport> reports,
                                        const ConsistencyResult* consistency);

}  // namespace probelab::probes::detail
