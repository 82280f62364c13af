// Element types, shapes and formats: names, sizes, parsing.
#include "graph/dtype.h"

#include "graph/graph.h"

#include <fmt/format.h>

#include <array>
#include <stdexcept>
#include <utility>

namespace probelab::graph {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::Bool: return 1;
    case DType::F64: return 8;
    case DType::I8: return 1;
    case DType::U8: return 1;
  }
  throw std::invalid_argument("dtype_size: invalid DType value");
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::Bool: return "bool";
    case DType::F64: return "float64";
    case DType::I8: return "int8";
    case DType::U8: return "uint8";
  }
  return "invalid";
}

std::optional<DType> parse_dtype(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, DType>, 21> kNames{{
      {"float32", DType::F32}, {"fp32", DType::F32},   {"f32", DType::F32},
      {"float16", DType::F16}, {"fp16", DType::F16},   {"f16", DType::F16},
      {"bfloat16", DType::BF16}, {"bf16", DType::BF16},
      {"int32", DType::I32},   {"i32", DType::I32},
      {"int64", DType::I64},   {"i64", DType::I64},
      {"bool", DType::Bool},
      {"float64", DType::F64}, {"fp64", DType::F64},   {"f64", DType::F64},
      {"double", DType::F64},
      {"int8", DType::I8},     {"i8", DType::I8},
      {"uint8", DType::U8},    {"u8", DType::U8},
  }};
  for (const auto& [name, t] : kNames)
    if (name == s) return t;
  return std::nullopt;
}

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

bool is_integer(DType t) {
  return t == DType::I32 || t == DType::I64 || t == DType::I8 || t == DType::U8;
}

std::string_view format_name(Format f) {
  switch (f) {
    case Format::ND: return "ND";
    case Format::NCHW: return "NCHW";
    case Format::NHWC: return "NHWC";
    case Format::NC1HWC0: return "NC1HWC0";
    case Format::FRACTAL_NZ: return "FRACTAL_NZ";
  }
  return "invalid";
}

std::optional<Format> parse_format(std::string_view s) {
  for (Format f : {Format::ND, Format::NCHW, Format::NHWC, Format::NC1HWC0, Format::FRACTAL_NZ})
    if (format_name(f) == s) return f;
  return std::nullopt;
}

std::int64_t numel(const Shape& s) {
  bool zero = false;
  for (std::int64_t d : s) {
    if (d < 0) throw GraphError(fmt::format("shape {}: dimension {} is negative", shape_str(s), d));
    zero = zero || d == 0;
  }
  if (zero) return 0;
  // n * d > kMaxElements exactly when n > kMaxElements / d (positive integers), checked without a
  // division per dimension.
  std::int64_t n = 1;
  for (std::int64_t d : s) {
    std::int64_t p = 0;
    if (__builtin_mul_overflow(n, d, &p) || p > kMaxElements)
      throw GraphError(fmt::format("shape {}: more than 2^48 elements (the element count overflows)", shape_str(s)));
    n = p;
  }
  return n;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::string desc_str(const TensorDesc& d) {
  return fmt::format("{}{} {}", dtype_name(d.dtype), shape_str(d.shape), format_name(d.format));
}

std::optional<DType> dtype_from_onnx_code(std::int64_t code) {
  switch (code) {
    case 1: return DType::F32;
    case 10: return DType::F16;
    case 16: return DType::BF16;
    case 6: return DType::I32;
    case 7: return DType::I64;
    case 9: return DType::Bool;
    case 11: return DType::F64;
    case 3: return DType::I8;
    case 2: return DType::U8;
    default: return std::nullopt;
  }
}

std::int64_t onnx_code(DType t) {
  switch (t) {
    case DType::F32: return 1;
    case DType::F16: return 10;
    case DType::BF16: return 16;
    case DType::I32: return 6;
    case DType::I64: return 7;
    case DType::Bool: return 9;
    case DType::F64: return 11;
    case DType::I8: return 3;
    case DType::U8: return 2;
  }
  return 0;
}

}  // namespace probelab::graph
