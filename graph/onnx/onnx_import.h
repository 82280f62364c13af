// ONNX model import (ai.onnx domain, opsets 1 to kMaxOnnxOpset): graph, initializers (also in
// external data files next to the model), Constant nodes and attributes, mapped onto the op
// registry. Every op type is looked up in OpRegistry (canonical names are ONNX's, see
// graph/op_registry.h), so the set of importable ops is exactly the registry's. A model using any
// other op is rejected with one error listing every unsupported op type with its node count and
// node names.
//
// Folding at import. Inputs that determine output shapes or are scalar parameters (Reshape's
// shape, Slice's starts/ends/axes/steps, the axes of reductions, Unsqueeze and Squeeze, Split's
// split, Tile's repeats, Pad's pads and value, Resize's roi/scales/sizes, Expand's shape, Range's
// inputs, ConstantOfShape's shape, Trilu's k, ...; onnx_fold.cpp has the table) must be known at
// import and become attributes. A node is evaluated at import - and never becomes device work -
// when all its inputs are known: initializers that are not trainable weights (statistics and
// quantization scales and zero points never are), Constant nodes,
// bound inputs and results of folded nodes; shape-only ops (Shape, Size, EyeLike) need just the
// input shapes. So shape subgraphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) and constant
// masks fold away; Graph::import_folded() lists the folded nodes (the optimized snapshot shows
// them). An `If` whose condition is known is replaced by the branch it takes. A graph output that
// folds to a constant is produced by an Identity op reading it.
//
// Softmax/LogSoftmax below opset 13 (coerce-to-2-D semantics) are imported as Flatten -> Softmax
// -> Reshape when the axis is not the last one.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace probelab::graph {

/// The newest ai.onnx opset the importer implements; a newer model is rejected naming both.
inline constexpr std::int64_t kMaxOnnxOpset = 20;

struct OnnxImportOptions {
  /// Values of graph inputs known at import time; they become Constant initializers.
  std::map<std::string, Tensor> bind_inputs;
  /// Values of symbolic dimensions (dim_param) of graph inputs, e.g. {"batch", 4}, and of
  /// dimensions with neither a size nor a name, keyed "INPUT:AXIS" (e.g. {"x:0", 2}: axis 0 of
  /// graph input x; split at the last ':', so an input named "in:0" is bound as "in:0:0"). A key
  /// that is a symbolic dimension name of the model always means that dimension, so names holding
  /// ':' keep their meaning; a key that is also INPUT:AXIS of an unnamed axis is ambiguous and an
  /// error. Every key must be a symbolic dimension or an axis of a graph input that is unnamed (or
  /// has that fixed size); every unbound dimension is an error, and values must be >= 1
  /// (GraphError naming the dimension, input or axis otherwise).
  std::map<std::string, std::int64_t> dim_params;
  /// Float initializers become trainable Weight tensors (else Constant). BatchNormalization's
  /// running statistics, quantization parameters, rank-0 (scalar) initializers (the scalar
  /// constants exporters write) and integer initializers are always Constants.
  bool trainable_initializers = true;
  /// Rank-0 float initializers to train as weights all the same: a scalar parameter exported
  /// without constant folding (a temperature such as CLIP's logit_scale). Each must name a rank-0
  /// float initializer (GraphError naming it otherwise).
  std::set<std::string> trainable_scalars;
};

/// The model uses op types or element/value types the importer cannot map. The message lists all
/// of them; items() returns them sorted ("Where", "ai.onnx.ml:LabelEncoder", "uint8", ...).
class OnnxUnsupportedError : public GraphError {
 public:
  /// OpTypes: op types the registry lacks; ValueTypes: element or value types (uint8, sequence);
  /// Features: a supported op used in a way the replay does not model (Dropout in training mode).
  enum class Kind { OpTypes, ValueTypes, Features };
  OnnxUnsupportedError(Kind kind, std::vector<std::string> items, const std::string& message)
      : GraphError(message), kind_(kind), items_(std::move(items)) {}
  Kind kind() const { return kind_; }
  const std::vector<std::string>& items() const { return items_; }

 private:
  Kind kind_;
  std::vector<std::string> items_;
};

/// Reads and converts a model file. Throws GraphError naming the file (and node, tensor or
/// dimension) on a parse error, an opset newer than kMaxOnnxOpset, a shape input that is not
/// constant, unknown attributes, an initializer whose data or declared graph-input shape does not
/// match its dims, a missing or short external-data file, an unbound or unknown symbolic
/// dimension, or a shape mismatch with the model's declared output types; OnnxUnsupportedError as
/// described above.
Graph import_onnx(const std::string& path, const OnnxImportOptions& opts = {});

/// Node types the importer itself handles, with what it does with them (they are not registry
/// ops and never reach the device): Constant (an initializer) and If (its taken branch).
const std::vector<std::pair<std::string, std::string>>& onnx_importer_ops();

/// Op types of the model the registry does not know (sorted, unique; empty when all are known).
std::vector<std::string> onnx_unsupported_ops(const std::string& path);

/// Graph inputs (not initializers) and outputs of a model, in model order, the inputs that
/// import_onnx needs bound because they determine output shapes (or an If condition), the node op
/// types and the symbolic dimensions of the inputs (sorted).
struct OnnxModelIo {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::set<std::string> shape_inputs;
  std::set<std::string> op_types;
  std::set<std::string> dim_params;
};
OnnxModelIo onnx_model_io(const std::string& path);

/// Reads a serialized TensorProto (.pb), as used by the ONNX conformance test data.
Tensor read_onnx_tensor(const std::string& path);

}  // namespace probelab::graph
