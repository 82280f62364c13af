// GatherND (ONNX opset 12: index tuples of the last indices dim select slices of data, with
// batch_dims leading dims shared) and its backward op GatherNDGrad (scatter-add); OneHot
// (depth folded at import; values = [off, on]; an index outside [-depth, depth) gives a row of off).
#include <cstring>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

struct GatherNdGeom {
  std::int64_t batches, tuples, q, slice, batch_stride;  // per batch: `tuples` tuples of q indices
  Shape out;
};

GatherNdGeom gather_nd_geom(const Op& op, const Shape& data, const Shape& idx) {
  const std::int64_t b = AttrReader(op).i("batch_dims");
  if (idx.empty()) fail(op, "indices must have rank >= 1");
  const std::int64_t q = idx.back();
  if (b < 0 || b >= static_cast<std::int64_t>(idx.size()) || b > static_cast<std::int64_t>(data.size()))
    fail(op, "batch_dims {} must be in [0, {}) (indices {})", b, idx.size(), shape_str(idx));
  const auto ub = static_cast<std::size_t>(b);
  if (q < 1 || static_cast<std::size_t>(q) + ub > data.size())
    fail(op, "the last dimension of indices ({}) must be in [1, {}] (data {} with batch_dims {})", q, data.size() - ub,
         shape_str(data), b);
  for (std::size_t d = 0; d < ub; ++d)
    if (data[d] != idx[d]) fail(op, "batch dimension {} differs: data {}, indices {}", d, shape_str(data), shape_str(idx));
  GatherNdGeom g{prod(data, 0, ub), prod(idx, ub, idx.size() - 1), q, prod(data, ub + static_cast<std::size_t>(q), data.size()),
                 prod(data, ub, data.size()), {}};
  g.out.assign(idx.begin(), idx.end() - 1);
  g.out.insert(g.out.end(), data.begin() + b + q, data.end());
  return g;
}

// Element offset (within its batch) of the slice each tuple selects.
std::vector<std::int64_t> slice_offsets(const Op& op, const Shape& data, const Tensor& indices, const GatherNdGeom& g) {
  const auto b = static_cast<std::size_t>(AttrReader(op).i("batch_dims"));
  const std::vector<std::int64_t> idx = read_indices(indices);
  const auto st = strides_of(data);
  std::vector<std::int64_t> off(idx.size() / static_cast<std::size_t>(g.q));
  for (std::size_t t = 0; t < off.size(); ++t)
    for (std::size_t d = 0; d < static_cast<std::size_t>(g.q); ++d) {
      const std::int64_t n = data[b + d];
      std::int64_t j = idx[t * static_cast<std::size_t>(g.q) + d];
      if (j < -n || j >= n) fail(op, "index {} is out of range for dimension {} of size {}", j, b + d, n);
      off[t] += (j < 0 ? j + n : j) * st[b + d];
    }
  return off;
}

std::vector<TensorDesc> infer_gather_nd(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_int(op, in[1], "indices");
  return {TensorDesc{in[0].dtype, gather_nd_geom(op, in[0].shape, in[1].shape).out, Format::ND}};
}

void gather_nd_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const GatherNdGeom g = gather_nd_geom(op, in[0]->shape(), in[1]->shape());
  const std::vector<std::int64_t> off = slice_offsets(op, in[0]->shape(), *in[1], g);
  const auto es = static_cast<std::int64_t>(dtype_size(in[0]->dtype()));
  const std::byte* src = in[0]->bytes().data();
  std::byte* dst = out[0].bytes().data();
  for (std::size_t t = 0; t < off.size() && g.slice > 0; ++t) {
    const std::int64_t batch = static_cast<std::int64_t>(t) / std::max<std::int64_t>(g.tuples, 1);
    std::memcpy(dst + static_cast<std::int64_t>(t) * g.slice * es, src + (batch * g.batch_stride + off[t]) * es,
                static_cast<std::size_t>(g.slice * es));
  }
}

// GatherNDGrad(dY, indices; batch_dims, data_shape) -> dData.
std::vector<TensorDesc> infer_gather_nd_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  const Shape ds = op.attr_ints("data_shape");
  if (gather_nd_geom(op, ds, in[1].shape).out != in[0].shape) fail(op, "dY has shape {}, not GatherND's output", shape_str(in[0].shape));
  return {TensorDesc{in[0].dtype, ds, Format::ND}};
}

template <class T> void gather_nd_grad_ref(const Op& op, Ins in, Outs out) {
  const Shape ds = op.attr_ints("data_shape");
  const GatherNdGeom g = gather_nd_geom(op, ds, in[1]->shape());
  const std::vector<std::int64_t> off = slice_offsets(op, ds, *in[1], g);
  auto dy = cdata<T>(in[0]);
  auto dx = mdata<T>(out[0]);
  for (std::size_t t = 0; t < off.size(); ++t) {
    const std::int64_t batch = static_cast<std::int64_t>(t) / std::max<std::int64_t>(g.tuples, 1);
    for (std::int64_t e = 0; e < g.slice; ++e)
      dx[static_cast<std::size_t>(batch * g.batch_stride + off[t] + e)] += dy[t * static_cast<std::size_t>(g.slice) + static_cast<std::size_t>(e)];
  }
}

void gather_nd_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "GatherNDGrad", {b.dy(op), op.inputs[1]}, {b.dx(op, 0)},
         {{"batch_dims", AttrReader(op).i("batch_dims")}, {"data_shape", b.desc(op.inputs[0]).shape}});
}

// --- OneHot(indices, values; depth, axis) ------------------------------------------------------------

// depth may be any numeric tensor in ONNX (a float one too): its value truncated, at least 1.
std::int64_t depth_of(const Op& op) {
  const double d = op.attr_float("depth");
  if (!(d >= 1) || d > 1e9) fail(op, "depth must be >= 1, got {}", d);
  return static_cast<std::int64_t>(d);
}

std::vector<TensorDesc> infer_one_hot(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  if (!is_integer(in[0].dtype) && !is_float(in[0].dtype)) fail(op, "indices must be a numeric tensor, got {}", dtype_name(in[0].dtype));
  if (numel(in[1].shape) != 2) fail(op, "values must hold two elements [off, on], got {}", shape_str(in[1].shape));
  const std::int64_t depth = depth_of(op);
  Shape s = in[0].shape;
  const std::int64_t axis = norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(s.size()) + 1);
  s.insert(s.begin() + axis, depth);
  return {TensorDesc{in[1].dtype, s, Format::ND}};
}

void one_hot_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const std::int64_t depth = depth_of(op);
  const Shape& is = in[0]->shape();
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(is.size()) + 1));
  const std::int64_t outer = prod(is, 0, axis), inner = prod(is, axis, is.size());
  const std::vector<double> idx = in[0]->to_f64(), v = in[1]->to_f64();
  std::vector<double> y(static_cast<std::size_t>(outer * depth * inner), v[0]);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      auto j = static_cast<std::int64_t>(idx[static_cast<std::size_t>(o * inner + i)]);  // truncated, as ONNX casts
      if (j < 0) j += depth;
      if (j >= 0 && j < depth) y[static_cast<std::size_t>((o * depth + j) * inner + i)] = v[1];
    }
  out[0] = Tensor::from_f64(out[0].shape(), y, out[0].dtype());
}

}  // namespace

void register_gather_nd_ops(OpRegistry& r) {
  const AttrSpec batch = attr_int("batch_dims", 0, "leading dimensions data and indices share");
  OpDef g;
  g.type = "GatherND";
  g.moves_elements = true;
  g.doc = "slices of data selected by the index tuples of indices' last dimension (ONNX GatherND)";
  g.attrs = {batch};
  g.min_inputs = g.max_inputs = 2;
  g.input_names = {"data", "indices"};
  g.output_names = {"output"};
  g.infer = infer_gather_nd;
  g.reference = gather_nd_ref;
  g.gradient = gather_nd_grad;
  r.add(std::move(g));

  OpDef gg;
  gg.type = "GatherNDGrad";
  gg.doc = "dData of GatherND: dY scatter-added at the selected slices";
  gg.attrs = {batch, attr_nodefault("data_shape", true, "shape of GatherND's data")};
  gg.min_inputs = gg.max_inputs = 2;
  gg.input_names = {"dY", "indices"};
  gg.output_names = {"dData"};
  gg.backward = true;
  gg.infer = infer_gather_nd_grad;
  gg.reference = typed(gather_nd_grad_ref<float>, gather_nd_grad_ref<double>);
  r.add(std::move(gg));

  OpDef oh;
  oh.type = "OneHot";
  oh.doc = "values[1] at each index along a new axis of size depth, values[0] elsewhere (ONNX OneHot; depth folded "
           "at import)";
  oh.attrs = {attr_nodefault("depth", true, "size of the new axis (ONNX's input depth, folded at import)"),
              attr_int("axis", -1, "position of the new axis (negative counts from the end of the output)")};
  oh.min_inputs = oh.max_inputs = 2;
  oh.input_names = {"indices", "values"};
  oh.output_names = {"output"};
  oh.infer = infer_one_hot;
  oh.reference = one_hot_ref;
  r.add(std::move(oh));
}

}  // namespace probelab::graph::ops
