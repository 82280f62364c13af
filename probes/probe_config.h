// The probe configuration (YAML or JSON; yaml-cpp reads both). Its own keys borrow msprobe's
// words where they mean the same (`task` for `mode`, `step`/`rank` lists with "a-b" ranges,
// `data_mode`); msprobe's config.json itself is also accepted and translated key by key
// (probes/msprobe_config.h: task, dump_path, level, scope, list, step, rank, data_mode,
// summary_mode, file_format, ...), with the mapping kept in the report. Every key is validated at
// load; unknown keys and bad values throw ConfigError naming file, line, key and reason.
//
//   probes:                         # the document root, or the `probes:` section of a scenario
//     enabled: true
//     seed: 7                       # sampling seed (default: the runtime's seed)
//     mode: statistics              # default capture mode: statistics | full | hash
//                                   #   aliases: stats, summary | tensor, full_tensor | md5, digest
//     sample_rate: 1.0              # default sampling probability in [0, 1]
//     direction: all                # forward | backward | optimizer | all
//     steps: [1, "4-6"]             # list of ints and "a-b" ranges; "all" or absent: every step
//     ranks: all
//     scope: "model/layer[4-6]/.*"  # ECMAScript regex, whole match on the op's scope path
//     data_mode: [output]           # input | output | all: which edges of a selected op
//     watch_points:                 # a glob string (inherits the defaults above) or a map:
//       - "conv*/gradient"
//       - name: attn                # id used in reports (default "wp<index>")
//         match: ["layer[4-6]/*"]   # globs over op names and tensor names
//         types: [Softmax]          # op types (case and '_' ignored: layer_norm = LayerNormalization)
//         range: [attn/qk, attn/softmax]   # only ops from the first to the second, in execution
//                                   #   order; an end may be {type: MatMul, index: 0, direction: forward}
//                                   #   or {match: [fc1, "fc1/*"], direction: forward} (the first /
//                                   #   last op matching any of the globs in that direction)
//         scope: ...; steps: ...; ranks: ...; direction: ...; mode: ...; sample_rate: ...
//         data_mode: [input, output]
//         halt_on_exception: false  # a break action also halts when the op latched an exception
//         conditions:               # a string (uses `actions`) or {when: EXPR, actions: [...]}
//           - "nan_count > 0"
//         actions: [break]          # full_dump | stats_dump | break | enable_verbose | stop | rewind
//                                   # rewind(ARGS): stop after this step, then re-execute from the
//                                   #   last checkpoint at or before it with more capture (the
//                                   #   runner does it: sim/run/rewind.h). ARGS, separated by commas
//                                   #   or spaces (quote the action in a YAML flow list when it has
//                                   #   commas): full_dump (default) | stats_dump, the capture of the
//                                   #   re-execution; implicated (default: the op the condition held
//                                   #   on, or that latched, and the ops writing its inputs) | all;
//                                   #   stop (default: the re-execution ends after the step) | continue
//     conditions: ["abs_mean < 1e-6"]   # defaults for string watch points
//     actions: [full_dump]
//     rules:                        # over counters; "EXPR -> action[, action]" or a map
//       - "overflow_count > 3 -> enable_verbose"     # rules allow enable_verbose, stop and rewind
//       - "invalid_count > 0 -> rewind(full_dump, continue)"
//       - {when: "nan_input_count > 0", actions: [stop], ops: ["*"]}
//     exceptions: {kinds: [overflow, invalid, nan_input, inf_input],   # default; add underflow, or all
//                  latch_limit: 16}      # latches per kind per step (0: unbounded)
//     capture: {buffer_bytes: 1048576, ping_pong: true, overrun: stall,  # stall | drop
//               in_kernel_statistics: true,  # statistics of kernel ops computed by the kernel
//               async_full: true,            # full tensors copied by the capture DMA engine
//               drain: auto}                 # step | buffer_full | auto (see CaptureUnitOptions)
//     output: {dir: dump, compression: zstd, zstd_level: 1, delta: false, level: all}
//             # dir: relative, inside the run's output directory (no '..', not absolute)
//             # compression: zstd | none (or true/false); level: all | triggered | none
//     consistency: {enabled: false, reference_rank: 0, sync_at_collectives: true, mode: hash,
//                   tolerance: 0.0, steps: all, compare_inputs: false}
//     compare: {enabled: false, ops: ["*"], decompose_fused: true, criteria: {...}}
//     integrity: {tensors: ["fc1/*"], steps: all}   # hash probes on both ends of these tensors' edges
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chip_model/spec/registers.h"

#include "graph/dtype.h"
#include "probes/expr.h"

namespace YAML {
class Node;
}

namespace probelab::probes {

/// Config error: "<file>:<line>: <key>: <reason>".
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, int line, std::string key, std::string reason);
  const std::string& file() const { return file_; }
  int line() const { return line_; }  // 1-based; 0 when unknown
  const std::string& key() const { return key_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string file_, key_, reason_;
  int line_;
};

enum class CaptureMode : std::uint8_t { Statistics, Full, Hash };
std::string_view capture_mode_name(CaptureMode m);
std::optional<CaptureMode> parse_capture_mode(std::string_view s);

enum class DirectionFilter : std::uint8_t { Forward, Backward, Optimizer, All };
std::string_view direction_filter_name(DirectionFilter d);

enum class Action : std::uint8_t { FullDump, StatsDump, Break, EnableVerbose, Stop, Rewind };
std::string_view action_name(Action a);
/// A plain action name ("rewind" included, with its default arguments).
std::optional<Action> parse_action(std::string_view s);

/// The arguments of a `rewind(...)` action.
struct RewindSpec {
  bool full = true;        // full_dump (full tensors) | stats_dump (statistics) in the re-execution
  bool all_ops = false;    // all | implicated
  bool then_continue = false;  // continue to the last step | stop after the anomaly's step
  std::string text() const;    // "rewind(full_dump, implicated, stop)"
};
/// Parses "rewind" or "rewind(ARGS)"; nullopt when `s` is not a rewind action; throws
/// std::invalid_argument naming a bad argument.
std::optional<RewindSpec> parse_rewind(std::string_view s);

/// A set of non-negative integers given as a list of values and inclusive ranges.
class IntSet {
 public:
  static IntSet all() { return IntSet(); }
  void add(std::int64_t lo, std::int64_t hi);  // inclusive
  bool contains(std::int64_t v) const;
  bool is_all() const { return all_; }
  const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges() const { return ranges_; }
  std::string str() const;  // "all" or "[1, 4-6]"

 private:
  bool all_ = true;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges_;
};

struct Condition {
  Expr expr;
  std::vector<Action> actions;
  RewindSpec rewind;  // the arguments when `actions` holds Rewind
};

/// One end of a watch point's `range`: the first (start) or last (end) op, in execution order,
/// whose name matches one of `globs`; or, with `type`, the `index`-th op (0-based, execution
/// order) of that type (matched as op_type_matches does); either of `direction` when given.
struct OpRef {
  std::string text;                  // as configured, for messages
  std::vector<std::string> globs;
  std::string type;
  std::int64_t index = 0;
  DirectionFilter direction = DirectionFilter::All;
};

/// Op type match for msprobe-style API names: case and '_' ignored ("layer_norm" =
/// "LayerNormalization" via the "...normalization" suffix), plus the PyTorch API aliases conv1d,
/// conv2d, conv3d -> Conv and linear, mm, bmm, addmm -> MatMul.
bool op_type_matches(std::string_view api, std::string_view op_type);

struct WatchPoint {
  std::string id;                      // "wp0", or the configured name
  std::vector<std::string> patterns;   // globs over op and tensor names
  std::vector<std::string> types;      // op types (op_type_matches), selected besides `patterns`
  std::optional<std::pair<OpRef, OpRef>> range;  // only ops from range.first to range.second
  std::optional<std::string> scope;    // regex over op scope paths (validated at load)
  IntSet steps, ranks;
  double sample_rate = 1.0;
  DirectionFilter direction = DirectionFilter::All;
  CaptureMode mode = CaptureMode::Statistics;
  bool capture_inputs = false;
  bool capture_outputs = true;
  bool halt_on_exception = false;
  std::vector<Condition> conditions;
  bool has_action(Action a) const;
};

struct Rule {
  Expr expr;
  std::vector<Action> actions;
  RewindSpec rewind;  // the arguments when `actions` holds Rewind
  std::vector<std::string> ops;  // globs of ops whose probes enable_verbose switches; empty: all
};

/// When the host collects capture records.
///  - Step: at every step end (flush + drain before the next step is submitted). Host conditions,
///    rules and their actions (full_dump of the step's tensors, enable_verbose from the next step,
///    stop) then act on the step just run.
///  - BufferFull: only when a buffer fills (kIrqCaptureFull, drained while the device runs on)
///    and at the end of the run. Nothing waits on the host between steps.
///  Either way the step's last task carries kTaskFlagStatusRecord, so each step's float status
///  arrives as a record with the step's others.
///  - Auto: Step when any watch point has conditions or any rule exists, else BufferFull.
enum class DrainPolicy : std::uint8_t { Auto, Step, BufferFull };

struct CaptureUnitOptions {
  std::uint32_t buffer_bytes = 1u << 20;
  bool ping_pong = true;
  bool drop_on_full = false;  // overrun policy: false = stall the producer, true = drop records
  /// Statistics probes on the edges of kernel ops are computed by the op's kernel (Kernel task
  /// stats_outputs/stats_inputs) instead of a separate Capture task.
  bool in_kernel_statistics = true;
  /// Full-tensor captures run on the capture DMA engine (kTaskFlagAsync) instead of holding the
  /// stream and a core while they copy.
  bool async_full = true;
  DrainPolicy drain = DrainPolicy::Auto;
};

enum class OutputLevel : std::uint8_t { None, Triggered, All };

struct OutputOptions {
  std::string dir = "dump";
  bool zstd = false;
  int zstd_level = 1;
  bool delta = false;  // XOR against the previous capture of the same tensor before compression
  OutputLevel level = OutputLevel::All;
};

struct ConsistencyOptions {
  bool enabled = false;
  std::uint32_t reference_rank = 0;
  bool sync_at_collectives = true;
  CaptureMode mode = CaptureMode::Hash;
  double tolerance = 0.0;  // divergence when the difference measure exceeds it
  IntSet steps;
  /// Also flag differences in collective *inputs*. Off by default: in data-parallel training each
  /// rank feeds its own gradients, so only outputs must agree; input samples are still reported.
  bool compare_inputs = false;
};

/// Pass/fail criteria of a reference comparison. Defaults mirror the "Accuracy Reached or Not"
/// rule of the Ascend PyTorch accuracy comparison (CANN 7.0 migration guide, used by msprobe's
/// compare): NOT reached when (cosine < 0.99 and max_abs_err > 0.001), or cosine < 0.9, or
/// max_abs_err > 1. Per-dtype relative-error bounds mirror the CANN single-benchmark operator
/// standard: mean relative error < 2^-10 (FP16), 2^-7 (BF16), 2^-13 (FP32); the max relative
/// error bound of that standard (10x the mean bound) is available but off by default because it
/// flags outputs near zero after cancellation in long reductions.
struct CompareCriteria {
  double cosine_min = 0.99;
  double max_abs_err = 0.001;       // with cosine_min: fail only when both are violated
  double cosine_hard_min = 0.9;
  double max_abs_err_hard = 1.0;
  std::map<graph::DType, double> mean_rel_err;  // per device dtype; missing dtype: no check
  std::map<graph::DType, double> max_rel_err;
  std::optional<std::uint64_t> max_ulp;  // optional bound on the ULP distance in the device dtype
  CompareCriteria();
};

struct CompareOptions {
  bool enabled = false;
  std::vector<std::string> ops{"*"};
  bool decompose_fused = true;
  CompareCriteria criteria;
  std::uint64_t max_store_bytes = 256ull << 20;  // captured tensors kept in memory for comparison
};

struct ExceptionOptions {
  /// 1 << spec::ExcKind for each kind the latches report. Default: overflow, invalid, NaN input
  /// and Inf input. Underflow is opt-in (`kinds: [..., underflow]` or `all`): gradual underflow is
  /// routine in FP16 gradients, so reporting it by default would make every clean training run an
  /// alarm; vanishing gradients are better caught by a condition such as `abs_mean < 1e-6`.
  std::uint32_t enable_mask = (1u << spec::kExcOverflow) | (1u << spec::kExcInvalid) | (1u << spec::kExcNanInput) |
                              (1u << spec::kExcInfInput);
  /// kRegExcLimit: latches per kind per step (0: unbounded). Reports beyond it are counted as
  /// suppressed; a step with suppressed reports of a kind has incomplete latch evidence.
  std::uint32_t latch_limit = spec::kExcLimitReset;
};

/// Edge integrity: for every tensor matching a glob, a hash probe on the producer's output (or the
/// host's initial value) and one on each consumer's input, every selected step; a consumer-side
/// hash that differs from the written one is corruption in memory between the two.
struct IntegrityOptions {
  std::vector<std::string> tensors;  // globs over tensor names; empty: off
  IntSet steps;
};

/// How one key of a foreign config (msprobe's config.json) was translated.
struct ConfigMapping {
  std::string from;  // "task: tensor"
  std::string to;    // "mode: full", or "" when the key has no equivalent
  std::string note;  // what it means here, or what to use instead
};

struct ProbeConfig {
  std::string source = "<config>";  // file name for messages
  std::string format = "probelab";  // "probelab" | "msprobe" (translated, see msprobe_config.h)
  std::vector<ConfigMapping> mapping;     // msprobe: every key and what it became
  std::string translated;                 // msprobe: the probelab config it became (YAML)
  std::vector<std::string> load_warnings; // keys with no equivalent, with what to use instead
  bool enabled = true;
  std::optional<std::uint64_t> seed;
  std::vector<WatchPoint> watch_points;
  std::vector<Rule> rules;
  ExceptionOptions exceptions;
  CaptureUnitOptions capture;
  OutputOptions output;
  ConsistencyOptions consistency;
  CompareOptions compare;
  IntegrityOptions integrity;

  /// Reads a YAML or JSON file (the document may be the config itself or hold it under `probes`).
  /// Either may be msprobe's config.json (recognised by its keys, see msprobe_config.h): it is
  /// translated, with `format`, `mapping` and `load_warnings` telling how.
  static ProbeConfig from_file(const std::filesystem::path& file);
  static ProbeConfig from_string(std::string_view text, const std::string& source = "<string>");
  /// From an already parsed node (e.g. the `probes` section of a scenario; marks give lines). A
  /// string node names a config file (YAML, JSON or msprobe's config.json), relative to the
  /// directory of `source` or else to the working directory.
  static ProbeConfig from_yaml(const YAML::Node& node, const std::string& source);
};

}  // namespace probelab::probes
