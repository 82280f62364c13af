// Element types, shapes and memory formats of the workload IR.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace probelab::graph {

/// Element type of a tensor. F64 exists for CPU reference computations only.
enum class DType : std::uint8_t { F32, F16, BF16, I32, I64, Bool, F64, I8, U8 };
/// Number of DType enumerators: values 0 .. kNumDTypes - 1 (the last one is U8).
inline constexpr std::uint8_t kNumDTypes = static_cast<std::uint8_t>(DType::U8) + 1;

/// Size of one element in bytes.
std::size_t dtype_size(DType t);
/// Lower-case name as used in files: "float32", "float16", "bfloat16", "int32", "int64", "bool", "float64",
/// "int8", "uint8" (the quantized integers of ONNX's QuantizeLinear and its kin).
std::string_view dtype_name(DType t);
/// Parses the names above plus the short forms "fp32", "fp16", "bf16", "f32", "f16", "f64", "fp64",
/// "i32", "i64", "i8", "u8", "double".
std::optional<DType> parse_dtype(std::string_view s);
bool is_float(DType t);
/// int32, int64, int8 or uint8 (not bool).
bool is_integer(DType t);
/// The dtype of an ONNX TensorProto element type code (1 float, 10 float16, 16 bfloat16, 6 int32,
/// 7 int64, 9 bool, 11 double, 3 int8, 2 uint8); nullopt for the others. Attributes naming an element type (Cast's
/// `to`, ConstantOfShape's `dtype`) hold these codes.
std::optional<DType> dtype_from_onnx_code(std::int64_t code);
/// The ONNX element type code of a dtype.
std::int64_t onnx_code(DType t);

/// Memory layout. NC1HWC0 and FRACTAL_NZ are the Ascend private formats (C0 = 16 for FP16/BF16/FP32
/// as modelled here); conversions live in graph/format.h.
enum class Format : std::uint8_t { ND, NCHW, NHWC, NC1HWC0, FRACTAL_NZ };
std::string_view format_name(Format f);
std::optional<Format> parse_format(std::string_view s);

/// Logical shape (row-major, outermost first). A scalar has rank 0 and one element.
using Shape = std::vector<std::int64_t>;
/// Largest element count of a tensor (2^48): byte sizes of any dtype and layout stay far from
/// overflowing 64 bits.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 48;
/// Element count. Throws GraphError for a negative dimension or more than kMaxElements elements,
/// so a product never wraps (a shape with a 0 dimension has 0 elements whatever the others).
std::int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"

/// Logical description of a tensor. `shape` is always the logical (NCHW/ND) shape; `format` says how
/// the bytes are laid out in memory, see physical_shape() in graph/format.h.
struct TensorDesc {
  DType dtype = DType::F32;
  Shape shape;
  Format format = Format::ND;
  bool operator==(const TensorDesc&) const = default;
};
std::string desc_str(const TensorDesc& d);  // "float16[1, 3, 8, 8] NCHW"

}  // namespace probelab::graph
