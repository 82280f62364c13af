// TopK (ONNX opset 11: the k largest or smallest elements along `axis` and their int64 indices,
// sorted, equal values in index order; NaN ranks above every number, as numpy's sort puts it
// last) and its gradient: dX gets dValues at the selected indices (GatherElementsGrad, since the
// values are X gathered at the indices).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

struct TopKGeom {
  std::size_t axis;
  std::int64_t outer, n, inner, k;
};

TopKGeom topk_geom(const Op& op, const Shape& x) {
  if (x.empty()) fail(op, "input X must have rank >= 1");
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(x.size())));
  const std::int64_t k = op.attr_int("k");
  if (k < 0 || k > x[axis]) fail(op, "k = {} must be in [0, {}] (the size of axis {} of {})", k, x[axis], axis, shape_str(x));
  return {axis, prod(x, 0, axis), x[axis], prod(x, axis + 1, x.size()), k};
}

std::vector<TensorDesc> infer_topk(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_outputs(op, 2, 2);
  if (!is_float(in[0].dtype) && !is_integer(in[0].dtype))
    fail(op, "input X must be a float or integer tensor, got {}", dtype_name(in[0].dtype));
  const TopKGeom g = topk_geom(op, in[0].shape);
  Shape s = in[0].shape;
  s[g.axis] = g.k;
  return {TensorDesc{in[0].dtype, s, Format::ND}, TensorDesc{DType::I64, s, Format::ND}};
}

void topk_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const TopKGeom g = topk_geom(op, in[0]->shape());
  const bool largest = AttrReader(op).i("largest") != 0;
  const std::vector<double> x = in[0]->to_f64();
  // a ranks before b: the larger (smaller) value, NaN as the largest; ties in index order.
  auto before = [largest](double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return largest ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
    return largest ? a > b : a < b;
  };
  // The kept values are copied as stored (exact for every dtype); the ranking reads them as double.
  const std::size_t es = dtype_size(in[0]->dtype());
  const std::byte* src = in[0]->bytes().data();
  std::byte* dst_vals = out[0].bytes().data();
  auto idx = out[1].data<std::int64_t>();
  std::vector<std::int64_t> order(static_cast<std::size_t>(g.n));
  for (std::int64_t o = 0; o < g.outer; ++o)
    for (std::int64_t i = 0; i < g.inner; ++i) {
      auto pos = [&](std::int64_t j) { return static_cast<std::size_t>((o * g.n + j) * g.inner + i); };
      auto at = [&](std::int64_t j) { return x[pos(j)]; };
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return before(at(a), at(b)); });
      for (std::int64_t j = 0; j < g.k; ++j) {
        const auto dst = static_cast<std::size_t>((o * g.k + j) * g.inner + i);
        idx[dst] = order[static_cast<std::size_t>(j)];
        std::memcpy(dst_vals + dst * es, src + pos(order[static_cast<std::size_t>(j)]) * es, es);
      }
    }
}

void topk_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0) || b.dy(op, 0).empty()) return;
  b.emit(op, "", "GatherElementsGrad", {b.dy(op, 0), op.outputs[1]}, {b.dx(op, 0)},
         {{"axis", AttrReader(op).i("axis")}, {"data_shape", b.desc(op.inputs[0]).shape}});
}

}  // namespace

void register_topk_ops(OpRegistry& r) {
  OpDef d;
  d.type = "TopK";
  d.doc = "the k largest (or smallest) elements along `axis`, sorted, and their int64 indices (ONNX TopK; k folded "
          "at import); NaN ranks above every number";
  d.attrs = {attr_nodefault("k", true, "number of elements kept (ONNX's input K, folded at import)"),
             attr_int("axis", -1, "axis searched (negative counts from the end)"),
             attr_int("largest", 1, "1: the largest, 0: the smallest"),
             attr_int("sorted", 1, "the output is always sorted (1 and 0 alike)")};
  d.min_inputs = d.max_inputs = 1;
  d.num_outputs = 2;
  d.input_names = {"X"};
  d.output_names = {"Values", "Indices"};
  d.infer = infer_topk;
  d.reference = topk_ref;
  d.gradient = topk_grad;
  r.add(std::move(d));
}

}  // namespace probelab::graph::ops
