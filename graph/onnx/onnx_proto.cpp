// ONNX protobuf messages -> IR values: tensors, value types, attributes, Constant nodes; file parsing.
#include <cstring>
#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "graph/onnx/onnx_import.h"
#include "graph/onnx/onnx_proto.h"

namespace probelab::graph {
namespace onnx_detail {

std::optional<DType> dtype_of(int t) {
  switch (t) {
    case onnx::TensorProto_DataType_FLOAT: return DType::F32;
    case onnx::TensorProto_DataType_FLOAT16: return DType::F16;
    case onnx::TensorProto_DataType_BFLOAT16: return DType::BF16;
    case onnx::TensorProto_DataType_INT32: return DType::I32;
    case onnx::TensorProto_DataType_INT64: return DType::I64;
    case onnx::TensorProto_DataType_BOOL: return DType::Bool;
    case onnx::TensorProto_DataType_DOUBLE: return DType::F64;
    default: return std::nullopt;
  }
}

std::string onnx_type_name(int t) {
  if (onnx::TensorProto_DataType_IsValid(t)) {
    std::string s = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t));
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  return fmt::format("type {}", t);
}

namespace {

template <class Dst, class Field>
void copy_field(const Field& f, std::vector<std::byte>& out, std::size_t n, const std::string& where) {
  if (static_cast<std::size_t>(f.size()) != n)
    throw GraphError(fmt::format("{}: holds {} values, its dims need {}", where, f.size(), n));
  for (std::size_t i = 0; i < n; ++i) {
    const Dst v = static_cast<Dst>(f.Get(static_cast<int>(i)));
    std::memcpy(out.data() + i * sizeof(Dst), &v, sizeof(Dst));
  }
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& where) {
  const auto dt = dtype_of(t.data_type());
  if (!dt) {
    const std::string name = onnx_type_name(t.data_type());
    throw OnnxUnsupportedError(OnnxUnsupportedError::Kind::ValueTypes, {name},
                               fmt::format("{}: element type {} is not supported", where, name));
  }
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
    throw GraphError(fmt::format("{}: external tensor data is not supported", where));
  Shape shape(t.dims().begin(), t.dims().end());
  for (std::int64_t d : shape)
    if (d < 0) throw GraphError(fmt::format("{}: negative dimension in {}", where, shape_str(shape)));
  const auto n = static_cast<std::size_t>(numel(shape));
  const std::size_t es = dtype_size(*dt);
  std::vector<std::byte> bytes(n * es);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes.size())
      throw GraphError(fmt::format("{}: raw_data has {} bytes, {} {} needs {}", where, t.raw_data().size(),
                                   dtype_name(*dt), shape_str(shape), bytes.size()));
    std::memcpy(bytes.data(), t.raw_data().data(), bytes.size());
  } else {
    switch (*dt) {
      case DType::F32: copy_field<float>(t.float_data(), bytes, n, where); break;
      case DType::F64: copy_field<double>(t.double_data(), bytes, n, where); break;
      case DType::I64: copy_field<std::int64_t>(t.int64_data(), bytes, n, where); break;
      case DType::I32: copy_field<std::int32_t>(t.int32_data(), bytes, n, where); break;
      case DType::F16:
      case DType::BF16: copy_field<std::uint16_t>(t.int32_data(), bytes, n, where); break;
      case DType::Bool: copy_field<std::uint8_t>(t.int32_data(), bytes, n, where); break;
    }
  }
  return Tensor(TensorDesc{*dt, std::move(shape), Format::ND}, std::move(bytes));
}

namespace {

[[noreturn]] void unsupported_value_type(const std::string& what, const std::string& where) {
  throw OnnxUnsupportedError(OnnxUnsupportedError::Kind::ValueTypes, {what},
                             fmt::format("{}: value type {} is not supported", where, what));
}

}  // namespace

TensorDesc value_desc(const onnx::ValueInfoProto& v, const OnnxImportOptions& opts, const std::string& where) {
  const auto& type = v.type();
  if (!type.has_tensor_type()) {
    unsupported_value_type(type.has_sequence_type()   ? "sequence"
                           : type.has_optional_type() ? "optional"
                           : type.has_map_type()      ? "map"
                                                      : "non-tensor",
                           where);
  }
  const auto dt = onnx_detail::dtype_of(type.tensor_type().elem_type());
  if (!dt) unsupported_value_type(onnx_detail::onnx_type_name(type.tensor_type().elem_type()), where);
  if (!type.tensor_type().has_shape()) throw GraphError(fmt::format("{}: the model gives no shape", where));
  Shape s;
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        throw GraphError(fmt::format("{}: dimension {} is negative ({})", where, s.size(), d.dim_value()));
      s.push_back(d.dim_value());
    } else if (auto it = opts.dim_params.find(d.dim_param()); d.has_dim_param() && it != opts.dim_params.end()) {
      s.push_back(it->second);
    } else {
      throw GraphError(fmt::format("{}: dimension {} is symbolic ('{}'); give its value in dim_params", where, s.size(),
                                   d.dim_param()));
    }
  }
  return {*dt, s, Format::ND};
}

AttrValue attr_value(const onnx::AttributeProto& a, const std::string& where) {
  switch (a.type()) {
    case onnx::AttributeProto_AttributeType_FLOAT: return static_cast<double>(a.f());
    case onnx::AttributeProto_AttributeType_INT: return static_cast<std::int64_t>(a.i());
    case onnx::AttributeProto_AttributeType_STRING: return a.s();
    case onnx::AttributeProto_AttributeType_FLOATS: return std::vector<double>(a.floats().begin(), a.floats().end());
    case onnx::AttributeProto_AttributeType_INTS: return std::vector<std::int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto_AttributeType_STRINGS:
      return std::vector<std::string>(a.strings().begin(), a.strings().end());
    default:
      throw GraphError(fmt::format("{}: attribute '{}' has type {}, which is not supported", where, a.name(),
                                   onnx::AttributeProto_AttributeType_Name(a.type())));
  }
}

namespace {

Tensor int64_tensor(const Shape& s, const std::vector<std::int64_t>& v) {
  std::vector<std::byte> b(v.size() * sizeof(std::int64_t));
  std::memcpy(b.data(), v.data(), b.size());
  return Tensor(TensorDesc{DType::I64, s, Format::ND}, std::move(b));
}

}  // namespace

Tensor constant_value(const onnx::NodeProto& n, const std::string& where) {
  for (const auto& a : n.attribute()) {
    const std::string& k = a.name();
    if (k == "value") return tensor_from_proto(a.t(), where);
    if (k == "value_float") return Tensor::from_f32({}, std::vector<float>{a.f()});
    if (k == "value_floats") {
      const std::vector<float> v(a.floats().begin(), a.floats().end());
      return Tensor::from_f32({static_cast<std::int64_t>(v.size())}, v);
    }
    if (k == "value_int") return int64_tensor({}, {a.i()});
    if (k == "value_ints") {
      const std::vector<std::int64_t> v(a.ints().begin(), a.ints().end());
      return int64_tensor({static_cast<std::int64_t>(v.size())}, v);
    }
    throw GraphError(fmt::format("{}: Constant attribute '{}' is not supported", where, k));
  }
  throw GraphError(fmt::format("{}: Constant node without a value", where));
}

void parse_file(const std::string& path, google::protobuf::MessageLite& msg) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw GraphError(fmt::format("{}: cannot open file", path));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (!msg.ParseFromString(ss.str()))
    throw GraphError(fmt::format("{}: not a valid {} protobuf", path, msg.GetTypeName()));
}

}  // namespace onnx_detail

Tensor read_onnx_tensor(const std::string& path) {
  onnx::TensorProto t;
  onnx_detail::parse_file(path, t);
  return onnx_detail::tensor_from_proto(t, path);
}

}  // namespace probelab::graph
