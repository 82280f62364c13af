// Shared helpers of the op definitions.
#include "graph/ops/op_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace probelab::graph::ops {

AttrSpec attr_int(std::string name, std::int64_t def, std::string doc) {
  return {std::move(name), false, AttrValue{def}, std::move(doc)};
}
AttrSpec attr_float(std::string name, double def, std::string doc) {
  return {std::move(name), false, AttrValue{def}, std::move(doc)};
}
AttrSpec attr_str(std::string name, std::string def, std::string doc) {
  return {std::move(name), false, AttrValue{std::move(def)}, std::move(doc)};
}
AttrSpec attr_ints(std::string name, std::vector<std::int64_t> def, std::string doc) {
  return {std::move(name), false, AttrValue{std::move(def)}, std::move(doc)};
}
AttrSpec attr_nodefault(std::string name, bool required, std::string doc) {
  return {std::move(name), required, std::nullopt, std::move(doc)};
}

AttrReader::AttrReader(const Op& op) : op_(op), def_(OpRegistry::instance().get(op.type)) {}

const AttrValue* AttrReader::fallback(const std::string& key) const {
  const AttrSpec* spec = def_.attr(key);
  if (!spec) fail(op_, "reads attribute '{}' which its type does not declare", key);
  if (!spec->default_value) fail(op_, "missing attribute '{}' ({})", key, spec->doc);
  return &*spec->default_value;
}

std::int64_t AttrReader::i(const std::string& key) const {
  if (op_.has_attr(key)) return op_.attr_int(key);
  return std::get<std::int64_t>(*fallback(key));
}
double AttrReader::f(const std::string& key) const {
  if (op_.has_attr(key)) return op_.attr_float(key);
  return std::get<double>(*fallback(key));
}
std::string AttrReader::s(const std::string& key) const {
  if (op_.has_attr(key)) return op_.attr_str(key);
  return std::get<std::string>(*fallback(key));
}
std::vector<std::int64_t> AttrReader::ints(const std::string& key) const {
  if (op_.has_attr(key)) return op_.attr_ints(key);
  return std::get<std::vector<std::int64_t>>(*fallback(key));
}

std::int64_t norm_axis(const Op& op, std::int64_t axis, std::int64_t rank, const char* what) {
  const std::int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  if (axis < lo || axis > hi) fail(op, "{} {} is out of range for rank {} (expected {}..{})", what, axis, rank, lo, hi);
  return axis < 0 ? axis + rank : axis;
}

Shape broadcast_shapes(const Op& op, const Shape& a, const Shape& b) {
  const std::size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, "shapes {} and {} do not broadcast (dimension {}: {} vs {})", shape_str(a), shape_str(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool broadcastable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t off = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  return true;
}

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

std::vector<std::int64_t> broadcast_strides(const Shape& s, std::size_t rank) {
  std::vector<std::int64_t> out(rank, 0);
  const auto st = strides_of(s);
  const std::size_t off = rank - s.size();
  for (std::size_t i = 0; i < s.size(); ++i) out[off + i] = s[i] == 1 ? 0 : st[i];
  return out;
}

void expect_channel_param(const Op& op, const TensorDesc& x, const TensorDesc& p, std::int64_t c, const char* what) {
  expect_same_dtype(op, x, p, what);
  if (p.shape != Shape{c}) fail(op, "{} must have shape [{}] (one per channel of X), got {}", what, c, shape_str(p.shape));
}

void check_epsilon(const Op& op) {
  const double eps = AttrReader(op).f("epsilon");
  if (!(eps >= 0) || !std::isfinite(eps)) fail(op, "attribute epsilon is {}; expected a finite number >= 0", eps);
}

std::int64_t prod(const Shape& s, std::size_t begin, std::size_t end) {
  end = std::min(end, s.size());
  if (begin >= end) return 1;
  return numel(Shape(s.begin() + static_cast<std::ptrdiff_t>(begin), s.begin() + static_cast<std::ptrdiff_t>(end)));
}

OpDef data_op_def(std::string type, std::string doc, std::vector<AttrSpec> attrs) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.attrs = std::move(attrs);
  d.input_names = {"data"};
  d.output_names = {"output"};
  d.moves_elements = true;
  return d;
}

void expect_inputs(const Op& op, Descs in, int min, int max) {
  const int n = static_cast<int>(in.size());
  if (n < min || (max >= 0 && n > max))
    fail(op, "has {} inputs, expected {}", n,
         min == max ? fmt::format("{}", min)
         : max < 0  ? fmt::format("at least {}", min)
                    : fmt::format("{} to {}", min, max));
  for (int i = 0; i < std::min(n, min); ++i)
    if (op.inputs.size() > static_cast<std::size_t>(i) && op.inputs[static_cast<std::size_t>(i)].empty())
      fail(op, "input {} is required", i);
}

void expect_outputs(const Op& op, int min, int max) {
  const int n = static_cast<int>(op.outputs.size());
  if (n < min || n > max)
    fail(op, "has {} outputs, expected {}", n, min == max ? fmt::format("{}", min) : fmt::format("{} to {}", min, max));
}

void expect_float(const Op& op, const TensorDesc& d, const char* what) {
  if (!is_float(d.dtype)) fail(op, "{} must be a float tensor, got {}", what, dtype_name(d.dtype));
}

void expect_rank(const Op& op, const TensorDesc& d, std::int64_t rank, const char* what) {
  if (static_cast<std::int64_t>(d.shape.size()) != rank)
    fail(op, "{} must have rank {}, got shape {}", what, rank, shape_str(d.shape));
}

void expect_int(const Op& op, const TensorDesc& d, const char* what) {
  if (d.dtype != DType::I64 && d.dtype != DType::I32)
    fail(op, "{} must be an int64 or int32 tensor, got {}", what, dtype_name(d.dtype));
}

void expect_same_dtype(const Op& op, const TensorDesc& a, const TensorDesc& b, const char* what) {
  if (a.dtype != b.dtype)
    fail(op, "{} must have the same dtype, got {} and {}", what, dtype_name(a.dtype), dtype_name(b.dtype));
}

namespace {

// One output row: n elements of type T, read `stride` elements apart.
template <class T>
void gather_row(const std::byte* src, std::byte* dst, std::int64_t n, std::int64_t stride) {
  for (std::int64_t j = 0; j < n; ++j) {
    T v;
    std::memcpy(&v, src + j * stride * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
    std::memcpy(dst + j * static_cast<std::int64_t>(sizeof(T)), &v, sizeof(T));
  }
}

}  // namespace

void gather_strided(std::span<const std::byte> src, std::span<std::byte> dst, const Shape& out_shape,
                    const std::vector<std::int64_t>& st, std::int64_t base, std::size_t es) {
  const auto esz = static_cast<std::int64_t>(es);
  if (out_shape.empty()) {  // a scalar
    std::memcpy(dst.data(), src.data() + base * esz, es);
    return;
  }
  const std::int64_t n = numel(out_shape);
  if (n == 0) return;
  // Row by row along the last output dimension (one copy when its stride is 1, else a typed
  // loop), the rows walked by an odometer over the other dimensions.
  const std::size_t r = out_shape.size();
  const std::int64_t len = out_shape[r - 1], stride = st[r - 1];
  std::vector<std::int64_t> idx(r - 1, 0);
  std::int64_t off = base;
  for (std::int64_t k = 0; k < n; k += len) {
    const std::byte* s = src.data() + off * esz;
    std::byte* d = dst.data() + k * esz;
    if (stride == 1) std::memcpy(d, s, static_cast<std::size_t>(len) * es);
    else if (es == 2) gather_row<std::uint16_t>(s, d, len, stride);
    else if (es == 4) gather_row<std::uint32_t>(s, d, len, stride);
    else if (es == 8) gather_row<std::uint64_t>(s, d, len, stride);
    else if (es == 1) gather_row<std::uint8_t>(s, d, len, stride);
    else
      for (std::int64_t j = 0; j < len; ++j) std::memcpy(d + j * esz, s + j * stride * esz, es);
    for (std::size_t dim = r - 1; dim-- > 0;) {
      if (++idx[dim] < out_shape[dim]) {
        off += st[dim];
        break;
      }
      off -= st[dim] * (out_shape[dim] - 1);
      idx[dim] = 0;
    }
  }
}

std::vector<std::int64_t> read_indices(const Tensor& t) {
  if (t.dtype() == DType::I64) {
    auto d = t.data<std::int64_t>();
    return {d.begin(), d.end()};
  }
  if (t.dtype() == DType::I32) {
    auto d = t.data<std::int32_t>();
    return {d.begin(), d.end()};
  }
  throw GraphError(fmt::format("expected an int64/int32 index tensor, got {}", dtype_name(t.dtype())));
}

AttrValue tensor_to_attr(const Tensor& t) {
  if (is_float(t.dtype())) return t.to_f64();
  if (t.dtype() == DType::Bool) {
    auto d = t.data<std::uint8_t>();
    return std::vector<std::int64_t>(d.begin(), d.end());
  }
  return read_indices(t);
}

}  // namespace probelab::graph::ops
