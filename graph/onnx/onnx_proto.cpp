// ONNX protobuf messages -> IR values: tensors, value types, attributes, Constant nodes; file parsing.
#include <algorithm>
#include <cstring>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

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
    case onnx::TensorProto_DataType_INT8: return DType::I8;
    case onnx::TensorProto_DataType_UINT8: return DType::U8;
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

namespace {

// The file an external data `location` names: relative to the model's directory and inside it, as
// the ONNX checker requires (no absolute path, no `..`, no link leading out of it); a model must
// not make the importer read an arbitrary file of the machine into its weights.
std::filesystem::path inside_model_dir(const std::string& location, const std::string& base_dir, const std::string& where) {
  namespace fs = std::filesystem;
  const fs::path rel(location);
  auto refuse = [&](const char* why) {
    return GraphError(fmt::format("{}: external data location '{}' {}: it must be a relative path inside the model's "
                                  "directory ({})",
                                  where, location, why, base_dir.empty() ? std::string(".") : base_dir));
  };
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory()) throw refuse("is absolute");
  for (const fs::path& part : rel)
    if (part == "..") throw refuse("leaves the model's directory");
  const fs::path base = fs::path(base_dir.empty() ? "." : base_dir);
  std::error_code ec;
  const fs::path real_base = fs::weakly_canonical(base, ec), real = fs::weakly_canonical(base / rel, ec);
  if (!ec) {
    const auto [b, r] = std::mismatch(real_base.begin(), real_base.end(), real.begin(), real.end());
    if (b != real_base.end()) throw refuse("leads out of the model's directory through a link");
  }
  return base / rel;
}

// Bytes of externally stored tensor data (ONNX external data: location, offset, length).
std::vector<std::byte> external_bytes(const onnx::TensorProto& t, std::size_t want, const std::string& where,
                                      const std::string& base_dir) {
  std::string location;
  std::uint64_t offset = 0, length = want;
  for (const auto& e : t.external_data()) {
    try {
      if (e.key() == "location") location = e.value();
      else if (e.key() == "offset") offset = std::stoull(e.value());
      else if (e.key() == "length") length = std::stoull(e.value());
    } catch (const std::exception&) {
      throw GraphError(fmt::format("{}: external data entry '{}' = '{}' is not a number", where, e.key(), e.value()));
    }
  }
  if (location.empty()) throw GraphError(fmt::format("{}: external data without a 'location' entry", where));
  if (length != want)
    throw GraphError(fmt::format("{}: external data length {} does not match the {} bytes its dims need", where,
                                 length, want));
  const std::filesystem::path file = inside_model_dir(location, base_dir, where);
  std::ifstream f(file, std::ios::binary);
  if (!f)
    throw GraphError(fmt::format("{}: external data file '{}' is missing (looked for {})", where, location,
                                 file.string()));
  f.seekg(static_cast<std::streamoff>(offset));
  std::vector<std::byte> bytes(want);
  f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(want));
  if (!f || static_cast<std::size_t>(f.gcount()) != want)
    throw GraphError(fmt::format("{}: external data file '{}' is too short for {} bytes at offset {}", where,
                                 file.string(), want, offset));
  return bytes;
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& where, const std::string& base_dir) {
  const auto dt = dtype_of(t.data_type());
  if (!dt) {
    const std::string name = onnx_type_name(t.data_type());
    throw OnnxUnsupportedError(OnnxUnsupportedError::Kind::ValueTypes, {name},
                               fmt::format("{}: element type {} is not supported", where, name));
  }
  Shape shape(t.dims().begin(), t.dims().end());
  for (std::int64_t d : shape)
    if (d < 0) throw GraphError(fmt::format("{}: negative dimension in {}", where, shape_str(shape)));
  const auto n = static_cast<std::size_t>(numel(shape));
  const std::size_t es = dtype_size(*dt);
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
    return Tensor(TensorDesc{*dt, std::move(shape), Format::ND}, external_bytes(t, n * es, where, base_dir));
  std::vector<std::byte> bytes(n * es);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes.size())
      throw GraphError(fmt::format("{}: raw_data has {} bytes, {} {} needs {}", where, t.raw_data().size(),
                                   dtype_name(*dt), shape_str(shape), bytes.size()));
    if (!bytes.empty()) std::memcpy(bytes.data(), t.raw_data().data(), bytes.size());
  } else {
    switch (*dt) {
      case DType::F32: copy_field<float>(t.float_data(), bytes, n, where); break;
      case DType::F64: copy_field<double>(t.double_data(), bytes, n, where); break;
      case DType::I64: copy_field<std::int64_t>(t.int64_data(), bytes, n, where); break;
      case DType::I32: copy_field<std::int32_t>(t.int32_data(), bytes, n, where); break;
      case DType::F16:
      case DType::BF16: copy_field<std::uint16_t>(t.int32_data(), bytes, n, where); break;
      case DType::Bool:
      case DType::U8: copy_field<std::uint8_t>(t.int32_data(), bytes, n, where); break;
      case DType::I8: copy_field<std::int8_t>(t.int32_data(), bytes, n, where); break;
    }
  }
  return Tensor(TensorDesc{*dt, std::move(shape), Format::ND}, bytes);
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
    // A negative size (-1, as older paddle2onnx and tf2onnx write an unknown one) is a dimension
    // without a size: bound by name or as "INPUT:AXIS" like one that has neither.
    if (d.has_dim_value() && d.dim_value() >= 0) {
      s.push_back(d.dim_value());
    } else if (auto it = opts.dim_params.find(d.dim_param()); d.has_dim_param() && it != opts.dim_params.end()) {
      s.push_back(it->second);
    } else if (auto ax = opts.dim_params.find(fmt::format("{}:{}", v.name(), s.size()));
               !(d.has_dim_param() && !d.dim_param().empty()) && ax != opts.dim_params.end()) {
      s.push_back(ax->second);
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      throw GraphError(fmt::format("{}: dimension {} is symbolic ('{}') and no value is bound for it (a scenario binds it "
                                   "with model: {{..., dims: {{{}: N}}}}, probelab show with --dims {}=N)",
                                   where, s.size(), d.dim_param(), d.dim_param(), d.dim_param()));
    } else {
      throw GraphError(fmt::format("{}: dimension {} has neither a size{} nor a name; bind it as axis {} of input '{}' "
                                   "(a scenario with model: {{..., dims: {{\"{}:{}\": N}}}}, probelab show with --dims "
                                   "{}:{}=N)",
                                   where, s.size(), d.has_dim_value() ? fmt::format(" (it gives {})", d.dim_value()) : "",
                                   s.size(), v.name(), v.name(), s.size(), v.name(), s.size()));
    }
  }
  return {*dt, s, Format::ND};
}

std::vector<std::string> value_dim_params(const onnx::ValueInfoProto& v) {
  std::vector<std::string> out;
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return out;
  for (const auto& d : v.type().tensor_type().shape().dim())
    if (!d.has_dim_value() && d.has_dim_param() && !d.dim_param().empty()) out.push_back(d.dim_param());
  return out;
}

std::vector<std::string> free_inputs(const onnx::GraphProto& g) {
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  std::vector<std::string> out;
  for (const auto& v : g.input())
    if (!inits.count(v.name())) out.push_back(v.name());
  return out;
}

std::optional<InputAxis> input_axis_key(const onnx::GraphProto& g, const std::string& key) {
  const auto colon = key.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == key.size()) return std::nullopt;
  const std::string digits = key.substr(colon + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 9)
    return std::nullopt;
  InputAxis a;
  a.input = key.substr(0, colon);
  a.axis = std::stoll(digits);
  const auto inputs = free_inputs(g);
  if (std::find(inputs.begin(), inputs.end(), a.input) == inputs.end()) return std::nullopt;
  for (const auto& v : g.input()) {
    if (v.name() != a.input || !v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) continue;
    const auto& shape = v.type().tensor_type().shape();
    a.rank = shape.dim_size();
    if (a.axis >= a.rank) break;
    const auto& d = shape.dim(static_cast<int>(a.axis));
    if (d.has_dim_value()) a.size = d.dim_value();
    else if (d.has_dim_param()) a.name = d.dim_param();
    a.unnamed = a.size < 0 && a.name.empty();
    break;
  }
  return a;
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
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return Tensor(TensorDesc{DType::I64, s, Format::ND}, b);
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
