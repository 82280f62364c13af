// Gather and GatherElements (ONNX, along `axis`; "Embedding" is the axis-0 lookup of rows of a weight table by
// int64 indices) and its backward op GatherGrad (scatter-add).
#include <cstring>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

struct GatherGeom {
  std::size_t axis;
  std::int64_t outer, n, inner;
  Shape out;
};

GatherGeom gather_geom(const Op& op, const Shape& data, const Shape& indices) {
  if (data.empty()) fail(op, "data must have rank >= 1");
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(data.size())));
  GatherGeom g{axis, prod(data, 0, axis), data[axis], prod(data, axis + 1, data.size()), {}};
  g.out.assign(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(axis));
  g.out.insert(g.out.end(), indices.begin(), indices.end());
  g.out.insert(g.out.end(), data.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.end());
  return g;
}

std::vector<TensorDesc> infer_gather(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_int(op, in[1], "indices");
  return {TensorDesc{in[0].dtype, gather_geom(op, in[0].shape, in[1].shape).out, Format::ND}};
}

std::vector<std::int64_t> checked_indices(const Op& op, const Tensor& t, std::int64_t n) {
  std::vector<std::int64_t> idx = read_indices(t);
  for (std::int64_t& i : idx) {
    if (i < -n || i >= n) fail(op, "index {} is out of range for a dimension of size {}", i, n);
    if (i < 0) i += n;
  }
  return idx;
}

void gather_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const GatherGeom g = gather_geom(op, in[0]->shape(), in[1]->shape());
  const std::vector<std::int64_t> idx = checked_indices(op, *in[1], g.n);
  const auto block = static_cast<std::int64_t>(dtype_size(in[0]->dtype())) * g.inner;
  const std::byte* src = in[0]->bytes().data();
  std::byte* dst = out[0].bytes().data();
  const auto m = static_cast<std::int64_t>(idx.size());
  for (std::int64_t o = 0; block != 0 && o < g.outer; ++o)
    for (std::int64_t j = 0; j < m; ++j)
      std::memcpy(dst + (o * m + j) * block, src + (o * g.n + idx[static_cast<std::size_t>(j)]) * block,
                  static_cast<std::size_t>(block));
}

// GatherGrad(dY, indices; axis, data_shape) -> dData.
std::vector<TensorDesc> infer_gather_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  expect_int(op, in[1], "indices");
  const Shape ds = op.attr_ints("data_shape");
  const GatherGeom g = gather_geom(op, ds, in[1].shape);
  if (g.out != in[0].shape) fail(op, "dY has shape {}, expected {}", shape_str(in[0].shape), shape_str(g.out));
  return {TensorDesc{in[0].dtype, ds, Format::ND}};
}

template <class T> void gather_grad_ref(const Op& op, Ins in, Outs out) {
  const GatherGeom g = gather_geom(op, op.attr_ints("data_shape"), in[1]->shape());
  const std::vector<std::int64_t> idx = checked_indices(op, *in[1], g.n);
  auto dy = cdata<T>(in[0]);
  auto dx = mdata<T>(out[0]);
  const auto m = static_cast<std::int64_t>(idx.size());
  for (std::int64_t o = 0; o < g.outer; ++o)
    for (std::int64_t j = 0; j < m; ++j) {
      const T* src = dy.data() + (o * m + j) * g.inner;
      T* dst = dx.data() + (o * g.n + idx[static_cast<std::size_t>(j)]) * g.inner;
      for (std::int64_t k = 0; k < g.inner; ++k) dst[k] += src[k];
    }
}

void gather_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "GatherGrad", {b.dy(op), op.inputs[1]}, {b.dx(op, 0)},
         {{"axis", AttrReader(op).i("axis")}, {"data_shape", b.desc(op.inputs[0]).shape}});
}

// --- GatherElements --------------------------------------------------------------------------------

std::vector<TensorDesc> infer_gather_elements(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_int(op, in[1], "indices");
  if (in[0].shape.size() != in[1].shape.size() || in[0].shape.empty())
    fail(op, "data {} and indices {} must have the same rank >= 1", shape_str(in[0].shape), shape_str(in[1].shape));
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(in[0].shape.size())));
  for (std::size_t d = 0; d < in[0].shape.size(); ++d)
    if (d != axis && in[1].shape[d] > in[0].shape[d])
      fail(op, "indices {} exceed data {} in dimension {}", shape_str(in[1].shape), shape_str(in[0].shape), d);
  return {TensorDesc{in[0].dtype, in[1].shape, Format::ND}};
}

void gather_elements_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const std::size_t es = dtype_size(in[0]->dtype());
  const std::byte* src = in[0]->bytes().data();
  std::byte* dst = out[0].bytes().data();
  for_each_gather_element(op, in[0]->shape(), *in[1], [&](std::int64_t k, std::int64_t off) {
    std::memcpy(dst + k * static_cast<std::int64_t>(es), src + off * static_cast<std::int64_t>(es), es);
  });
}

// GatherElementsGrad(dY, indices; axis, data_shape) -> dData (scatter-add).
std::vector<TensorDesc> infer_gather_elements_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  if (in[0].shape != in[1].shape) fail(op, "dY {} must have the indices' shape {}", shape_str(in[0].shape), shape_str(in[1].shape));
  return {TensorDesc{in[0].dtype, op.attr_ints("data_shape"), Format::ND}};
}

template <class T> void gather_elements_grad_ref(const Op& op, Ins in, Outs out) {
  auto dy = cdata<T>(in[0]);
  auto dx = mdata<T>(out[0]);
  for_each_gather_element(op, op.attr_ints("data_shape"), *in[1], [&](std::int64_t k, std::int64_t off) {
    dx[static_cast<std::size_t>(off)] += dy[static_cast<std::size_t>(k)];
  });
}

void gather_elements_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "GatherElementsGrad", {b.dy(op), op.inputs[1]}, {b.dx(op, 0)},
         {{"axis", AttrReader(op).i("axis")}, {"data_shape", b.desc(op.inputs[0]).shape}});
}

AttrSpec axis_attr() { return attr_int("axis", 0, "gathered axis of data (negative counts from the end)"); }

}  // namespace

void register_gather_ops(OpRegistry& r) {
  OpDef g;
  g.type = "Gather";
  g.moves_elements = true;
  g.aliases = {"Embedding"};
  g.doc = "selects slices of data along `axis` by int indices (ONNX Gather; Embedding = rows of a table)";
  g.min_inputs = g.max_inputs = 2;
  g.attrs = {axis_attr()};
  g.input_names = {"data", "indices"};
  g.output_names = {"output"};
  g.infer = infer_gather;
  g.reference = gather_ref;
  g.gradient = gather_grad;
  r.add(std::move(g));

  OpDef gg;
  gg.type = "GatherGrad";
  gg.doc = "dData of Gather: dY scatter-added at the gathered positions";
  gg.min_inputs = gg.max_inputs = 2;
  gg.attrs = {axis_attr(), attr_nodefault("data_shape", true, "shape of the forward input data")};
  gg.input_names = {"dY", "indices"};
  gg.output_names = {"dData"};
  gg.backward = true;
  gg.infer = infer_gather_grad;
  gg.reference = typed(gather_grad_ref<float>, gather_grad_ref<double>);
  r.add(std::move(gg));

  OpDef ge;
  ge.type = "GatherElements";
  ge.moves_elements = true;
  ge.doc = "out[i] = data[i with coordinate axis replaced by indices[i]] (ONNX GatherElements)";
  ge.min_inputs = ge.max_inputs = 2;
  ge.attrs = {axis_attr()};
  ge.input_names = {"data", "indices"};
  ge.output_names = {"output"};
  ge.infer = infer_gather_elements;
  ge.reference = gather_elements_ref;
  ge.gradient = gather_elements_grad;
  r.add(std::move(ge));

  OpDef geg;
  geg.type = "GatherElementsGrad";
  geg.doc = "dData of GatherElements: dY scatter-added at the gathered positions";
  geg.min_inputs = geg.max_inputs = 2;
  geg.attrs = {axis_attr(), attr_nodefault("data_shape", true, "shape of the forward input data")};
  geg.input_names = {"dY", "indices"};
  geg.output_names = {"dData"};
  geg.backward = true;
  geg.infer = infer_gather_elements_grad;
  geg.reference = typed(gather_elements_grad_ref<float>, gather_elements_grad_ref<double>);
  r.add(std::move(geg));
}

}  // namespace probelab::graph::ops
