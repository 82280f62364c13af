// FP32 results of one kernel output, held in a graph::Tensor's storage so that a result computed
// as a tensor (the Vector path's FP32 reference kernels, a fused body's intermediates) becomes a
// FloatBuffer, and a FloatBuffer a tensor, without copying the values.
#pragma once

#include <cstddef>
#include <iterator>

#include "graph/tensor.h"

namespace probelab::chip::kernels {

/// A contiguous run of floats (size(), data(), operator[], begin/end, usable as a std::span).
class FloatBuffer {
 public:
  FloatBuffer() = default;
  /// n elements left indeterminate: the kernel writes every one of them.
  explicit FloatBuffer(std::size_t n);
  /// n elements equal to `fill` (a kernel that accumulates into the buffer).
  FloatBuffer(std::size_t n, float fill);
  template <std::forward_iterator It>
  FloatBuffer(It first, It last) : FloatBuffer(static_cast<std::size_t>(std::distance(first, last))) {
    std::copy(first, last, begin());
  }
  /// The values of `t` in logical row-major order: an FP32 tensor gives its storage (no copy,
  /// after graph::to_logical); any other tensor is converted (copy_of).
  static FloatBuffer adopt(graph::Tensor&& t);
  /// The values of `t` in logical row-major order, copied (graph::Tensor::to_f32).
  static FloatBuffer copy_of(const graph::Tensor& t);
  /// These values as an ND FP32 tensor of `shape` (no copy); throws graph::GraphError when the
  /// shape's element count is not size().
  graph::Tensor into_tensor(const graph::Shape& shape) &&;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  float* data() { return data_; }
  const float* data() const { return data_; }
  float& operator[](std::size_t i) { return data_[i]; }
  const float& operator[](std::size_t i) const { return data_[i]; }
  float* begin() { return data_; }
  float* end() { return data_ + size_; }
  const float* begin() const { return data_; }
  const float* end() const { return data_ + size_; }

  FloatBuffer(FloatBuffer&& o) noexcept;
  FloatBuffer& operator=(FloatBuffer&& o) noexcept;
  FloatBuffer(const FloatBuffer& o);
  FloatBuffer& operator=(const FloatBuffer& o);
  ~FloatBuffer() = default;

 private:
  explicit FloatBuffer(graph::Tensor t);
  graph::Tensor t_;         // F32 storage (its shape is not this buffer's concern)
  float* data_ = nullptr;   // t_'s floats
  std::size_t size_ = 0;
};

}  // namespace probelab::chip::kernels
