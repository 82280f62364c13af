// Private helpers shared by the op definitions in graph/ops/: error messages, attribute readers
// with registry defaults, axis/broadcast arithmetic, typed kernel dispatch, registration entry points.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/tensor.h"

namespace probelab::graph::ops {

using Ins = std::span<const Tensor* const>;
using Outs = std::span<Tensor>;
using Descs = std::span<const TensorDesc>;

// --- attribute specs and readers -------------------------------------------------------------

AttrSpec attr_int(std::string name, std::int64_t def, std::string doc);
AttrSpec attr_float(std::string name, double def, std::string doc);
AttrSpec attr_str(std::string name, std::string def, std::string doc);
AttrSpec attr_ints(std::string name, std::vector<std::int64_t> def, std::string doc);
/// An attribute without default: required, or optional when `required` is false.
AttrSpec attr_nodefault(std::string name, bool required, std::string doc);
/// An op of one input "data" and one output "output" (the data-movement families).
OpDef data_op_def(std::string type, std::string doc, std::vector<AttrSpec> attrs);

/// Reads attributes, falling back to the defaults declared in the op type's AttrSpecs.
class AttrReader {
 public:
  explicit AttrReader(const Op& op);
  std::int64_t i(const std::string& key) const;
  double f(const std::string& key) const;
  std::string s(const std::string& key) const;
  std::vector<std::int64_t> ints(const std::string& key) const;
  bool has(const std::string& key) const { return op_.has_attr(key); }

 private:
  const AttrValue* fallback(const std::string& key) const;
  const Op& op_;
  const OpDef& def_;
};

// --- shapes ----------------------------------------------------------------------------------

/// Normalises a possibly negative axis into [0, rank); fails naming `what` when out of range.
std::int64_t norm_axis(const Op& op, std::int64_t axis, std::int64_t rank, const char* what = "axis");
/// Numpy broadcast of two shapes; fails naming the op.
Shape broadcast_shapes(const Op& op, const Shape& a, const Shape& b);
/// Whether `from` broadcasts (unidirectionally) to `to`.
bool broadcastable_to(const Shape& from, const Shape& to);
/// Row-major element strides.
std::vector<std::int64_t> strides_of(const Shape& s);
/// Strides of `s` as seen from a broadcast output of rank `rank` (0 where `s` is broadcast).
std::vector<std::int64_t> broadcast_strides(const Shape& s, std::size_t rank);
std::int64_t prod(const Shape& s, std::size_t begin, std::size_t end);

/// The op's `epsilon` attribute (normalisations) is finite and >= 0; fails naming the op.
void check_epsilon(const Op& op);
void expect_inputs(const Op& op, Descs in, int min, int max);
void expect_outputs(const Op& op, int min, int max);
void expect_float(const Op& op, const TensorDesc& d, const char* what);
void expect_rank(const Op& op, const TensorDesc& d, std::int64_t rank, const char* what);
void expect_int(const Op& op, const TensorDesc& d, const char* what);
void expect_same_dtype(const Op& op, const TensorDesc& a, const TensorDesc& b, const char* what);
/// A per-channel parameter of X = [N, C, ...]: X's dtype and shape [c].
void expect_channel_param(const Op& op, const TensorDesc& x, const TensorDesc& p, std::int64_t c, const char* what);
/// Whether input i is present (not omitted).
inline bool has_input(const Op& op, std::size_t i) { return i < op.inputs.size() && !op.inputs[i].empty(); }

/// Same dtype/format as `like` with another shape.
inline TensorDesc with_shape(const TensorDesc& like, Shape s) { return {like.dtype, std::move(s), like.format}; }

/// Copies the elements of `dst` (shape `out_shape`, `es` bytes each) from `src`, read from element
/// `base` with per-output-dimension element strides `st` (a transpose, a slice, a broadcast).
void gather_strided(std::span<const std::byte> src, std::span<std::byte> dst, const Shape& out_shape,
                    const std::vector<std::int64_t>& st, std::int64_t base, std::size_t es);

/// Integer or float values of a small tensor as an attribute list: int64 list for integer and bool
/// tensors, float list for float tensors.
AttrValue tensor_to_attr(const Tensor& t);

/// Index values of an I32/I64 tensor as int64.
std::vector<std::int64_t> read_indices(const Tensor& t);

/// Calls f(offset_a, offset_b, out_index) for every element of the broadcast output shape `out`,
/// in increasing out_index order: row by row along the last dimension (a loop the compiler can
/// vectorise when the operands' last strides are 1 or 0), the rows walked by an odometer.
template <class F>
void for_each_broadcast(const Shape& out, const Shape& a, const Shape& b, F&& f) {
  const std::size_t r = out.size();
  const std::int64_t n = numel(out);
  if (n == 0) return;
  if (r == 0) {
    f(std::int64_t{0}, std::int64_t{0}, std::int64_t{0});
    return;
  }
  const auto sa = broadcast_strides(a, r), sb = broadcast_strides(b, r);
  const std::int64_t len = out[r - 1], la = sa[r - 1], lb = sb[r - 1];
  std::vector<std::int64_t> idx(r - 1, 0);
  std::int64_t oa = 0, ob = 0;
  for (std::int64_t k = 0; k < n; k += len) {
    if (la == 1 && lb == 1)
      for (std::int64_t j = 0; j < len; ++j) f(oa + j, ob + j, k + j);
    else if (la == 1 && lb == 0)
      for (std::int64_t j = 0; j < len; ++j) f(oa + j, ob, k + j);
    else if (la == 0 && lb == 1)
      for (std::int64_t j = 0; j < len; ++j) f(oa, ob + j, k + j);
    else
      for (std::int64_t j = 0; j < len; ++j) f(oa + j * la, ob + j * lb, k + j);
    for (std::size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < out[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      oa -= sa[d] * (out[d] - 1);
      ob -= sb[d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
}

/// Calls f(out_offset, in_offset) for every output element (row-major) of a gather whose input
/// coordinate along dim d is map(d, out coordinate); in_offset -1 where some map returned < 0.
template <class M, class F>
void for_each_mapped(const Shape& out, const Shape& in, M map, F f) {
  const std::size_t r = out.size();
  const auto ist = strides_of(in);
  std::vector<std::int64_t> idx(r, 0);
  const std::int64_t n = numel(out);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t off = 0;
    bool inside = true;
    for (std::size_t d = 0; d < r; ++d) {
      const std::int64_t c = map(d, idx[d]);
      if (c < 0) inside = false;
      else off += c * ist[d];
    }
    f(k, inside ? off : -1);
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
}

/// GatherElements' and ScatterElements' addressing: element k of `indices` (row-major) stands for
/// data at k's coordinate with coordinate `axis` (the op's attribute) replaced by indices[k]
/// (negative counts from the end; out of range fails naming the op). Calls f(k, data offset).
template <class F>
void for_each_gather_element(const Op& op, const Shape& data, const Tensor& indices, F f) {
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(data.size())));
  const Shape& is = indices.shape();
  const std::vector<std::int64_t> idx = read_indices(indices);
  const auto ds = strides_of(data);
  std::vector<std::int64_t> c(is.size(), 0);
  for (std::size_t k = 0; k < idx.size(); ++k) {
    std::int64_t j = idx[k];
    if (j < -data[axis] || j >= data[axis]) fail(op, "index {} is out of range for a dimension of size {}", j, data[axis]);
    if (j < 0) j += data[axis];
    std::int64_t off = 0;
    for (std::size_t d = 0; d < is.size(); ++d) off += (d == axis ? j : c[d]) * ds[d];
    f(static_cast<std::int64_t>(k), off);
    for (std::size_t d = is.size(); d-- > 0;) {
      if (++c[d] < is[d]) break;
      c[d] = 0;
    }
  }
}

// --- kernels -----------------------------------------------------------------------------------

/// Weights of the four taps at offsets -1, 0, 1, 2 from floor(x) of cubic convolution with parameter
/// A (Keys; -0.75 as PyTorch, -0.5 as TensorFlow), t = x - floor(x) in [0, 1).
inline std::array<double, 4> cubic_weights(double t, double A) {
  const double r = t, q = 1 - t;
  return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
          ((A + 2) * q - (A + 3)) * q * q + 1, ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A};
}

/// Mean and 1/sqrt(var + eps) of the n values at x (in double; the variance is the biased one).
template <class T>
std::pair<double, double> row_stats(const T* x, std::int64_t n, double eps) {
  double mean = 0;
  for (std::int64_t j = 0; j < n; ++j) mean += x[j];
  mean /= static_cast<double>(n);
  double var = 0;
  for (std::int64_t j = 0; j < n; ++j) var += (x[j] - mean) * (x[j] - mean);
  var /= static_cast<double>(n);
  return {mean, 1.0 / std::sqrt(var + eps)};
}

template <class T> using KernelFn = void (*)(const Op&, Ins, Outs);

/// Wraps a kernel template instantiated for float and double into an OpDef::reference.
inline auto typed(KernelFn<float> f32, KernelFn<double> f64) {
  return [f32, f64](const Op& op, Ins in, Outs out, RefPrecision p) {
    if (p == RefPrecision::F32) f32(op, in, out);
    else f64(op, in, out);
  };
}

template <class T> std::span<const T> cdata(const Tensor* t) { return t->data<T>(); }
template <class T> std::span<T> mdata(Tensor& t) { return t.data<T>(); }

}  // namespace probelab::graph::ops
