// Reductions (ONNX ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceSumSquare, ReduceL1,
// ReduceL2, ReduceLogSum, ReduceLogSumExp; ArgMax, ArgMin) and ReduceGrad (ONNX semantics: axes, keepdims, noop_with_empty_axes; the axes input of
// opset 13/18 is the `axes` attribute here).
#include <cmath>
#include <limits>
#include <map>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

struct ReduceSpec {
  Shape keep;  // output shape with reduced dims kept as 1
  Shape out;   // output shape honouring keepdims
  std::int64_t count = 1;  // elements reduced into each output element
};

ReduceSpec reduce_spec(const Op& op, const Shape& in) {
  const AttrReader at(op);
  const std::vector<std::int64_t> axes = at.ints("axes");
  const bool keepdims = at.i("keepdims") != 0;
  std::vector<bool> red(in.size(), axes.empty() && at.i("noop_with_empty_axes") == 0);
  for (std::int64_t a : axes) {
    const auto ax = static_cast<std::size_t>(norm_axis(op, a, static_cast<std::int64_t>(in.size()), "reduce axis"));
    if (red[ax]) fail(op, "axis {} is listed twice", a);
    red[ax] = true;
  }
  ReduceSpec s;
  for (std::size_t d = 0; d < in.size(); ++d) {
    s.keep.push_back(red[d] ? 1 : in[d]);
    if (red[d]) s.count *= in[d];
    if (!red[d] || keepdims) s.out.push_back(s.keep.back());
  }
  return s;
}

std::vector<TensorDesc> infer_reduce(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  if (in[0].dtype == DType::Bool) fail(op, "input data must be a float or integer tensor, got bool");
  return {TensorDesc{in[0].dtype, reduce_spec(op, in[0].shape).out, Format::ND}};
}

// How one reduction combines the elements: the accumulator starts at init(), add() folds an
// element in, finish() gives the result from the accumulator and the element count; d() is the
// derivative of the result with respect to one element x given the result y (ReduceGrad).
enum class Red { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp };

double red_init(Red r) {
  switch (r) {
    case Red::Max: return -std::numeric_limits<double>::infinity();
    case Red::Min: return std::numeric_limits<double>::infinity();
    case Red::Prod: return 1.0;
    default: return 0.0;
  }
}

// LogSumExp folds against the running maximum held separately (see reduce_ref).
double red_add(Red r, double acc, double x) {
  switch (r) {
    case Red::Max: return std::isnan(x) || x > acc ? x : acc;
    case Red::Min: return std::isnan(x) || x < acc ? x : acc;
    case Red::Prod: return acc * x;
    case Red::SumSquare:
    case Red::L2: return acc + x * x;
    case Red::L1: return acc + std::fabs(x);
    default: return acc + x;
  }
}

double red_finish(Red r, double acc, std::int64_t count) {
  switch (r) {
    case Red::Mean: return count ? acc / static_cast<double>(count) : 0.0;
    case Red::L2: return std::sqrt(acc);
    case Red::LogSum: return num::log(acc);
    default: return acc;
  }
}

template <class T> T red_grad(Red r, T x, T y, std::int64_t count) {
  switch (r) {
    case Red::Sum: return T(1);
    case Red::Mean: return T(1) / static_cast<T>(std::max<std::int64_t>(count, 1));
    case Red::Max:
    case Red::Min: return x == y ? T(1) : T(0);
    case Red::Prod: return x != T(0) ? y / x : T(0);
    case Red::SumSquare: return T(2) * x;
    case Red::L1: return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
    case Red::L2: return y != T(0) ? x / y : T(0);
    case Red::LogSum: return num::exp(-y);
    case Red::LogSumExp: return num::exp(x - y);
  }
  return T(0);
}

Red red_of(const Op& op, const std::string& type) {
  static const std::map<std::string, Red> kinds = {
      {"ReduceSum", Red::Sum},          {"ReduceMean", Red::Mean}, {"ReduceMax", Red::Max},
      {"ReduceMin", Red::Min},          {"ReduceProd", Red::Prod}, {"ReduceSumSquare", Red::SumSquare},
      {"ReduceL1", Red::L1},            {"ReduceL2", Red::L2},     {"ReduceLogSum", Red::LogSum},
      {"ReduceLogSumExp", Red::LogSumExp}};
  auto it = kinds.find(type);
  if (it == kinds.end()) fail(op, "'{}' is not a reduction", type);
  return it->second;
}

template <class T> void reduce_ref(const Op& op, Ins in, Outs out) {
  const Shape& xs = in[0]->shape();
  const ReduceSpec s = reduce_spec(op, xs);
  const Red r = red_of(op, op.type);
  const std::vector<double> x = in[0]->to_f64();
  const std::size_t n_out = static_cast<std::size_t>(numel(s.out));
  std::vector<double> acc(n_out, red_init(r));
  if (r == Red::LogSumExp) {
    std::vector<double> mx(n_out, -std::numeric_limits<double>::infinity());
    for_each_broadcast(xs, xs, s.keep, [&](std::int64_t ox, std::int64_t oy, std::int64_t) {
      mx[static_cast<std::size_t>(oy)] = std::max(mx[static_cast<std::size_t>(oy)], x[static_cast<std::size_t>(ox)]);
    });
    for_each_broadcast(xs, xs, s.keep, [&](std::int64_t ox, std::int64_t oy, std::int64_t) {
      const auto k = static_cast<std::size_t>(oy);
      acc[k] += num::exp(x[static_cast<std::size_t>(ox)] - mx[k]);
    });
    for (std::size_t i = 0; i < n_out; ++i) acc[i] = std::isinf(mx[i]) ? mx[i] : mx[i] + num::log(acc[i]);
  } else {
    for_each_broadcast(xs, xs, s.keep, [&](std::int64_t ox, std::int64_t oy, std::int64_t) {
      const auto k = static_cast<std::size_t>(oy);
      acc[k] = red_add(r, acc[k], x[static_cast<std::size_t>(ox)]);
    });
  }
  std::vector<double> v(n_out);
  for (std::size_t i = 0; i < n_out; ++i) v[i] = red_finish(r, acc[i], s.count);
  out[0] = Tensor::from_f64(out[0].shape(), v, out[0].dtype());
}

// ReduceGrad(dY, X, Y; of, axes, keepdims, noop_with_empty_axes) -> dX = dY * dReduce/dX.
std::vector<TensorDesc> infer_reduce_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 3);
  expect_float(op, in[0], "input dY");
  Op fwd = op;
  fwd.type = op.attr_str("of");
  fwd.attrs.erase("of");
  const ReduceSpec s = reduce_spec(fwd, in[1].shape);
  if (in[0].shape != s.out || in[2].shape != s.out)
    fail(op, "dY {} and Y {} must have the reduced shape {}", shape_str(in[0].shape), shape_str(in[2].shape),
         shape_str(s.out));
  return {TensorDesc{in[0].dtype, in[1].shape, Format::ND}};
}

template <class T> void reduce_grad_ref(const Op& op, Ins in, Outs out) {
  Op fwd = op;
  fwd.type = op.attr_str("of");
  fwd.attrs.erase("of");
  const Shape& xs = in[1]->shape();
  const ReduceSpec s = reduce_spec(fwd, xs);
  const Red r = red_of(op, fwd.type);
  auto dy = cdata<T>(in[0]), x = cdata<T>(in[1]), y = cdata<T>(in[2]);
  auto dx = mdata<T>(out[0]);
  if (r == Red::Max || r == Red::Min) {
    // The elements equal to the extreme share its gradient evenly (PyTorch's amax/amin): a
    // maximum over copies of one value has the derivative 1 with respect to that value.
    std::vector<std::int64_t> ties(y.size(), 0);
    for_each_broadcast(xs, xs, s.keep, [&](std::int64_t ox, std::int64_t oy, std::int64_t) {
      ties[static_cast<std::size_t>(oy)] += x[static_cast<std::size_t>(ox)] == y[static_cast<std::size_t>(oy)] ? 1 : 0;
    });
    for_each_broadcast(xs, xs, s.keep, [&](std::int64_t ox, std::int64_t oy, std::int64_t) {
      const auto i = static_cast<std::size_t>(ox), k = static_cast<std::size_t>(oy);
      dx[i] = dy[k] * (x[i] == y[k] ? T(1) / static_cast<T>(ties[k]) : T(0));  // a NaN dY stays NaN
    });
    return;
  }
  for_each_broadcast(xs, xs, s.keep, [&](std::int64_t ox, std::int64_t oy, std::int64_t) {
    const auto i = static_cast<std::size_t>(ox), k = static_cast<std::size_t>(oy);
    dx[i] = dy[k] * red_grad<T>(r, x[i], y[k], s.count);
  });
}

void reduce_grad_generic(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  Attrs a = op.attrs;
  a["of"] = op.type;
  b.emit(op, "", "ReduceGrad", {b.dy(op), op.inputs[0], op.outputs[0]}, {b.dx(op, 0)}, std::move(a));
}

// --- ArgMax / ArgMin ------------------------------------------------------------------------------

std::vector<TensorDesc> infer_arg(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  const Shape& x = in[0].shape;
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(x.size())));
  Shape s;
  for (std::size_t d = 0; d < x.size(); ++d)
    if (d != axis) s.push_back(x[d]);
    else if (AttrReader(op).i("keepdims") != 0) s.push_back(1);
  return {TensorDesc{DType::I64, s, Format::ND}};
}

template <bool Max> void arg_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape& x = in[0]->shape();
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(x.size())));
  const bool last = AttrReader(op).i("select_last_index") != 0;
  const std::int64_t outer = prod(x, 0, axis), n = x[axis], inner = prod(x, axis + 1, x.size());
  const std::vector<double> v = in[0]->to_f64();
  auto y = out[0].data<std::int64_t>();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < n; ++k) {
        const double a = v[static_cast<std::size_t>((o * n + k) * inner + i)];
        const double b = v[static_cast<std::size_t>((o * n + best) * inner + i)];
        const bool better = Max ? (a > b || (last && a == b)) : (a < b || (last && a == b));
        if (better) best = k;
      }
      y[static_cast<std::size_t>(o * inner + i)] = best;
    }
}

template <bool Mean> void reduce_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  const Shape xs = b.desc(op.inputs[0]).shape;
  const ReduceSpec s = reduce_spec(op, xs);
  std::string g = b.dy(op);
  if (s.out != s.keep) {
    const std::string t = GradBuilder::temp(op, "keepdims");
    b.emit(op, "keepdims", "Reshape", {g}, {t}, {{"shape", s.keep}, {"allowzero", std::int64_t{1}}});
    g = t;
  }
  if (Mean) {
    const std::string t = GradBuilder::temp(op, "scale");
    b.emit(op, "scale", "Scale", {g}, {t}, {{"alpha", 1.0 / static_cast<double>(std::max<std::int64_t>(s.count, 1))}});
    g = t;
  }
  b.emit(op, "", "Expand", {g}, {b.dx(op, 0)}, {{"shape", xs}});
}

// --- GlobalMaxPool: ReduceMax over the spatial axes of [N, C, D...], kept as size 1 ---------------

Op as_reduce_max(const Op& op, std::size_t rank) {
  if (rank < 3) fail(op, "input X must be [N, C, D...] with at least one spatial dimension, got rank {}", rank);
  Op r = op;
  r.type = "ReduceMax";
  std::vector<std::int64_t> axes;
  for (std::size_t d = 2; d < rank; ++d) axes.push_back(static_cast<std::int64_t>(d));
  r.attrs = {{"axes", axes}, {"keepdims", std::int64_t{1}}};
  return r;
}

std::vector<TensorDesc> infer_global_max_pool(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  return infer_reduce(as_reduce_max(op, in[0].shape.size()), in);
}

template <class T> void global_max_pool_ref(const Op& op, Ins in, Outs out) {
  reduce_ref<T>(as_reduce_max(op, in[0]->shape().size()), in, out);
}

void global_max_pool_grad(GradBuilder& b, const Op& op) {
  reduce_grad_generic(b, as_reduce_max(op, b.desc(op.inputs[0]).shape.size()));
}

OpDef reduce_def(std::string type, std::string doc, decltype(OpDef::reference) ref, decltype(OpDef::gradient) grad) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.attrs = {attr_ints("axes", {}, "axes to reduce (negative counts from the end); empty: all axes"),
             attr_int("keepdims", 1, "1: keep reduced axes as size 1"),
             attr_int("noop_with_empty_axes", 0, "1: empty axes means no reduction")};
  d.input_names = {"data"};
  d.output_names = {"reduced"};
  d.infer = infer_reduce;
  d.reference = std::move(ref);
  d.gradient = std::move(grad);
  return d;
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  const auto ref = typed(reduce_ref<float>, reduce_ref<double>);
  r.add(reduce_def("ReduceSum", "sum over `axes` (ONNX ReduceSum)", ref, reduce_grad<false>));
  r.add(reduce_def("ReduceMean", "mean over `axes` (ONNX ReduceMean)", ref, reduce_grad<true>));
  r.add(reduce_def("ReduceMax", "maximum over `axes` (NaN propagates; equal maxima share the gradient evenly)", ref, reduce_grad_generic));
  r.add(reduce_def("ReduceMin", "minimum over `axes` (NaN propagates; equal minima share the gradient evenly)", ref, reduce_grad_generic));
  r.add(reduce_def("ReduceProd", "product over `axes`", ref, reduce_grad_generic));
  r.add(reduce_def("ReduceSumSquare", "sum of squares over `axes`", ref, reduce_grad_generic));
  r.add(reduce_def("ReduceL1", "sum of absolute values over `axes`", ref, reduce_grad_generic));
  r.add(reduce_def("ReduceL2", "square root of the sum of squares over `axes`", ref, reduce_grad_generic));
  r.add(reduce_def("ReduceLogSum", "ln of the sum over `axes`", ref, reduce_grad_generic));
  r.add(reduce_def("ReduceLogSumExp", "ln of the sum of exp over `axes` (max-shifted)", ref, reduce_grad_generic));

  OpDef gmp;
  gmp.type = "GlobalMaxPool";
  gmp.doc = "maximum over the spatial dimensions of [N, C, D...] (ONNX GlobalMaxPool; NaN propagates; equal maxima share the gradient evenly)";
  gmp.input_names = {"X"};
  gmp.output_names = {"Y"};
  gmp.infer = infer_global_max_pool;
  gmp.reference = typed(global_max_pool_ref<float>, global_max_pool_ref<double>);
  gmp.gradient = global_max_pool_grad;
  r.add(std::move(gmp));

  OpDef g = reduce_def("ReduceGrad", "dX of a reduction `of`: dY broadcast back times dReduce/dX", typed(reduce_grad_ref<float>, reduce_grad_ref<double>), {});
  g.attrs.push_back(attr_nodefault("of", true, "forward reduction type"));
  g.min_inputs = g.max_inputs = 3;
  g.input_names = {"dY", "X", "Y"};
  g.output_names = {"dX"};
  g.backward = true;
  g.infer = infer_reduce_grad;
  r.add(std::move(g));

  for (const bool mx : {true, false}) {
    OpDef a;
    a.type = mx ? "ArgMax" : "ArgMin";
    a.doc = mx ? "index of the maximum along `axis` (int64)" : "index of the minimum along `axis` (int64)";
    a.attrs = {attr_int("axis", 0, "axis searched"), attr_int("keepdims", 1, "1: keep the axis as size 1"),
               attr_int("select_last_index", 0, "1: the last of equal extremes")};
    a.input_names = {"data"};
    a.output_names = {"reduced"};
    a.infer = infer_arg;
    a.reference = mx ? arg_ref<true> : arg_ref<false>;
    r.add(std::move(a));
  }
}

}  // namespace probelab::graph::ops
