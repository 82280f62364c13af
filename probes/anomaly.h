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

enum class AnomalyKind : std::uint8_t { Overflow, Underflow, Invalid, NanInput, InfInput };
/// "overflow", "underflow", "invalid", "nan_input", "inf_input" (the latch kinds, ExcKindBit order)
std::string_view anomaly_kind_name(AnomalyKind k);
/// True for the kinds that name an op input (nan_input, inf_input).
bool reads_input(AnomalyKind k);
/// Names of the set spec::ExcDetailBits: accumulator, split_k_partial, output_conversion,
/// compute, fp16_accumulator, collective, quantize.
std::vector<std::string> detail_names(std::uint32_t detail);

/// The role of an anomaly in the causal history of the non-finite value it shows (provenance.h).
enum class AnomalyRole : std::uint8_t {
  Source,       // this op produced the first non-finite value of its history from finite inputs
  Propagation,  // the value came from an earlier op of this rank (this step or, through a
                // weight/optimizer state/carried tensor, an earlier step)
  Carrier,      // the value reached this rank through a collective from another rank (`source_rank`)
  Corruption,   // this op read a non-finite value that no op wrote (memory changed in between)
};
std::string_view anomaly_role_name(AnomalyRole r);  // "source", "propagation", "carrier", "corruption"
/// Kind of the core a latch names (spec::core_kind_of): "ai_core" (coupled), "aic", "aiv".
std::string_view core_kind_name(std::uint32_t core);

/// Where the causal history of an anomaly starts.
enum class OriginKind : std::uint8_t {
  Op,          // an op produced it (source_op at source_step on source_rank)
  Memory,      // a tensor in memory changed between its writer and its reader (corrupted_tensor)
  HostData,    // a tensor no op writes (fed input, initial value) held it when read
};
std::string_view origin_kind_name(OriginKind k);  // "op", "memory", "host_data"

/// One latched exception, resolved against the graph.
struct AnomalyRecord {
  AnomalyKind kind = AnomalyKind::Invalid;
  std::uint32_t op_id = 0;
  std::string op;                        // op name ("<unknown op N>" if the id is out of range)
  std::string op_type;
  std::string scope;
  std::vector<std::string> fused_from;   // original ops of a fused op, in execution order
  std::uint32_t output_index = 0;        // tensor slot: output index, or input index when on_input
  bool on_input = false;                 // the element is in an input (nan_input, inf_input)
  std::string tensor;                    // the tensor holding the element
  std::uint64_t element = 0;             // linear row-major index in that tensor
  std::vector<std::int64_t> coordinate;  // multi-dimensional index (empty if shape unknown)
  double value = 0;                      // the element's value (FP32 as latched, see kExcLatchValue)
  std::uint32_t detail = 0;              // spec::ExcDetailBits: what raised it
  std::uint32_t count = 0;               // offending elements of this kind in the op's tensor
  std::uint32_t suppressed = 0;          // reports of this kind suppressed while this one was latched
  std::uint32_t step = 0, rank = 0;
  std::uint32_t task_id = 0, stream = 0;
  std::uint32_t core = 0;  // kExcLatchCore: spec::core_id (kind and index; a coupled chip's plain index)
  std::uint64_t cycle = 0;               // latched cycle (offending tile completed)
  std::uint64_t isr_cycle = 0;           // device cycle read at ISR entry
  std::uint64_t latency_cycles = 0;      // isr_cycle - cycle
  bool more = false;                     // further reports of this kind arrived while it was latched
  std::uint32_t float_status = 0;        // kRegFloatStatus at ISR time (FloatStatusBits raised since
                                         // the status was last reset; the ISR does not clear it)
  /// Call stack, outermost first: the scope path components, then the op, then (fused ops)
  /// "fused: a -> b -> c" with the original ops.
  std::vector<std::string> call_stack;
  /// Causal provenance (filled at the end of the run, provenance.h): the role, where the history
  /// starts (op, step, rank; or the corrupted tensor and element), and the path from there to this
  /// anomaly, e.g. "fc2/gelu@1 -> fc2/weight/update@1 -> fc2/weight -> fc1/matmul@2".
  AnomalyRole role = AnomalyRole::Source;
  OriginKind origin = OriginKind::Op;
  std::string source_op;
  std::uint32_t source_step = 0, source_rank = 0;
  std::string corrupted_tensor;          // origin memory/host_data: the tensor and element
  std::optional<std::uint64_t> corrupted_element;
  std::vector<std::string> propagation_path;
  bool is_source() const { return role == AnomalyRole::Source; }
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
