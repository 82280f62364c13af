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
/// Tensor from a TensorProto; `where` names it in errors. Throws OnnxUnsupportedError for
/// unsupported element types, GraphError for external data or size mismatches.
Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& where);
/// Desc of a graph input/output value; symbolic dims are looked up in opts.dim_params.
TensorDesc value_desc(const onnx::ValueInfoProto& v, const OnnxImportOptions& opts, const std::string& where);
/// Attribute value (float, int, string and their lists); other attribute types are errors.
AttrValue attr_value(const onnx::AttributeProto& a, const std::string& where);
/// Value of a Constant node (value, value_float(s), value_int(s)).
Tensor constant_value(const onnx::NodeProto& n, const std::string& where);
/// Parses a whole file into a protobuf message; throws GraphError naming the file.
void parse_file(const std::string& path, google::protobuf::MessageLite& msg);

}  // namespace probelab::graph::onnx_detail
