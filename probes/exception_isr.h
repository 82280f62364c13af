// Exception ISR: turns the per-kind exception latches (registers of spec/registers.h) into
// AnomalyRecords resolved against the executed graph. Their causal roles are decided later, over
// the whole run (provenance.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
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

  /// Services every latch that holds an event: acknowledges the interrupt line (kRegIrqAck) first,
  /// reads kRegExcPending, then per pending kind (ExcKindBit order) burst-reads its bank and
  /// acknowledges it (kRegExcAck bit), so that an event latched after the line was acknowledged
  /// raises it again. kRegFloatStatus is read once and left alone (an anomaly shows the bits raised
  /// since the status was last reset; clearing it would erase an overflow another client of the
  /// device-wide status has not read yet, see float_status.h). The cycle is read (Device::cycles) before anything
  /// else: latency = that - latched cycle. Empty for a spurious interrupt (nothing pending).
  std::vector<AnomalyRecord> handle();

  /// Per-kind device counters (kRegExcCountBase + 4*kind): "overflow_count", "underflow_count",
  /// "invalid_count", "nan_input_count", "inf_input_count".
  std::map<std::string, std::uint64_t> read_counters();
  /// Per-kind suppressed-report counters (kRegExcSuppressedBase), ExcKindBit order.
  std::vector<std::uint32_t> read_suppressed();

 private:
  AnomalyRecord decode(std::uint32_t kind, std::span<const std::uint32_t> bank, std::uint64_t now) const;
  Device& dev_;
  const graph::Graph& g_;
  const graph::Graph* original_;
};

}  // namespace probelab::probes
