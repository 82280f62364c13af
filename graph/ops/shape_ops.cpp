// Data movement: Reshape, Flatten, Transpose, Concat, Slice (ONNX semantics; shape-determining
// inputs are attributes) and SliceGrad. Kernels move bytes, so every dtype works.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

void copy_bytes_ref(const Op&, Ins in, Outs out, RefPrecision) {
  if (out[0].nbytes() != 0) std::memcpy(out[0].bytes().data(), in[0]->bytes().data(), out[0].nbytes());
}

// --- Reshape / Flatten --------------------------------------------------------------------------

Shape reshape_target(const Op& op, const Shape& in) {
  const Shape spec = op.attr_ints("shape");
  const bool allow_zero = AttrReader(op).i("allowzero") != 0;
  Shape out(spec.size());
  std::int64_t known = 1, infer_at = -1;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    std::int64_t v = spec[i];
    if (v == 0 && !allow_zero) {
      if (i >= in.size()) fail(op, "shape entry {} is 0 (copy) but the input {} has no dimension {}", i, shape_str(in), i);
      v = in[i];
    }
    if (v == -1) {
      if (infer_at >= 0) fail(op, "shape {} has more than one -1", shape_str(spec));
      infer_at = static_cast<std::int64_t>(i);
      continue;
    }
    if (v < 0) fail(op, "shape {} has a negative entry other than -1", shape_str(spec));
    out[i] = v;
    if (v != 0 && known > kMaxElements / v) fail(op, "shape {} has more than 2^48 elements", shape_str(spec));
    known *= v;
  }
  const std::int64_t total = numel(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      fail(op, "cannot infer the -1 of shape {} for input {}", shape_str(spec), shape_str(in));
    out[static_cast<std::size_t>(infer_at)] = total / known;
  } else if (known != total) {
    fail(op, "shape {} has {} elements, the input {} has {}", shape_str(out), known, shape_str(in), total);
  }
  return out;
}

std::vector<TensorDesc> infer_reshape(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  return {TensorDesc{in[0].dtype, reshape_target(op, in[0].shape), Format::ND}};
}

std::vector<TensorDesc> infer_flatten(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  const Shape& s = in[0].shape;
  const auto r = static_cast<std::int64_t>(s.size());
  std::int64_t axis = AttrReader(op).i("axis");
  if (axis < -r || axis > r) fail(op, "axis {} is out of range for rank {} (expected {}..{})", axis, r, -r, r);
  if (axis < 0) axis += r;
  const auto a = static_cast<std::size_t>(axis);
  return {TensorDesc{in[0].dtype, {prod(s, 0, a), prod(s, a, s.size())}, Format::ND}};
}

void reshape_back_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "Reshape", {b.dy(op)}, {b.dx(op, 0)},
         {{"shape", b.desc(op.inputs[0]).shape}, {"allowzero", std::int64_t{1}}});
}

// --- Transpose ----------------------------------------------------------------------------------

std::vector<std::int64_t> perm_of(const Op& op, std::size_t rank) {
  std::vector<std::int64_t> p = op.attr_ints("perm", {});
  if (p.empty()) {
    p.resize(rank);
    std::iota(p.rbegin(), p.rend(), 0);
    return p;
  }
  std::vector<std::int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<std::int64_t>(i) || p.size() != rank)
      fail(op, "perm [{}] is not a permutation of 0..{}", fmt::join(p, ", "), static_cast<std::int64_t>(rank) - 1);
  return p;
}

std::vector<TensorDesc> infer_transpose(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  const auto p = perm_of(op, in[0].shape.size());
  Shape s(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) s[i] = in[0].shape[static_cast<std::size_t>(p[i])];
  return {TensorDesc{in[0].dtype, s, Format::ND}};
}

void transpose_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape& xs = in[0]->shape();
  const auto p = perm_of(op, xs.size());
  const auto xst = strides_of(xs);
  std::vector<std::int64_t> st(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) st[i] = xst[static_cast<std::size_t>(p[i])];
  gather_strided(in[0]->bytes(), out[0].bytes(), out[0].shape(), st, 0, dtype_size(in[0]->dtype()));
}

void transpose_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  const auto p = perm_of(op, b.desc(op.inputs[0]).shape.size());
  std::vector<std::int64_t> inv(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) inv[static_cast<std::size_t>(p[i])] = static_cast<std::int64_t>(i);
  b.emit(op, "", "Transpose", {b.dy(op)}, {b.dx(op, 0)}, {{"perm", inv}});
}

// --- Concat ---------------------------------------------------------------------------------------

std::vector<TensorDesc> infer_concat(const Op& op, Descs in) {
  expect_inputs(op, in, 1, -1);
  const Shape& s0 = in[0].shape;
  const auto axis = static_cast<std::size_t>(norm_axis(op, op.attr_int("axis"), static_cast<std::int64_t>(s0.size())));
  Shape out = s0;
  out[axis] = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    expect_same_dtype(op, in[0], in[i], "all inputs");
    const Shape& s = in[i].shape;
    bool ok = s.size() == s0.size();
    for (std::size_t d = 0; ok && d < s.size(); ++d) ok = d == axis || s[d] == s0[d];
    if (!ok) fail(op, "input {} has shape {}, expected {} except along axis {}", i, shape_str(s), shape_str(s0), axis);
    out[axis] += s[axis];
  }
  return {TensorDesc{in[0].dtype, out, in[0].format}};
}

void concat_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape& os = out[0].shape();
  const auto axis = static_cast<std::size_t>(norm_axis(op, op.attr_int("axis"), static_cast<std::int64_t>(os.size())));
  const std::int64_t outer = prod(os, 0, axis), inner = prod(os, axis + 1, os.size());
  const auto es = static_cast<std::int64_t>(dtype_size(out[0].dtype()));
  std::byte* dst = out[0].bytes().data();
  const std::int64_t out_row = os[axis] * inner * es;
  std::int64_t col = 0;
  for (const Tensor* t : in) {
    const std::int64_t row = t->shape()[axis] * inner * es;
    if (row != 0)
      for (std::int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * out_row + col, t->bytes().data() + o * row, row);
    col += row;
  }
}

void concat_grad(GradBuilder& b, const Op& op) {
  const Shape ys = b.desc(op.outputs[0]).shape;
  const std::int64_t axis = norm_axis(op, op.attr_int("axis"), static_cast<std::int64_t>(ys.size()));
  std::int64_t off = 0;
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    const std::int64_t len = b.desc(op.inputs[i]).shape[static_cast<std::size_t>(axis)];
    if (b.needs(op, i))
      b.emit(op, fmt::format("{}", i), "Slice", {b.dy(op)}, {b.dx(op, i)},
             {{"starts", std::vector<std::int64_t>{off}}, {"ends", std::vector<std::int64_t>{off + len}},
              {"axes", std::vector<std::int64_t>{axis}}});
    off += len;
  }
}

// --- Slice ----------------------------------------------------------------------------------------

struct SliceSpec {
  std::vector<std::int64_t> start, step;  // per dimension of the input
  Shape out;
};

SliceSpec slice_spec(const Op& op, const Shape& in) {
  const std::vector<std::int64_t> starts = op.attr_ints("starts"), ends = op.attr_ints("ends");
  std::vector<std::int64_t> axes = op.attr_ints("axes", {}), steps = op.attr_ints("steps", {});
  const auto r = static_cast<std::int64_t>(in.size());
  if (axes.empty())
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(starts.size()); ++i) axes.push_back(i);
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail(op, "starts, ends, axes and steps must have the same length ({}, {}, {}, {})", starts.size(), ends.size(),
         axes.size(), steps.size());
  SliceSpec s{std::vector<std::int64_t>(in.size(), 0), std::vector<std::int64_t>(in.size(), 1), in};
  std::vector<bool> seen(in.size(), false);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const auto a = static_cast<std::size_t>(norm_axis(op, axes[i], r, "slice axis"));
    if (seen[a]) fail(op, "axis {} is sliced twice", a);
    seen[a] = true;
    const std::int64_t dim = in[a], step = steps[i];
    if (step == 0) fail(op, "step along axis {} is 0", a);
    std::int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      b = std::clamp<std::int64_t>(b, 0, dim);
      e = std::clamp<std::int64_t>(e, 0, dim);
      s.out[a] = e > b ? (e - b + step - 1) / step : 0;
    } else {
      b = std::clamp<std::int64_t>(b, 0, dim - 1);
      e = std::clamp<std::int64_t>(e, -1, dim - 1);
      s.out[a] = b > e ? (b - e - step - 1) / -step : 0;
    }
    s.start[a] = b;
    s.step[a] = step;
  }
  return s;
}

std::vector<TensorDesc> infer_slice(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  return {TensorDesc{in[0].dtype, slice_spec(op, in[0].shape).out, Format::ND}};
}

// Input offset of the first output element and per-output-dim input strides.
std::pair<std::int64_t, std::vector<std::int64_t>> slice_strides(const SliceSpec& s, const Shape& in) {
  const auto st = strides_of(in);
  std::int64_t base = 0;
  std::vector<std::int64_t> ost(in.size());
  for (std::size_t d = 0; d < in.size(); ++d) {
    base += s.start[d] * st[d];
    ost[d] = s.step[d] * st[d];
  }
  return {base, ost};
}

void slice_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const SliceSpec s = slice_spec(op, in[0]->shape());
  const auto [base, st] = slice_strides(s, in[0]->shape());
  if (numel(s.out) == 0) return;
  gather_strided(in[0]->bytes(), out[0].bytes(), s.out, st, base, dtype_size(in[0]->dtype()));
}

// SliceGrad(dY; input_shape + the slice attributes) -> dX: dY scattered into zeros.
std::vector<TensorDesc> infer_slice_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input dY");
  const Shape xs = op.attr_ints("input_shape");
  const SliceSpec s = slice_spec(op, xs);
  if (s.out != in[0].shape) fail(op, "dY has shape {}, expected {}", shape_str(in[0].shape), shape_str(s.out));
  return {TensorDesc{in[0].dtype, xs, Format::ND}};
}

template <class T> void slice_grad_ref(const Op& op, Ins in, Outs out) {
  const Shape xs = op.attr_ints("input_shape");
  const SliceSpec s = slice_spec(op, xs);
  const auto [base, st] = slice_strides(s, xs);
  auto dy = cdata<T>(in[0]);
  auto dx = mdata<T>(out[0]);
  const std::size_t r = xs.size();
  std::vector<std::int64_t> idx(r, 0);
  std::int64_t off = base;
  for (std::size_t k = 0; k < dy.size(); ++k) {
    dx[static_cast<std::size_t>(off)] += dy[k];
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < s.out[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (s.out[d] - 1);
      idx[d] = 0;
    }
  }
}

void slice_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  Attrs a = op.attrs;
  a["input_shape"] = b.desc(op.inputs[0]).shape;
  b.emit(op, "", "SliceGrad", {b.dy(op)}, {b.dx(op, 0)}, std::move(a));
}

std::vector<AttrSpec> slice_attrs() {
  return {attr_nodefault("starts", true, "start index per sliced axis (negative counts from the end)"),
          attr_nodefault("ends", true, "end index (exclusive) per sliced axis; clamped to the dimension"),
          attr_ints("axes", {}, "sliced axes (default 0..len(starts)-1)"),
          attr_ints("steps", {}, "step per sliced axis (default 1; negative walks backwards)")};
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  OpDef reshape = data_op_def("Reshape", "same elements in a new shape (ONNX Reshape; 0 copies, -1 infers)",
                             {attr_nodefault("shape", true, "target shape; 0 copies the input dim, -1 is inferred"),
                              attr_int("allowzero", 0, "1: a 0 in `shape` means a zero-sized dimension")});
  reshape.infer = infer_reshape;
  reshape.reference = copy_bytes_ref;
  reshape.gradient = reshape_back_grad;
  r.add(std::move(reshape));

  OpDef flatten = data_op_def("Flatten", "2-D [prod(dims[:axis]), prod(dims[axis:])] view (ONNX Flatten)",
                             {attr_int("axis", 1, "first dimension of the second output dimension")});
  flatten.infer = infer_flatten;
  flatten.reference = copy_bytes_ref;
  flatten.gradient = reshape_back_grad;
  r.add(std::move(flatten));

  OpDef tr = data_op_def("Transpose", "permutes dimensions (ONNX Transpose)",
                        {attr_ints("perm", {}, "output dim i is input dim perm[i] (default: reversed)")});
  tr.infer = infer_transpose;
  tr.reference = transpose_ref;
  tr.gradient = transpose_grad;
  r.add(std::move(tr));

  OpDef cat = data_op_def("Concat", "joins inputs along `axis` (ONNX Concat)",
                         {attr_nodefault("axis", true, "axis to join along (negative counts from the end)")});
  cat.max_inputs = -1;
  cat.input_names = {"inputs..."};
  cat.infer = infer_concat;
  cat.reference = concat_ref;
  cat.gradient = concat_grad;
  r.add(std::move(cat));

  OpDef sl = data_op_def("Slice", "strided sub-tensor (ONNX Slice; starts/ends/axes/steps as attributes)", slice_attrs());
  sl.infer = infer_slice;
  sl.reference = slice_ref;
  sl.gradient = slice_grad;
  r.add(std::move(sl));

  OpDef sg = data_op_def("SliceGrad", "dX of Slice: dY scattered into zeros of the input shape", slice_attrs());
  sg.attrs.push_back(attr_nodefault("input_shape", true, "shape of the forward input"));
  sg.input_names = {"dY"};
  sg.output_names = {"dX"};
  sg.backward = true;
  sg.infer = infer_slice_grad;
  sg.reference = typed(slice_grad_ref<float>, slice_grad_ref<double>);
  r.add(std::move(sg));
}

}  // namespace probelab::graph::ops
