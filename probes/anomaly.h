// Records the runtime produces while a run executes: anomalies from the exception latch,
// condition triggers, breakpoint hits. All carry op names of the executed snapshot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/spec/capture_record.h"
#include "chip_model/spec/registers.h"

namespace probelab::probes {

enum class AnomalyKind : std::uint8_t { Overflow, Underflow, Invalid, NanInput };
std::string_view anomaly_kind_name(AnomalyKind k);  // "overflow", "underflow", "invalid", "nan_input"

/// One latched exception, resolved against the graph.
struct AnomalyRecord {
  AnomalyKind kind = AnomalyKind::Invalid;
  std::uint32_t op_id = 0;
  std::string op;                        // op name ("<unknown op N>" if the id is out of range)
  std::string op_type;
  std::string scope;
  std::vector<std::string> fused_from;   // original ops of a fused op, in execution order
  std::uint32_t output_index = 0;
  std::string tensor;                    // the op output holding the element
  std::uint64_t element = 0;             // linear row-major index in the logical output
  std::vector<std::int64_t> coordinate;  // multi-dimensional index (empty if shape unknown)
  std::uint32_t step = 0, rank = 0;
  std::uint32_t task_id = 0, core = 0, stream = 0;
  std::uint64_t cycle = 0;               // latched cycle (offending tile completed)
  std::uint64_t isr_cycle = 0;           // device cycle read at ISR entry
  std::uint64_t latency_cycles = 0;      // isr_cycle - cycle
  bool more = false;                     // further anomalies happened while this one was latched
  std::uint32_t float_status = 0;        // kRegFloatStatus at ISR time (FloatStatusBits raised since
                                         // the previous anomaly's ISR, which cleared what it read)
  /// Call stack, outermost first: the scope path components, then the op, then (fused ops)
  /// "fused: a -> b -> c" with the original ops.
  std::vector<std::string> call_stack;
  /// Source vs propagation: an anomaly whose op read a NaN (NanInput) or whose producer was
  /// already flagged in this step is propagation; `source_op` then names the earliest flagged op
  /// upstream and `propagation_path` the flagged ops from that source to this op (topo order).
  bool is_source = true;
  std::string source_op;
  std::vector<std::string> propagation_path;
};

/// A watch-point condition held on a capture (host-evaluated) or a breakpoint halted (device).
struct TriggerEvent {
  std::string watch_point;
  std::string condition;
  std::vector<std::string> actions;
  std::string op;
  std::uint32_t op_id = 0;
  std::string tensor;
  bool is_input = false;
  std::uint16_t index = 0;
  std::uint32_t step = 0, rank = 0;
  std::optional<spec::CaptureStats> stats;
  std::string origin;  // "host" (after drain) | "breakpoint" (device halt) | "exception" (halt_on_exception)
  std::vector<std::string> dumped;  // files written by full_dump/break actions
};

/// A rule over counters that fired (edge-triggered: false -> true).
struct RuleEvent {
  std::string rule;
  std::vector<std::string> actions;
  std::uint32_t step = 0;
  std::vector<std::string> ops_switched;  // probes switched to full capture by enable_verbose
  nlohmann::json counters;
};

nlohmann::json to_json(const AnomalyRecord& a);
nlohmann::json to_json(const TriggerEvent& t);
nlohmann::json to_json(const RuleEvent& r);
nlohmann::json stats_json(const spec::CaptureStats& s);
/// A double as JSON: finite values as numbers, NaN as "nan", infinities as "inf"/"-inf" (JSON has
/// no non-finite numbers).
nlohmann::json json_number(double v);

}  // namespace probelab::probes
