// The scenario's `quantization:` section: which Cube ops quantize their operands on the chip and
// how (chip_model/kernels/quant_kernel.h documents the datapath).
//
//   quantization:
//     ops: ["conv*", "fc*"]        # globs over op names (fused ops' inner ops included); the
//                                  # MatMul, Gemm and Conv ops they match are quantized
//     keep: ["conv3"]              # optional: globs of ops kept in the compute dtype
//     weights: {format: int8, per_channel: true, symmetric: true}   # or a bare format: int8
//     activations: {format: int8, symmetric: false, scale: 0.05}    # scale: fixed, else amax
//     # delayed scaling (Transformer Engine's recipe, numerics/quant.h), per operand:
//     #   activations: {format: e4m3, scaling: delayed, amax_history: 16, algorithm: max, margin: 0}
//     # scaling: current (default: the tensor's own amax) | delayed (the amax of earlier steps);
//     # amax_history >= 1 (default 16), algorithm max | most_recent (default max), margin >= 0
//     # (default 0). Each quantized op's operand keeps its state in HBM, in a tensor
//     # "<op>/quant_state/<operand>" added to the graph (so checkpoints and replay carry it).
//     search:                      # optional, for `probelab quantize` (sim/run/quant_search.h)
//       target: "cosine>=0.999"    #   cosine>=X | sqnr>=X (dB) | max_rel<=X on the outputs
//       expect_keep: [conv3]       #   the kept set the search must end with (exit 1 otherwise)
// Formats: int8 | int4 | e4m3 | e5m2 (FP8 symmetric only). At least one of weights and
// activations is required; every `ops` glob must match a quantizable op and every `keep` glob an
// op `ops` selects (checked when the run is prepared, errors name the key).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "chip_model/spec/op_args.h"
#include "graph/graph.h"
#include "numerics/quant.h"
#include "sim/scenario/yaml_view.h"

namespace probelab::sim {

struct OperandQuantSpec {
  num::QuantFormat format = num::QuantFormat::Int8;
  bool per_channel = false;  // weights only
  bool symmetric = true;
  double scale = 0.0;        // activations only; 0: the tensor's current amax
  bool delayed = false;      // scaling: delayed
  std::int64_t history = 16;
  num::AmaxAlgorithm algorithm = num::AmaxAlgorithm::Max;
  std::int64_t margin = 0;
};

struct QuantizationSpec {
  std::vector<std::string> ops, keep;
  std::optional<OperandQuantSpec> weights, activations;
  std::string search_target;                       // "" when not given
  std::optional<std::vector<std::string>> expect_keep;
  std::optional<YamlView> source;
};

/// Parses the section; throws ScenarioError naming the key.
QuantizationSpec parse_quantization(const YamlView& v);

/// Quantization attributes per op name (spec/quant_args.h) for the executed graph `g`: every
/// MatMul / Gemm / Conv op, or such an op in a fused body, matching `ops` and no `keep` glob.
/// Throws ScenarioError (the section's position) when an `ops` glob matches no quantizable op or a
/// `keep` glob matches none of the selected ones.
std::map<std::string, spec::OpAttrs> quantization_attrs(const QuantizationSpec& q, const graph::Graph& g);

/// Adds the delayed-scaling state tensors of the ops in `attrs` to `g` (FP32 initializers
/// "<op>/quant_state/<operand>" holding [1, 0 x history]) and points the ops' `.meta` attributes
/// at them. Ops without delayed scaling are left alone.
void add_quant_state(graph::Graph& g, std::map<std::string, spec::OpAttrs>& attrs);

/// Names of the quantizable ops `q.ops` selects in `g` (before `keep`), in graph order.
std::vector<std::string> quantizable_ops(const QuantizationSpec& q, const graph::Graph& g);

}  // namespace probelab::sim
