// Private: conversions between ONNX protobuf messages and the graph IR.
#pragma once

#include <optional>
#include <string>

#include <onnx/onnx_pb.h>

#include "graph/graph.h"
#include "graph/onnx/onnx_import.h"

namespace probelab::graph::onnx_detail {

/// IR dtype of an ONNX TensorProto data type; nullopt when unsupported.
std::optional<DType> dtype_of(int onnx_type);
/// ONNX name of a data type for messages ("uint8", "string", ...).
std::string onnx_type_name(int onnx_type);
/// Tensor from a TensorProto; `where` names it in errors. Data stored externally is read from
/// the file its `location` names, relative to `base_dir` (the model's directory), at `offset` for
/// `length` bytes. Throws OnnxUnsupportedError for unsupported element types, GraphError for a
/// missing or short external file or a size mismatch.
Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& where, const std::string& base_dir = {});
/// Desc of a graph input/output value; symbolic dims are looked up in opts.dim_params by name, a
/// dimension with neither a size nor a name by "INPUT:AXIS" (see OnnxImportOptions::dim_params).
/// Throws GraphError naming the input and the dimension when a dimension has no value.
TensorDesc value_desc(const onnx::ValueInfoProto& v, const OnnxImportOptions& opts, const std::string& where);
/// Names of the symbolic dimensions of a value (empty when it has none).
std::vector<std::string> value_dim_params(const onnx::ValueInfoProto& v);
/// An "INPUT:AXIS" dimension key resolved against the graph inputs: the axis (maybe >= rank),
/// and that axis's fixed size (-1 when it has none) and symbolic name (empty when it has none).
struct InputAxis {
  std::string input;
  std::int64_t axis = 0, rank = 0, size = -1;
  std::string name;
  bool unnamed = false;  // axis < rank with neither a size nor a name
};
/// Splits `key` at its last ':' into a graph input (not an initializer) and a decimal axis;
/// nullopt when it has no such form or the input does not exist.
std::optional<InputAxis> input_axis_key(const onnx::GraphProto& g, const std::string& key);
/// Graph inputs that are not initializers, in model order.
std::vector<std::string> free_inputs(const onnx::GraphProto& g);
/// Attribute value (float, int, string and their lists); other attribute types are errors.
AttrValue attr_value(const onnx::AttributeProto& a, const std::string& where);
/// Value of a Constant node (value, value_float(s), value_int(s)).
Tensor constant_value(const onnx::NodeProto& n, const std::string& where);
/// Parses a whole file into a protobuf message; throws GraphError naming the file.
void parse_file(const std::string& path, google::protobuf::MessageLite& msg);

}  // namespace probelab::graph::onnx_detail
