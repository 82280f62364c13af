// Tensor storage and FP32/FP64 <-> storage-dtype conversions.
#include "graph/tensor.h"

#include <cstring>

#include <fmt/format.h>

#include "numerics/bf16.h"
#include "numerics/bulk.h"
#include "numerics/fp16.h"

#include "graph/format.h"
#include "graph/graph.h"

namespace probelab::graph {
namespace {

// FP16/BF16 elements are stored as the bit patterns of num::f16 / num::bf16 (same size and layout).
std::span<const num::f16> as_f16(std::span<const std::uint16_t> v) {
  return {reinterpret_cast<const num::f16*>(v.data()), v.size()};
}
std::span<num::f16> as_f16(std::span<std::uint16_t> v) { return {reinterpret_cast<num::f16*>(v.data()), v.size()}; }
std::span<const num::bf16> as_bf16(std::span<const std::uint16_t> v) {
  return {reinterpret_cast<const num::bf16*>(v.data()), v.size()};
}
std::span<num::bf16> as_bf16(std::span<std::uint16_t> v) {
  return {reinterpret_cast<num::bf16*>(v.data()), v.size()};
}

template <class To, class From>
std::vector<To> cast_all(std::span<const From> v) {
  std::vector<To> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<To>(v[i]);
  return out;
}

}  // namespace

Tensor::Tensor(TensorDesc desc) : desc_(std::move(desc)), bytes_(physical_nbytes(desc_), std::byte{0}) {}

Tensor::Tensor(TensorDesc desc, Uninitialised) : desc_(std::move(desc)), bytes_(physical_nbytes(desc_)) {}

Tensor Tensor::for_overwrite(TensorDesc desc) { return Tensor(std::move(desc), Uninitialised{}); }

Tensor::Tensor(TensorDesc desc, std::span<const std::byte> bytes) : desc_(std::move(desc)) {
  const std::size_t need = physical_nbytes(desc_);
  if (bytes.size() != need)
    throw GraphError(fmt::format("tensor {}: {} bytes given, {} expected", desc_str(desc_), bytes.size(), need));
  bytes_.assign(bytes.begin(), bytes.end());
}

Tensor Tensor::with_desc(TensorDesc desc) && {
  if (physical_nbytes(desc) != bytes_.size() || dtype_size(desc.dtype) != dtype_size(desc_.dtype))
    throw GraphError(fmt::format("tensor {} cannot be viewed as {}", desc_str(desc_), desc_str(desc)));
  Tensor t;
  t.desc_ = std::move(desc);
  t.bytes_ = std::move(bytes_);
  desc_ = {};
  return t;
}

std::int64_t Tensor::numel() const { return graph::numel(desc_.shape); }

void Tensor::check_type(std::size_t elem_size) const {
  if (elem_size != dtype_size(desc_.dtype))
    throw GraphError(fmt::format("tensor {}: typed access with a {}-byte element type, dtype has {} bytes",
                                 desc_str(desc_), elem_size, dtype_size(desc_.dtype)));
}

std::vector<float> Tensor::to_f32() const {
  if (desc_.format != Format::ND && desc_.format != Format::NCHW) return to_logical(*this).to_f32();
  switch (desc_.dtype) {
    case DType::F32: {
      auto d = data<float>();
      return {d.begin(), d.end()};
    }
    case DType::F16: {
      std::vector<float> out(bytes_.size() / 2);
      num::convert(as_f16(data<std::uint16_t>()), out);
      return out;
    }
    case DType::BF16: {
      std::vector<float> out(bytes_.size() / 2);
      num::convert(as_bf16(data<std::uint16_t>()), out);
      return out;
    }
    case DType::I32: return cast_all<float>(data<std::int32_t>());
    case DType::I64: return cast_all<float>(data<std::int64_t>());
    case DType::Bool: return cast_all<float>(data<std::uint8_t>());
    case DType::F64: return cast_all<float>(data<double>());
    case DType::I8: return cast_all<float>(data<std::int8_t>());
    case DType::U8: return cast_all<float>(data<std::uint8_t>());
  }
  throw GraphError("Tensor::to_f32: invalid dtype");
}

std::vector<double> Tensor::to_f64() const {
  if (desc_.format != Format::ND && desc_.format != Format::NCHW) return to_logical(*this).to_f64();
  switch (desc_.dtype) {
    case DType::F64: {
      auto d = data<double>();
      return {d.begin(), d.end()};
    }
    case DType::I32: return cast_all<double>(data<std::int32_t>());
    case DType::I64: return cast_all<double>(data<std::int64_t>());
    default: {
      const auto f = to_f32();  // FP32/FP16/BF16/Bool/int8/uint8 are exact in FP32
      return {f.begin(), f.end()};
    }
  }
}

namespace {

// Truncates toward zero through int64; an out-of-range value wraps modulo 2^8.
template <class V, class T> void narrow_into(std::span<const V> v, std::span<T> d) {
  for (std::size_t i = 0; i < v.size(); ++i) d[i] = static_cast<T>(static_cast<std::int64_t>(v[i]));
}

}  // namespace

Tensor Tensor::from_f32(const Shape& shape, std::span<const float> v, DType t) {
  Tensor out = for_overwrite(TensorDesc{t, shape, Format::ND});  // every element is set below
  if (static_cast<std::int64_t>(v.size()) != out.numel())
    throw GraphError(fmt::format("Tensor::from_f32: {} values for shape {}", v.size(), shape_str(shape)));
  switch (t) {
    case DType::F32:
      if (!v.empty()) std::memcpy(out.bytes_.data(), v.data(), v.size_bytes());
      break;
    case DType::F16: num::convert(v, as_f16(out.data<std::uint16_t>())); break;
    case DType::BF16: num::convert(v, as_bf16(out.data<std::uint16_t>())); break;
    case DType::I32: {
      auto d = out.data<std::int32_t>();
      for (std::size_t i = 0; i < v.size(); ++i) d[i] = static_cast<std::int32_t>(v[i]);
      break;
    }
    case DType::I64: {
      auto d = out.data<std::int64_t>();
      for (std::size_t i = 0; i < v.size(); ++i) d[i] = static_cast<std::int64_t>(v[i]);
      break;
    }
    case DType::Bool: {
      auto d = out.data<std::uint8_t>();
      for (std::size_t i = 0; i < v.size(); ++i) d[i] = v[i] != 0.0f ? 1 : 0;
      break;
    }
    case DType::I8: narrow_into(v, out.data<std::int8_t>()); break;
    case DType::U8: narrow_into(v, out.data<std::uint8_t>()); break;
    case DType::F64: {
      auto d = out.data<double>();
      for (std::size_t i = 0; i < v.size(); ++i) d[i] = v[i];
      break;
    }
  }
  return out;
}

Tensor Tensor::from_f64(const Shape& shape, std::span<const double> v, DType t) {
  Tensor out = for_overwrite(TensorDesc{t, shape, Format::ND});  // every element is set below
  if (static_cast<std::int64_t>(v.size()) != out.numel())
    throw GraphError(fmt::format("Tensor::from_f64: {} values for shape {}", v.size(), shape_str(shape)));
  switch (t) {
    case DType::F64:
      if (!v.empty()) std::memcpy(out.bytes_.data(), v.data(), v.size_bytes());
      break;
    case DType::F32: {
      auto d = out.data<float>();
      for (std::size_t i = 0; i < v.size(); ++i) d[i] = static_cast<float>(v[i]);
      break;
    }
    case DType::F16: {
      auto d = out.data<std::uint16_t>();
      num::to_f16_values(v, {reinterpret_cast<num::f16*>(d.data()), d.size()});
      break;
    }
    case DType::BF16: {
      auto d = out.data<std::uint16_t>();
      for (std::size_t i = 0; i < v.size(); ++i) d[i] = num::to_bf16(v[i]).value.bits;
      break;
    }
    case DType::I32: {
      auto d = out.data<std::int32_t>();
      for (std::size_t i = 0; i < v.size(); ++i) d[i] = static_cast<std::int32_t>(v[i]);
      break;
    }
    case DType::I64: {
      auto d = out.data<std::int64_t>();
      for (std::size_t i = 0; i < v.size(); ++i) d[i] = static_cast<std::int64_t>(v[i]);
      break;
    }
    case DType::Bool: {
      auto d = out.data<std::uint8_t>();
      for (std::size_t i = 0; i < v.size(); ++i) d[i] = v[i] != 0.0 ? 1 : 0;
      break;
    }
    case DType::I8: narrow_into(v, out.data<std::int8_t>()); break;
    case DType::U8: narrow_into(v, out.data<std::uint8_t>()); break;
  }
  return out;
}

}  // namespace probelab::graph
