// Pooling over 1-3 spatial dimensions (ONNX MaxPool with optional Indices output, AveragePool,
// GlobalAveragePool) and the backward ops MaxPoolGrad / AveragePoolGrad.
#include <cmath>
#include <limits>
#include <type_traits>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"
#include "graph/ops/spatial.h"

namespace probelab::graph::ops {
namespace {

struct PoolGeom {
  std::int64_t planes;  // N * C
  Window win;
};

PoolGeom pool_geom(const Op& op, const Shape& x) {
  if (x.size() < 3 || x.size() > 5)
    fail(op, "input X must be [N, C, D1...] with 1 to 3 spatial dimensions, got {}", shape_str(x));
  const std::vector<std::int64_t> in(x.begin() + 2, x.end());
  const std::vector<std::int64_t> k = kernel_shape(op, in.size(), {});
  const bool ceil_mode = op.attr_int("ceil_mode", 0) != 0;
  return {x[0] * x[1], make_window(op, in, k, ceil_mode)};
}

Shape pool_out_shape(const Shape& x, const Window& w) {
  Shape s{x[0], x[1]};
  s.insert(s.end(), w.out.begin(), w.out.end());
  return s;
}

// Calls f(out_index, valid input offsets in window order, number of window positions inside the
// padded input) for every output position of one plane.
template <class F>
void for_each_window(const Window& w, F&& f) {
  const std::size_t r = w.rank();
  const auto in_st = strides_of(w.in);
  std::vector<std::int64_t> o(r, 0), k(r, 0), valid;
  valid.reserve(static_cast<std::size_t>(w.kernel_numel()));
  const std::int64_t n_out = w.out_numel(), n_k = w.kernel_numel();
  for (std::int64_t oi = 0; oi < n_out; ++oi) {
    valid.clear();
    std::int64_t padded = 0;
    std::fill(k.begin(), k.end(), 0);
    for (std::int64_t ki = 0; ki < n_k; ++ki) {
      bool inside = true, in_pad = true;
      std::int64_t off = 0;
      for (std::size_t d = 0; d < r; ++d) {
        const std::int64_t p = o[d] * w.stride[d] - w.pad_begin[d] + k[d] * w.dilation[d];
        inside = inside && p >= 0 && p < w.in[d];
        in_pad = in_pad && p >= -w.pad_begin[d] && p < w.in[d] + w.pad_end[d];
        off += p * in_st[d];
      }
      if (inside) valid.push_back(off);
      if (in_pad) ++padded;
      for (std::size_t d = r; d-- > 0;) {
        if (++k[d] < w.kernel[d]) break;
        k[d] = 0;
      }
    }
    f(oi, valid, padded);
    for (std::size_t d = r; d-- > 0;) {
      if (++o[d] < w.out[d]) break;
      o[d] = 0;
    }
  }
}

// --- MaxPool -------------------------------------------------------------------------------------

std::vector<TensorDesc> infer_maxpool(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_outputs(op, 1, 2);
  if (in[0].dtype != DType::I8 && in[0].dtype != DType::U8) expect_float(op, in[0], "input X");
  const PoolGeom g = pool_geom(op, in[0].shape);
  std::vector<TensorDesc> out{with_shape(in[0], pool_out_shape(in[0].shape, g.win))};
  if (op.outputs.size() == 2) out.push_back(TensorDesc{DType::I64, out[0].shape, Format::ND});
  return out;
}

// Max with NaN propagation: the first NaN of a window wins, as numpy.max does.
template <class T> bool beats(T v, T best) {
  if constexpr (std::is_integral_v<T>) return v > best;
  else return (std::isnan(v) && !std::isnan(best)) || v > best;
}

// Offset of spatial offset `off` (row-major) under storage_order 1 (column-major spatial layout).
std::int64_t column_major(const Window& w, std::int64_t off) {
  std::int64_t res = 0, mul = 1;
  const auto st = strides_of(w.in);
  for (std::size_t d = 0; d < w.rank(); ++d) {
    res += (off / st[d]) % w.in[d] * mul;
    mul *= w.in[d];
  }
  return res;
}

template <class T> void maxpool_ref(const Op& op, Ins in, Outs out) {
  const PoolGeom g = pool_geom(op, in[0]->shape());
  const bool col_major = op.attr_int("storage_order", 0) != 0;
  const std::int64_t plane_in = g.win.in_numel(), plane_out = g.win.out_numel();
  auto x = cdata<T>(in[0]);
  auto y = mdata<T>(out[0]);
  std::int64_t* idx = out.size() > 1 ? mdata<std::int64_t>(out[1]).data() : nullptr;
  for (std::int64_t p = 0; p < g.planes; ++p)
    for_each_window(g.win, [&](std::int64_t oi, const std::vector<std::int64_t>& valid, std::int64_t) {
      T best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
      std::int64_t arg = valid.empty() ? 0 : valid[0];
      for (std::int64_t off : valid)
        if (beats(x[p * plane_in + off], best)) {
          best = x[p * plane_in + off];
          arg = off;
        }
      y[p * plane_out + oi] = best;
      if (idx) idx[p * plane_out + oi] = p * plane_in + (col_major ? column_major(g.win, arg) : arg);
    });
}

// MaxPoolGrad(dY, X) -> dX: dY goes to the first maximum of each window.
template <class T> void maxpool_grad_ref(const Op& op, Ins in, Outs out) {
  const PoolGeom g = pool_geom(op, in[1]->shape());
  const std::int64_t plane_in = g.win.in_numel(), plane_out = g.win.out_numel();
  auto dy = cdata<T>(in[0]);
  auto x = cdata<T>(in[1]);
  auto dx = mdata<T>(out[0]);
  for (std::int64_t p = 0; p < g.planes; ++p)
    for_each_window(g.win, [&](std::int64_t oi, const std::vector<std::int64_t>& valid, std::int64_t) {
      if (valid.empty()) return;
      std::int64_t arg = valid[0];
      for (std::int64_t off : valid)
        if (beats(x[p * plane_in + off], x[p * plane_in + arg])) arg = off;
      dx[p * plane_in + arg] += dy[p * plane_out + oi];
    });
}

std::vector<TensorDesc> infer_maxpool_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  const PoolGeom g = pool_geom(op, in[1].shape);
  if (in[0].shape != pool_out_shape(in[1].shape, g.win))
    fail(op, "dY has shape {}, expected {}", shape_str(in[0].shape), shape_str(pool_out_shape(in[1].shape, g.win)));
  return {with_shape(in[0], in[1].shape)};
}

void maxpool_grad(GradBuilder& b, const Op& op) {
  if (op.outputs.size() > 1 && !b.dy(op, 1).empty()) fail(op, "the Indices output is not differentiable");
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "MaxPoolGrad", {b.dy(op), op.inputs[0]}, {b.dx(op, 0)}, op.attrs);
}

// --- AveragePool ---------------------------------------------------------------------------------

std::vector<TensorDesc> infer_avgpool(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  return {with_shape(in[0], pool_out_shape(in[0].shape, pool_geom(op, in[0].shape).win))};
}

std::int64_t avg_count(const Op& op, const std::vector<std::int64_t>& valid, std::int64_t padded) {
  return op.attr_int("count_include_pad", 0) != 0 ? padded : static_cast<std::int64_t>(valid.size());
}

template <class T> void avgpool_ref(const Op& op, Ins in, Outs out) {
  const PoolGeom g = pool_geom(op, in[0]->shape());
  const std::int64_t plane_in = g.win.in_numel(), plane_out = g.win.out_numel();
  auto x = cdata<T>(in[0]);
  auto y = mdata<T>(out[0]);
  for (std::int64_t p = 0; p < g.planes; ++p)
    for_each_window(g.win, [&](std::int64_t oi, const std::vector<std::int64_t>& valid, std::int64_t padded) {
      double s = 0;
      for (std::int64_t off : valid) s += x[p * plane_in + off];
      const std::int64_t cnt = avg_count(op, valid, padded);
      y[p * plane_out + oi] = cnt > 0 ? static_cast<T>(s / static_cast<double>(cnt)) : T(0);
    });
}

// AveragePoolGrad(dY; input_shape) -> dX.
template <class T> void avgpool_grad_ref(const Op& op, Ins in, Outs out) {
  const PoolGeom g = pool_geom(op, op.attr_ints("input_shape"));
  const std::int64_t plane_in = g.win.in_numel(), plane_out = g.win.out_numel();
  auto dy = cdata<T>(in[0]);
  auto dx = mdata<T>(out[0]);
  for (std::int64_t p = 0; p < g.planes; ++p)
    for_each_window(g.win, [&](std::int64_t oi, const std::vector<std::int64_t>& valid, std::int64_t padded) {
      const std::int64_t cnt = avg_count(op, valid, padded);
      if (cnt == 0) return;
      const T share = dy[p * plane_out + oi] / static_cast<T>(cnt);
      for (std::int64_t off : valid) dx[p * plane_in + off] += share;
    });
}

std::vector<TensorDesc> infer_avgpool_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input dY");
  const Shape xs = op.attr_ints("input_shape");
  const Shape ys = pool_out_shape(xs, pool_geom(op, xs).win);
  if (in[0].shape != ys) fail(op, "dY has shape {}, expected {}", shape_str(in[0].shape), shape_str(ys));
  return {with_shape(in[0], xs)};
}

void avgpool_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  Attrs a = op.attrs;
  a["input_shape"] = b.desc(op.inputs[0]).shape;
  b.emit(op, "", "AveragePoolGrad", {b.dy(op)}, {b.dx(op, 0)}, std::move(a));
}

// --- GlobalAveragePool ---------------------------------------------------------------------------

std::vector<TensorDesc> infer_global_avgpool(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  if (in[0].shape.size() < 3) fail(op, "input X must be [N, C, D1...], got {}", shape_str(in[0].shape));
  Shape s = in[0].shape;
  std::fill(s.begin() + 2, s.end(), 1);
  return {with_shape(in[0], s)};
}

template <class T> void global_avgpool_ref(const Op&, Ins in, Outs out) {
  const Shape& xs = in[0]->shape();
  const std::int64_t planes = xs[0] * xs[1], plane = prod(xs, 2, xs.size());
  auto x = cdata<T>(in[0]);
  auto y = mdata<T>(out[0]);
  for (std::int64_t p = 0; p < planes; ++p) {
    double s = 0;
    for (std::int64_t i = 0; i < plane; ++i) s += x[p * plane + i];
    y[p] = static_cast<T>(s / static_cast<double>(plane));
  }
}

void global_avgpool_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  const Shape xs = b.desc(op.inputs[0]).shape;
  const std::string scaled = GradBuilder::temp(op, "scale");
  b.emit(op, "scale", "Scale", {b.dy(op)}, {scaled}, {{"alpha", 1.0 / static_cast<double>(prod(xs, 2, xs.size()))}});
  b.emit(op, "", "Expand", {scaled}, {b.dx(op, 0)}, {{"shape", xs}});
}

std::vector<AttrSpec> maxpool_attrs() {
  std::vector<AttrSpec> a = window_attrs(true);
  a.push_back(attr_int("ceil_mode", 0, "1: round output sizes up"));
  a.push_back(attr_int("storage_order", 0, "layout of the Indices output: 0 row-major, 1 column-major"));
  return a;
}

std::vector<AttrSpec> avgpool_attrs() {
  std::vector<AttrSpec> a = window_attrs(true);
  a.push_back(attr_int("ceil_mode", 0, "1: round output sizes up"));
  a.push_back(attr_int("count_include_pad", 0, "1: padding positions count in the divisor"));
  return a;
}

OpDef pool_def(std::string type, std::string doc, std::vector<AttrSpec> attrs) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.attrs = std::move(attrs);
  d.attrs[1].required = true;  // kernel_shape
  d.attrs[1].default_value.reset();
  d.input_names = {"X"};
  d.output_names = {"Y"};
  return d;
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  OpDef mp = pool_def("MaxPool", "max over sliding windows (ONNX MaxPool; optional flat Indices output)",
                      maxpool_attrs());
  mp.num_outputs = -1;
  mp.min_outputs = 1;
  mp.max_outputs = 2;
  mp.output_names = {"Y", "Indices?"};
  mp.infer = infer_maxpool;
  mp.reference = [](const Op& op, Ins in, Outs out, RefPrecision p) {
    if (in[0]->dtype() == DType::U8) maxpool_ref<std::uint8_t>(op, in, out);  // quantized activations
    else if (in[0]->dtype() == DType::I8) maxpool_ref<std::int8_t>(op, in, out);
    else typed(maxpool_ref<float>, maxpool_ref<double>)(op, in, out, p);
  };
  mp.gradient = maxpool_grad;
  r.add(std::move(mp));

  OpDef mpg = pool_def("MaxPoolGrad", "dX of MaxPool: dY routed to the first maximum of each window", maxpool_attrs());
  mpg.min_inputs = mpg.max_inputs = 2;
  mpg.input_names = {"dY", "X"};
  mpg.output_names = {"dX"};
  mpg.backward = true;
  mpg.infer = infer_maxpool_grad;
  mpg.reference = typed(maxpool_grad_ref<float>, maxpool_grad_ref<double>);
  r.add(std::move(mpg));

  OpDef ap = pool_def("AveragePool", "mean over sliding windows (ONNX AveragePool)", avgpool_attrs());
  ap.aliases = {"AvgPool"};
  ap.infer = infer_avgpool;
  ap.reference = typed(avgpool_ref<float>, avgpool_ref<double>);
  ap.gradient = avgpool_grad;
  r.add(std::move(ap));

  OpDef apg = pool_def("AveragePoolGrad", "dX of AveragePool: dY spread evenly over each window", avgpool_attrs());
  apg.attrs.push_back(attr_nodefault("input_shape", true, "shape of the forward input X"));
  apg.input_names = {"dY"};
  apg.output_names = {"dX"};
  apg.backward = true;
  apg.infer = infer_avgpool_grad;
  apg.reference = typed(avgpool_grad_ref<float>, avgpool_grad_ref<double>);
  r.add(std::move(apg));

  OpDef gap;
  gap.type = "GlobalAveragePool";
  gap.doc = "mean over all spatial dimensions, keeping them as size 1";
  gap.input_names = {"X"};
  gap.output_names = {"Y"};
  gap.infer = infer_global_avgpool;
  gap.reference = typed(global_avgpool_ref<float>, global_avgpool_ref<double>);
  gap.gradient = global_avgpool_grad;
  r.add(std::move(gap));
}

}  // namespace probelab::graph::ops
