// A scenario: one replayable experiment — a chip, a model, probes, injected faults and the
// expectations the run must meet. Loaded from YAML (format below), validated at load with
// ScenarioError naming file, line:column, key and what was expected; unknown keys are errors.
//
//   name: nan_in_softmax                # required, [A-Za-z0-9_.-]+, not starting with '.' (names the output directory)
//   description: ...                    # optional
//   chip:                               # optional; default preset, no overrides
//     preset: ascend910b                #   a chip preset (`probelab list chips`)
//     overrides: {num_cores: 4}         #   chip parameters (validated by the chip config)
//   ranks: 1                            # chips in the job (data parallel when > 1)
//   cluster:                            # optional: servers and switches (`probelab list chips`)
//     switch: fat_tree                  #   cluster parameters (chip_model/collective/cluster_config.h)
//     oversubscription: 2
//     partition: [0, 0, ..., 1, 1]      #   distributed runs: the process of each rank (default:
//                                       #   servers split evenly over the MPI processes)
//   parallel: {tensor: ["fc2/matmul"]}  # optional: tensor-parallel MatMul ops over every rank
//                                       #   (column-parallel, Megatron-style; data replicated)
//   model: transformer_block            # a bundled model (scenarios/models/<name>.yaml|.onnx),
//                                       # or a .yaml/.onnx path relative to this file,
//                                       # or {name: N} / {file: PATH} / {onnx: PATH}
//   mode: inference                     # inference | training
//   training:                           # optional in training (defaults below), rejected for inference
//     loss: auto                        #   auto (default: `model` when the model's first output is a
//                                       #   scalar, else cross_entropy) | cross_entropy | mse | model
//     optimizer: {type: sgd, lr: 0.01, momentum: 0.9}   # sgd | adam (lr, momentum, beta1, beta2, eps, weight_decay)
//     batch: 8                          #   must equal the leading dim of the model inputs
//     allreduce: {algorithm: ring, accumulation: fp32, order: arrival}  # ranks > 1; algorithm
//                                       #   ring | tree | direct | hierarchical (inter_algorithm:
//                                       #   ring | tree | direct for the inter-server stage)
//                                       #   bucket_mb: 25 packs the gradients into buckets of at
//                                       #   most 25 MiB, one AllReduce each (as DDP does; default 0:
//                                       #   one AllReduce per parameter)
//     sharding: none                    #   none | zero1 (gradients reduce-scattered, each rank
//                                       #   updates its shard of every parameter, all-gathered)
//     loss_scaling: {scale_op: mlp/scaled_loss, initial: 1024, backoff: 0.5, growth: 2,
//                    growth_interval: 2000, guard: false, all_reduce: false}
//                                       #   dynamic loss scaling on the float status read as CANN
//                                       #   does (skip the update on overflow; sgd only)
//   data: {generator: normal, seed: 7, mean: 0, std: 1}  # normal | uniform (low, high) | ones
//                                       # inputs: {ids: "randint(0, 30522)"}: per-input initialisers
//   steps: 3                            # training steps / inference iterations (>= 1)
//   seed: 42                            # master seed (run --seed N overrides it)
//   precision:                          # device dtype policy, see PrecisionPolicy
//   probes: {...}                       # the probe runtime's config, passed through unchanged;
//                                       # or a file: probes: config.json (msprobe's config.json too)
//   quantization: {ops: [...], ...}     # low-bit Cube ops, see sim/scenario/quantization.h
//   checkpoints: {every: 1}             # state checkpoints at step boundaries (every N steps, from
//                                       # step 0) under <out>/checkpoints/, for `probelab replay`
//   injections: [{kind: nan, ...}]      # fault descriptors, validated by the injector registry
//   variants: [{name: single, set: {probes.capture.buffering: single}}]  # extra runs, see Variant
//   expectations: [...]                 # see sim/scenario/expectation.h
//   campaign: {faults: [...]}           # fault model of `probelab campaign`, see sim/scenario/campaign_model.h
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "graph/dtype.h"
#include "sim/scenario/campaign_model.h"
#include "sim/scenario/expectation.h"
#include "sim/scenario/quantization.h"
#include "sim/scenario/yaml_view.h"

namespace probelab::sim {

enum class RunMode { Inference, Training };
std::string_view run_mode_name(RunMode m);

struct ChipSpec {
  std::string preset;                           // empty: the chip config's default preset
  std::map<std::string, std::string> overrides; // parameter -> value as written (scalar text)
  std::optional<YamlView> source;               // the `chip` node, for error positions
};

struct ModelSpec {
  enum class Source { Bundled, YamlFile, Onnx };
  Source source = Source::Bundled;
  std::string ref;                  // as written in the scenario
  std::filesystem::path path;       // the resolved model file
  /// ONNX models: values of the symbolic input dimensions, `model: {onnx: F, dims: {batch: 2}}`.
  /// Every name must be a symbolic dimension of the model and every symbolic dimension needs one.
  std::map<std::string, std::int64_t> dims;
  /// ONNX models: rank-0 float initializers to train as weights (`trainable: [logit_scale]`);
  /// the importer keeps other scalars constant.
  std::vector<std::string> trainable;
};

struct OptimizerSpec {
  std::string type = "sgd";  // sgd | adam
  double lr = 0.01;
  double momentum = 0.0;     // sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
  double weight_decay = 0.0;
};

/// The gradient all-reduce of a data-parallel job (ranks > 1): one AllReduce per parameter.
struct AllReduceSpec {
  std::string algorithm = "ring";      // ring | tree | direct | hierarchical
  std::string inter_algorithm = "ring";  // hierarchical: the inter-server stage
  std::string accumulation = "fp32";   // fp32 | fp16 (communication-buffer accumulator)
  std::string order = "arrival";       // direct only: arrival | group
  std::string reduction = "mean";      // mean | sum
  double bucket_mb = 0;                // > 0: gradients all-reduced in buckets of this many MiB
                                       // (sim/scenario/gradient_buckets.h); 0: one per parameter
};

/// `training.loss_scaling`: dynamic loss scaling on the device's float status, read as a CANN
/// integration reads it (sim/platform/executor.h ExecutorConfig::LossScaling). SGD only: the
/// unscale is folded into the learning rate.
struct LossScalingSpec {
  std::string scale_op;            // the Scale op that multiplies the loss (required)
  double initial = 65536.0, backoff = 0.5, growth = 2.0, min_scale = 1.0;
  std::uint32_t growth_interval = 2000;
  bool guard = false;              // detect resets by other clients (probes/float_status.h)
  bool all_reduce = false;         // all-reduce found_inf over the data-parallel ranks
  std::optional<YamlView> source;
};

struct TrainingSpec {
  std::string loss = "auto";           // auto | cross_entropy | mse | model
  OptimizerSpec optimizer;
  std::int64_t batch = 0;              // 0: the model's own leading input dimension
  AllReduceSpec allreduce;
  std::string sharding = "none";       // none | zero1
  std::optional<LossScalingSpec> loss_scaling;
};

/// The cluster section: cluster parameters as written (validated at load) and the partition map
/// of distributed runs (empty: servers split evenly over the processes).
struct ClusterSpec {
  std::map<std::string, std::string> params;
  std::vector<std::uint32_t> partition;
  std::optional<YamlView> source;
};

/// Input generator, seeded per (seed, step, rank, input name): every rank of a data-parallel job
/// gets its own shard; labels of a cross-entropy loss are uniform class indices.
struct DataSpec {
  std::string generator = "normal";  // normal | uniform | ones
  std::uint64_t seed = 0;            // 0: derived from the scenario seed
  double mean = 0.0, std = 1.0;      // normal
  double low = -1.0, high = 1.0;     // uniform
  std::uint32_t batches = 0;         // 0: a new batch every step; N: step s sees batch s mod N
  /// Per model input: an initialiser (graph/init.h: "randint(0, 30522)", "ones", "normal(0.5)")
  /// drawn from the input's own stream, instead of the generator (or the model file's `init`):
  /// integer inputs such as token ids, masks.
  std::map<std::string, std::string> inputs;
};

/// Device dtype policy of the host executor (kept deliberately small):
///  - `compute`: dtype of every floating-point activation, weight and gradient on the device
///    (fp16 by default, the Ascend mixed-precision default; fp32 and bf16 allowed);
///  - `master_weights`: `none` (default) updates the weights in the `compute` dtype directly (an
///    update below half an ulp of a weight rounds away); fp32 (training with a 16-bit `compute`
///    dtype) keeps an FP32 master copy of every weight, with FP32 optimizer state, that the
///    optimizer updates from the gradient cast to FP32 (and divided by the loss scale there),
///    cast back to the compute dtype every step (sim/scenario/workload.h, `master`); with compute
///    fp32 it changes nothing;
///  - `accumulation`: Cube (MatMul/Conv) accumulator: fp32 (hardware default), fp16 (correctly
///    rounded every step) or fp16_via_fp32 (FP32 add, then round: double rounding);
///  - `overflow_mode`: the chip's float mode, inf_nan (IEEE 754) or saturation; default: the
///    chip's `fp_mode` (its preset, or chip.overrides.fp_mode, which must then agree).
/// Integer tensors keep their dtype.
struct PrecisionPolicy {
  graph::DType compute = graph::DType::F16;
  bool master_fp32 = false;
  std::string accumulation = "fp32";   // fp32 | fp16 | fp16_via_fp32
  std::string overflow_mode = "inf_nan";  // inf_nan | saturation
  bool overflow_mode_given = false;       // false: the chip's fp_mode (preset or override) applies
};

/// One injected fault: its kind and the whole descriptor mapping (kind included), validated by
/// the injector registry when the scenario is resolved.
struct InjectionSpec {
  std::string kind;
  YAML::Node params;
  YamlView source;
};

/// An extra run of the same scenario with --set style overrides applied (e.g. single vs
/// ping-pong capture buffering); each variant gets its own cycles and capture statistics and
/// capture expectations may name one.
struct Variant {
  std::string name;
  std::vector<std::pair<std::string, std::string>> sets;  // dotted key -> YAML value text
  std::optional<YamlView> source;                          // its `set` mapping, for error positions
};

struct Scenario {
  std::filesystem::path file;  // absolute path of the scenario file
  std::string name;
  std::string description;
  ChipSpec chip;
  int ranks = 1;
  ClusterSpec cluster;
  /// `parallel.tensor`: globs of MatMul ops whose weight is split by columns over the ranks
  /// (sim/scenario/workload.h); empty: data parallel.
  std::vector<std::string> tensor_parallel;
  std::optional<YamlView> parallel_source;
  ModelSpec model;
  RunMode mode = RunMode::Inference;
  TrainingSpec training;
  DataSpec data;
  int steps = 1;
  std::uint64_t seed = 0;
  PrecisionPolicy precision;
  std::optional<QuantizationSpec> quantization;  // the `quantization:` section
  /// `profile: true`: a profiler (probes/perf_profiler.h) reads every rank's PMU through Device
  /// at each step's start and end (report.json perf.steps; the reads cost MMIO time).
  bool profile = false;
  int checkpoint_every = 0;    // `checkpoints.every`; 0: none
  /// Set by `probelab replay` (no YAML key): resume at `from_step` from the checkpoints of a run.
  struct Resume {
    std::uint32_t from_step = 0;
    std::filesystem::path checkpoints;  // <run>/checkpoints
  };
  std::optional<Resume> resume;
  /// Set by the runner for the re-execution a `rewind` action asks for (no YAML key): its rewind
  /// actions request nothing (sim/run/rewind.h).
  bool rewind_pass = false;
  YAML::Node probes;           // null: no probes
  std::optional<YamlView> probes_source;
  std::vector<InjectionSpec> injections;
  std::vector<Variant> variants;
  std::vector<Expectation> expectations;
  std::optional<FaultModel> campaign;  // the `campaign:` section (probelab campaign)
  YAML::Node resolved;         // the document after --set overrides (for `probelab show`)
  std::optional<YamlView> source;  // `resolved` knowing the --set paths (checks of the whole scenario)
  std::string source_text;     // the YAML text it was parsed from (variants re-parse it)

  bool has_probes() const { return probes.IsDefined() && !probes.IsNull(); }
  /// The resolved document for error messages: a value given with --set is named by its --set
  /// key, not by a position in the file.
  YamlView view() const { return source ? *source : YamlView(resolved, file.string(), ""); }
};

/// A `--set key=value` override: dotted key path (sequence elements by index, e.g.
/// `injections.0.step=3`), value parsed as YAML (`[1, 2]`, `{a: 1}`, `3`, `text`).
struct SetOverride {
  std::string key;
  std::string value;
};
/// Parses "key=value"; throws ScenarioError (file "--set") when malformed.
SetOverride parse_set(const std::string& text);
/// Parses "--dims name=value[,name=value...]" (symbolic ONNX dimensions, each >= 1 and named
/// once); throws ScenarioError (file "--dims") when malformed.
std::map<std::string, std::int64_t> parse_dims(const std::string& text);
/// How a scenario's short-form `model: REF` is read: "onnx" (an .onnx path), "file" (another
/// path) or "name" (a bundled model); the long form's key, `model: {<kind>: REF}`.
std::string model_ref_kind(const std::string& ref);
/// Applies overrides to a document in order (creates missing mapping keys; sequence indices must
/// exist). Throws ScenarioError naming the key on a bad path.
void apply_overrides(YAML::Node& root, const std::vector<SetOverride>& sets, const std::string& file);

struct LoadOptions {
  std::vector<SetOverride> sets;
  std::optional<std::uint64_t> seed;          // --seed
  std::filesystem::path source_root;          // repository root for bundled models; empty: find it
};

/// Shortens a scenario to steps 0..steps-1 (a re-execution that ends early: replay, rewind,
/// queries), dropping the injections that name a later `step` (they would never fire there).
void limit_steps(Scenario& s, int steps);

/// Loads and validates a scenario file. Throws ScenarioError on malformed YAML, unknown keys,
/// bad values, bad globs and missing model files. Checks that need the model graph, the chip
/// config, the probe config or the injector registry happen when the run is prepared (sim/scenario/prepared_run.h).
Scenario load_scenario(const std::filesystem::path& file, const LoadOptions& opts = {});
/// Same from text (`file` names it in errors and anchors relative model paths).
Scenario parse_scenario(const std::string& yaml_text, const std::filesystem::path& file,
                        const LoadOptions& opts = {});

/// Resolves a bundled model name to scenarios/models/<name>.yaml (or .onnx) under `root`.
/// Returns nullopt when neither exists.
std::optional<std::filesystem::path> find_bundled_model(const std::filesystem::path& root,
                                                        const std::string& name);
/// Names of the bundled models (sorted).
std::vector<std::string> bundled_models(const std::filesystem::path& root);

/// Top-level keys of a scenario file, in documentation order.
const std::vector<std::string>& scenario_keys();

}  // namespace probelab::sim
