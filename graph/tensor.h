// A dense tensor: a TensorDesc and the bytes it describes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "graph/dtype.h"

namespace probelab::graph {

/// std::allocator, except that a value-initialising construct (vector(n), resize(n)) leaves a
/// trivially constructible element default-initialised: no zero fill the writer overwrites anyway.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U> struct rebind { using other = DefaultInitAllocator<U>; };
  DefaultInitAllocator() = default;
  template <class U> DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U> void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <class U, class... A> void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};

/// Owns its bytes. Elements are stored in the layout named by desc.format (physical shape for
/// private formats, see graph/format.h). FP16/BF16 elements are stored as their 16-bit patterns.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(TensorDesc desc);  // zero-filled, physical_nbytes(desc) bytes (graph/format.h)
  /// Copies `bytes`; throws GraphError if their size is not physical_nbytes(desc).
  Tensor(TensorDesc desc, std::span<const std::byte> bytes);
  /// physical_nbytes(desc) bytes left uninitialised, for a writer that sets every one of them
  /// before the tensor is read (a device read, a whole conversion). Anything else is Tensor(desc).
  static Tensor for_overwrite(TensorDesc desc);
  /// These bytes (no copy) as a tensor of `desc`; throws GraphError if physical_nbytes(desc) is
  /// not nbytes() or the element size differs from this dtype's.
  Tensor with_desc(TensorDesc desc) &&;

  const TensorDesc& desc() const { return desc_; }
  DType dtype() const { return desc_.dtype; }
  const Shape& shape() const { return desc_.shape; }
  std::int64_t numel() const;  // logical element count
  std::size_t nbytes() const { return bytes_.size(); }

  std::span<std::byte> bytes() { return bytes_; }
  std::span<const std::byte> bytes() const { return bytes_; }

  /// Typed view of the storage; T must match the dtype's storage type
  /// (float, std::uint16_t for F16/BF16, std::int32_t, std::int64_t, std::uint8_t for Bool and U8,
  /// double, std::int8_t for I8).
  template <class T> std::span<T> data();
  template <class T> std::span<const T> data() const;

  /// Element values in logical row-major order (tensors in NHWC/private formats are read through
  /// their layout, padding skipped). FP16/BF16 widen exactly (via numerics); integers are
  /// cast; to_f32 of FP64 rounds to nearest even.
  std::vector<float> to_f32() const;
  std::vector<double> to_f64() const;
  /// Builds an ND tensor of dtype `t` from values in row-major order. Floats round once to nearest
  /// even (FP64 -> FP16/BF16 directly, no double rounding); integer dtypes truncate toward zero;
  /// Bool stores v != 0. Throws GraphError when the value count does not match the shape.
  static Tensor from_f32(const Shape& shape, std::span<const float> v, DType t = DType::F32);
  static Tensor from_f64(const Shape& shape, std::span<const double> v, DType t = DType::F64);

  bool operator==(const Tensor& o) const { return desc_ == o.desc_ && bytes_ == o.bytes_; }

 private:
  void check_type(std::size_t elem_size) const;
  struct Uninitialised {};
  Tensor(TensorDesc desc, Uninitialised);
  TensorDesc desc_;
  std::vector<std::byte, DefaultInitAllocator<std::byte>> bytes_;
};

template <class T> std::span<T> Tensor::data() {
  check_type(sizeof(T));
  return {reinterpret_cast<T*>(bytes_.data()), bytes_.size() / sizeof(T)};
}
template <class T> std::span<const T> Tensor::data() const {
  check_type(sizeof(T));
  return {reinterpret_cast<const T*>(bytes_.data()), bytes_.size() / sizeof(T)};
}

}  // namespace probelab::graph
