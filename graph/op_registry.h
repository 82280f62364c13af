// Op definitions registered by name: attribute specs, shape inference, CPU reference kernels,
// gradient builders. One OpDef per op type; `probelab list` prints them.
//
// Naming. Where ONNX has the operator, its ONNX name is the canonical type and its semantics are
// ONNX's (opset 13+; Gelu as opset 20): MatMul, Gemm, Conv (1-3 spatial dims, NCHW for 2-D), Add,
// Sub, Mul, Div, Relu, Gelu, Sigmoid, Tanh, Softmax, LogSoftmax, LayerNormalization,
// BatchNormalization, MaxPool, AveragePool, GlobalAveragePool, Reshape, Flatten, Transpose, Concat,
// Slice, ReduceSum, ReduceMean, Expand, Gather, Identity, SoftmaxCrossEntropyLoss. Friendlier
// aliases resolve to the same definition:
//   Conv2d -> Conv, LayerNorm -> LayerNormalization, BatchNorm -> BatchNormalization,
//   AvgPool -> AveragePool, CrossEntropyLoss -> SoftmaxCrossEntropyLoss, Embedding -> Gather,
//   ReLU -> Relu, GELU -> Gelu.
// Ops ONNX lacks: MSELoss, Scale (y = alpha * x), SumToShape (sums a broadcast tensor back to a
// shape; used by gradients of broadcasting ops), SgdUpdate, AdamUpdate, and the backward ops
// (OpDef::backward == true): MatMulGradA, MatMulGradB, ConvGradInput, ConvGradWeight, ReluGrad,
// GeluGrad, SigmoidGrad, TanhGrad, SoftmaxGrad, LogSoftmaxGrad, LayerNormalizationGrad,
// BatchNormalizationGrad, MaxPoolGrad, AveragePoolGrad, SliceGrad, GatherGrad,
// SoftmaxCrossEntropyLossGrad, MSELossGrad. Backward ops take the forward shapes they need as
// attributes (input_shape, weight_shape, a_shape, data_shape, ...), not as tensor inputs.
// The definitions live in graph/ops/<family>.cpp (matmul, conv, elementwise, activation, softmax,
// layer_norm, batch_norm, pool, shape_ops, reduce, loss, gather, optimizer).
//
// Shape-determining inputs of ONNX ops (Reshape's shape, Slice's starts/ends/axes/steps, ReduceSum's
// axes, Expand's shape) are attributes here; the ONNX importer folds constant inputs into them.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace probelab::graph {

struct AttrSpec {
  std::string name;
  bool required = false;
  std::optional<AttrValue> default_value;  // also gives the expected value type
  std::string doc;
};

/// Precision of a CPU reference run. F32 kernels read/write F32 tensors, F64 kernels F64 tensors.
enum class RefPrecision { F32, F64 };

class GradBuilder;  // graph/autodiff.h

struct OpDef {
  std::string type;   // canonical name, e.g. "Conv"
  std::string doc;    // one line
  int min_inputs = 1;
  int max_inputs = 1;   // -1: variadic
  /// Exact number of outputs; -1 when the count varies, see min_outputs/max_outputs.
  int num_outputs = 1;
  int min_outputs = -1;  // used when num_outputs == -1 (trailing outputs are optional)
  int max_outputs = -1;  // used when num_outputs == -1; -1: unbounded
  std::vector<AttrSpec> attrs;
  /// Names of the inputs/outputs for documentation, "?" suffix marks an optional one ("B?").
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  /// Other names under which the registry finds this definition ("Conv2d" for "Conv").
  std::vector<std::string> aliases;
  /// True for ops that only appear in backward graphs (ReluGrad, ConvGradInput, ...).
  bool backward = false;
  /// True when the outputs depend only on the input descs, not on their values (Shape, Size,
  /// EyeLike): such ops are evaluated at import or by constant folding whatever their inputs.
  bool shape_only = false;
  /// True when every output element is an input element moved, copied or converted (Reshape,
  /// Transpose, Gather, Concat, Cast, Where, ...; constants fill the rest): a NaN keeps its sign and
  /// payload through such an op. Every other op computes its outputs, and a NaN it delivers is the
  /// default NaN (numerics/types.h), as the numerics library's arithmetic gives.
  bool moves_elements = false;
  /// True when the float outputs are piecewise constant in the inputs (Floor, Ceil, Round, Sign,
  /// Hardmax): the derivative is zero where it exists, so the op stops gradients. Any other op
  /// without `gradient` is inference only: a gradient that would flow through it is an error
  /// naming it (autodiff), not a silently untrained upstream.
  bool piecewise_constant = false;
  /// Output descs from input descs; throws GraphError naming the op on a mismatch. Omitted optional
  /// inputs (empty names in Op::inputs) get a default TensorDesc and must be recognised by name.
  /// Returns exactly op.outputs.size() descs.
  std::function<std::vector<TensorDesc>(const Op&, std::span<const TensorDesc>)> infer;
  /// Reference kernel: inputs are F32 (or F64) tensors in ND/NCHW layout; outputs are preallocated
  /// with the inferred shapes in the same precision. Integer inputs (indices) keep their dtype.
  /// Omitted optional inputs are nullptr.
  std::function<void(const Op&, std::span<const Tensor* const>, std::span<Tensor>, RefPrecision)> reference;
  /// True when `reference` writes every element of every output before reading any: the outputs
  /// are then allocated without a zero fill (Tensor::for_overwrite). False: zero-filled.
  bool reference_overwrites = false;
  /// Adds the backward ops of `op` to the builder; empty when the op is not differentiable.
  std::function<void(GradBuilder&, const Op&)> gradient;

  bool outputs_ok(int n) const {
    if (num_outputs >= 0) return n == num_outputs;
    return n >= std::max(min_outputs, 1) && (max_outputs < 0 || n <= max_outputs);
  }
  const AttrSpec* attr(const std::string& name) const;
};

/// Registry of op types, keyed by canonical type name, iterated in name order. The built-in ops
/// are registered when instance() is first called (no reliance on static initialisers in the
/// static library). Code outside the library may add types with OpRegistrar.
class OpRegistry {
 public:
  static OpRegistry& instance();
  void add(OpDef def);  // throws GraphError on a duplicate type or alias
  /// Finds a type by canonical name or alias; nullptr when unknown.
  const OpDef* find(const std::string& type) const;
  const OpDef& get(const std::string& type) const;  // throws GraphError listing known types
  /// Canonical type names, sorted.
  std::vector<std::string> types() const;
  /// Canonical names and aliases, sorted.
  std::vector<std::string> all_names() const;
  const std::map<std::string, OpDef>& all() const { return defs_; }
  const std::map<std::string, std::string>& aliases() const { return aliases_; }

 private:
  OpRegistry() = default;
  std::map<std::string, OpDef> defs_;
  std::map<std::string, std::string> aliases_;  // alias -> canonical
  /// Canonical names and aliases -> their definition (map nodes do not move): find() runs for
  /// every op a simulated step executes, several times. Only looked up, never iterated.
  std::unordered_map<std::string, const OpDef*> index_;
};

/// Registers every built-in op family (graph/ops/builtin.cpp); OpRegistry::instance() calls it
/// once on first use.
void register_builtin_ops(OpRegistry& r);

/// Registers an op type from a static object: `static OpRegistrar reg{OpDef{...}};`.
struct OpRegistrar {
  explicit OpRegistrar(OpDef def) { OpRegistry::instance().add(std::move(def)); }
};

/// Runs one op's reference kernel on concrete inputs (any float dtype is converted to the
/// reference precision first; private formats are converted to their logical layout). Omitted
/// optional inputs are nullptr. Returns the outputs in the reference precision.
std::vector<Tensor> run_reference(const Op& op, std::span<const Tensor* const> inputs, RefPrecision p);

/// Executes a whole graph on the CPU reference, in topological order. `feeds` gives inputs by
/// tensor name (initializers come from the graph; a feed overrides an initializer). Returns every
/// tensor's value by name, float tensors in the reference precision. A fused op whose type has no
/// reference kernel runs its fused_body. Throws GraphError naming a missing feed.
std::map<std::string, Tensor> run_graph_reference(const Graph& g, const std::map<std::string, Tensor>& feeds,
                                                  RefPrecision p);

}  // namespace probelab::graph
