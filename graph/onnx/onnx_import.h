// ONNX model import (ai.onnx domain): graph, initializers, Constant nodes and attributes, mapped
// onto the op registry. Every op type is looked up in OpRegistry (canonical names are ONNX's, see
// graph/op_registry.h), so the set of importable ops is exactly the registry's. A model using any
// other op is rejected with one error listing all of its unsupported op types.
//
// Inputs that determine output shapes (Reshape's shape, Slice's starts/ends/axes/steps,
// ReduceSum's axes (opset >= 13), ReduceMean's axes (opset >= 18), Expand's shape) must be
// constants — initializers, Constant nodes, or graph inputs bound with OnnxImportOptions — and are
// folded into the op's attributes. Softmax/LogSoftmax below opset 13 (coerce-to-2-D semantics) are
// imported as Flatten -> Softmax -> Reshape when the axis is not the last one.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace probelab::graph {

struct OnnxImportOptions {
  /// Values of graph inputs known at import time; they become Constant initializers.
  std::map<std::string, Tensor> bind_inputs;
  /// Values of symbolic dimensions (dim_param) of graph inputs, e.g. {"batch", 4}.
  std::map<std::string, std::int64_t> dim_params;
  /// Float initializers become trainable Weight tensors (else Constant). BatchNormalization's
  /// running statistics and integer initializers are always Constants.
  bool trainable_initializers = true;
};

/// The model uses op types or element/value types the importer cannot map. The message lists all
/// of them; items() returns them sorted ("Where", "ai.onnx.ml:LabelEncoder", "uint8", ...).
class OnnxUnsupportedError : public GraphError {
 public:
  enum class Kind { OpTypes, ValueTypes };
  OnnxUnsupportedError(Kind kind, std::vector<std::string> items, const std::string& message)
      : GraphError(message), kind_(kind), items_(std::move(items)) {}
  Kind kind() const { return kind_; }
  const std::vector<std::string>& items() const { return items_; }

 private:
  Kind kind_;
  std::vector<std::string> items_;
};

/// Reads and converts a model file. Throws GraphError naming the file (and node) on a parse error,
/// a non-constant shape input, unknown attributes or a shape mismatch with the model's declared
/// output types; OnnxUnsupportedError as described above.
Graph import_onnx(const std::string& path, const OnnxImportOptions& opts = {});

/// Op types of the model the registry does not know (sorted, unique; empty when all are known).
std::vector<std::string> onnx_unsupported_ops(const std::string& path);

/// Graph inputs (not initializers) and outputs of a model, in model order, the inputs that
/// import_onnx needs bound because they determine output shapes, and the node op types.
struct OnnxModelIo {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::set<std::string> shape_inputs;
  std::set<std::string> op_types;
};
OnnxModelIo onnx_model_io(const std::string& path);

/// Reads a serialized TensorProto (.pb), as used by the ONNX conformance test data.
Tensor read_onnx_tensor(const std::string& path);

}  // namespace probelab::graph
