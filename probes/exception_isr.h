// Exception ISR: turns a latched exception (registers of spec/registers.h) into an AnomalyRecord
// resolved against the executed graph, and tracks NaN propagation within a step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "probes/anomaly.h"
#include "probes/device.h"

namespace probelab::probes {

/// Linear row-major index -> coordinate in `shape` (empty shape: {}; index out of range: {}).
std::vector<std::int64_t> unravel_index(std::uint64_t linear, const graph::Shape& shape);

/// Call stack of an op: scope components (outermost first, split on '/'), the op itself as
/// "<name> (<type>)", and for a fused op "fused: a -> b". `original` (pre-fusion snapshot) adds
/// the original ops' scopes when available.
std::vector<std::string> call_stack(const graph::Op& op, const graph::Graph* original);

class ExceptionIsr {
 public:
  ExceptionIsr(Device& dev, const graph::Graph& executed, const graph::Graph* original);

  /// Reads the latch (kRegExcStatus ... kRegExcOutput) and kRegFloatStatus (clearing the bits it
  /// read: an anomaly shows the bits raised since the previous one), then acknowledges:
  /// first the interrupt line (kRegIrqAck), then the latch (kRegExcAck), so an anomaly latched
  /// after the re-arm raises the line again. Returns nullopt for a spurious interrupt (latch not
  /// valid). The cycle is read (Device::cycles) before anything else: latency = that - latched.
  std::optional<AnomalyRecord> handle();

  /// Per-kind device counters (kRegExcCountBase + 4*kind).
  std::map<std::string, std::uint64_t> read_counters();

 private:
  Device& dev_;
  const graph::Graph& g_;
  const graph::Graph* original_;
};

/// Source vs propagation classification within a step (see AnomalyRecord). Evidence of NaN/Inf
/// at an op comes from anomalies (invalid, nan_input, overflow) and from captures whose
/// statistics show nan_count/inf_count > 0 (note_nonfinite_output).
class PropagationTracker {
 public:
  explicit PropagationTracker(const graph::Graph& executed);
  void begin_step(std::uint32_t step);
  /// An op's output (or an input edge) was seen holding NaN/Inf in this step.
  void note_nonfinite(std::uint32_t op_id, bool is_input);
  /// Classifies `a` (fills is_source/source_op/propagation_path) and records it as evidence.
  void classify(AnomalyRecord& a);
  /// Ops flagged in the current step, in topological order.
  std::vector<std::string> flagged_ops() const;
  /// The earliest flagged op upstream of `op_id` (itself if none upstream), considering only
  /// evidence of this step.
  std::uint32_t source_of(std::uint32_t op_id) const;

 private:
  bool upstream_flagged(std::uint32_t op_id) const;
  std::vector<std::uint32_t> path(std::uint32_t from, std::uint32_t to) const;
  const graph::Graph& g_;
  std::vector<std::uint32_t> topo_pos_;  // op id -> position in topo order
  std::uint32_t step_ = 0;
  std::set<std::uint32_t> flagged_;        // ops with evidence this step
  std::set<std::uint32_t> output_nonfinite_;  // ops whose outputs were seen non-finite
  std::set<std::uint32_t> read_nonfinite_;    // ops that read a NaN (nan_input or input capture)
};

}  // namespace probelab::probes
