#include "chip_model/kernels/float_buffer.h"

#include <algorithm>
#include <utility>

#include "graph/format.h"

namespace probelab::chip::kernels {
namespace {

graph::TensorDesc row(std::size_t n) {
  return {graph::DType::F32, {static_cast<std::int64_t>(n)}, graph::Format::ND};
}

}  // namespace

FloatBuffer::FloatBuffer(graph::Tensor t) : t_(std::move(t)) {
  const auto v = t_.data<float>();
  data_ = v.data();
  size_ = v.size();
}

FloatBuffer::FloatBuffer(std::size_t n) : FloatBuffer(graph::Tensor::for_overwrite(row(n))) {}

FloatBuffer::FloatBuffer(std::size_t n, float fill) : FloatBuffer(graph::Tensor::for_overwrite(row(n))) {
  std::fill(begin(), end(), fill);
}

FloatBuffer FloatBuffer::adopt(graph::Tensor&& t) {
  if (t.dtype() == graph::DType::F32) return FloatBuffer(graph::to_logical(std::move(t)));
  return copy_of(t);
}

FloatBuffer FloatBuffer::copy_of(const graph::Tensor& t) {
  const std::vector<float> v = t.to_f32();
  return FloatBuffer(v.begin(), v.end());
}

graph::Tensor FloatBuffer::into_tensor(const graph::Shape& shape) && {
  graph::Tensor t = std::move(t_).with_desc({graph::DType::F32, shape, graph::Format::ND});
  data_ = nullptr;
  size_ = 0;
  return t;
}

FloatBuffer::FloatBuffer(FloatBuffer&& o) noexcept
    : t_(std::move(o.t_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

FloatBuffer& FloatBuffer::operator=(FloatBuffer&& o) noexcept {
  t_ = std::move(o.t_);
  data_ = std::exchange(o.data_, nullptr);
  size_ = std::exchange(o.size_, 0);
  return *this;
}

FloatBuffer::FloatBuffer(const FloatBuffer& o) : FloatBuffer(o.begin(), o.end()) {}

FloatBuffer& FloatBuffer::operator=(const FloatBuffer& o) {
  if (this != &o) *this = FloatBuffer(o);
  return *this;
}

}  // namespace probelab::chip::kernels
