// Convolution over 1 to 3 spatial dimensions (ONNX Conv; NCHW for 2-D: strides, pads, dilations,
// group, auto_pad, optional bias) and its backward ops ConvGradInput / ConvGradWeight, computed as im2col + GEMM per image and group.
#include <Eigen/Core>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"
#include "graph/ops/spatial.h"

namespace probelab::graph::ops {
namespace {

template <class T> using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using CMap = Eigen::Map<const Mat<T>>;
template <class T> using MMap = Eigen::Map<Mat<T>>;

// Geometry of one convolution: X [N, C, D...], W [M, C/group, k...], Y [N, M, o...] with 1 to 3
// spatial dimensions D.
struct ConvGeom {
  std::int64_t n, c, m, group;
  Window win;
  std::vector<std::int64_t> taps;  // tap_table(win)
  std::int64_t cg() const { return c / group; }
  std::int64_t mg() const { return m / group; }
  std::int64_t rows() const { return cg() * win.kernel_numel(); }  // im2col rows per group
  Shape y_shape() const {
    Shape s{n, m};
    s.insert(s.end(), win.out.begin(), win.out.end());
    return s;
  }
};

ConvGeom conv_geom(const Op& op, const Shape& x, const Shape& w, bool with_taps = true) {
  if (x.size() < 3 || x.size() > 5)
    fail(op, "input X must be [N, C, D...] with 1 to 3 spatial dimensions (NCHW for 2-D), got {}", shape_str(x));
  if (w.size() != x.size())
    fail(op, "weight W must be [M, C/group, k...] of the same rank as X {}, got {}", shape_str(x), shape_str(w));
  ConvGeom g{x[0], x[1], w[0], AttrReader(op).i("group"), {}, {}};
  if (g.group < 1 || g.c % g.group != 0 || g.m % g.group != 0)
    fail(op, "group {} must divide the input channels {} and output channels {}", g.group, g.c, g.m);
  if (w[1] != g.cg())
    fail(op, "weight W {} must have C/group = {} input channels (X {} with group {})", shape_str(w), g.cg(),
         shape_str(x), g.group);
  const std::vector<std::int64_t> wk(w.begin() + 2, w.end());
  const std::vector<std::int64_t> k = kernel_shape(op, wk.size(), wk);
  if (k != wk) fail(op, "kernel_shape [{}] disagrees with weight W {}", fmt::join(k, ", "), shape_str(w));
  g.win = make_window(op, {x.begin() + 2, x.end()}, k, false);
  if (with_taps) g.taps = tap_table(g.win);
  return g;
}

std::vector<TensorDesc> infer_conv(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 3);
  expect_float(op, in[0], "input X");
  expect_same_dtype(op, in[0], in[1], "inputs X and W");
  const ConvGeom g = conv_geom(op, in[0].shape, in[1].shape, false);
  if (has_input(op, 2)) expect_same_dtype(op, in[0], in[2], "inputs X and B");
  if (has_input(op, 2) && in[2].shape != Shape{g.m})
    fail(op, "bias B must have shape [{}], got {}", g.m, shape_str(in[2].shape));
  return {TensorDesc{in[0].dtype, g.y_shape(), in[0].format == Format::NCHW ? Format::NCHW : Format::ND}};
}

// Copies the receptive fields of image `x` ([C, D...]) of group `grp` into cols [rows, out_numel].
template <class T>
void im2col(const ConvGeom& g, const T* x, std::int64_t grp, T* cols) {
  const std::int64_t plane = g.win.in_numel(), n_k = g.win.kernel_numel(), n_o = g.win.out_numel();
  for (std::int64_t c = 0; c < g.cg(); ++c) {
    const T* xc = x + (grp * g.cg() + c) * plane;
    for (std::int64_t ki = 0; ki < n_k; ++ki) {
      const std::int64_t* tap = g.taps.data() + ki * n_o;
      T* row = cols + (c * n_k + ki) * n_o;
      for (std::int64_t oi = 0; oi < n_o; ++oi) row[oi] = tap[oi] >= 0 ? xc[tap[oi]] : T(0);
    }
  }
}

// Adds cols [rows, out_numel] back into the image gradient `dx` ([C, D...]) for group `grp`.
template <class T>
void col2im(const ConvGeom& g, const T* cols, std::int64_t grp, T* dx) {
  const std::int64_t plane = g.win.in_numel(), n_k = g.win.kernel_numel(), n_o = g.win.out_numel();
  for (std::int64_t c = 0; c < g.cg(); ++c) {
    T* dxc = dx + (grp * g.cg() + c) * plane;
    for (std::int64_t ki = 0; ki < n_k; ++ki) {
      const std::int64_t* tap = g.taps.data() + ki * n_o;
      const T* row = cols + (c * n_k + ki) * n_o;
      for (std::int64_t oi = 0; oi < n_o; ++oi)
        if (tap[oi] >= 0) dxc[tap[oi]] += row[oi];
    }
  }
}

template <class T> void conv_ref(const Op& op, Ins in, Outs out) {
  const ConvGeom g = conv_geom(op, in[0]->shape(), in[1]->shape());
  const std::int64_t chw = g.c * g.win.in_numel(), ohw = g.win.out_numel();
  const T* x = cdata<T>(in[0]).data();
  const T* wt = cdata<T>(in[1]).data();
  T* y = mdata<T>(out[0]).data();
  std::vector<T> cols(static_cast<std::size_t>(g.rows() * ohw));
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t grp = 0; grp < g.group; ++grp) {
      im2col(g, x + n * chw, grp, cols.data());
      MMap<T>(y + (n * g.m + grp * g.mg()) * ohw, g.mg(), ohw).noalias() =
          CMap<T>(wt + grp * g.mg() * g.rows(), g.mg(), g.rows()) * CMap<T>(cols.data(), g.rows(), ohw);
    }
  if (in.size() > 2 && in[2]) {
    auto b = cdata<T>(in[2]);
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t m = 0; m < g.m; ++m) {
        T* ym = y + (n * g.m + m) * ohw;
        for (std::int64_t p = 0; p < ohw; ++p) ym[p] += b[m];
      }
  }
}

// ConvGradInput(dY, W; input_shape) -> dX.
template <class T> void conv_grad_input_ref(const Op& op, Ins in, Outs out) {
  const ConvGeom g = conv_geom(op, op.attr_ints("input_shape"), in[1]->shape());
  const std::int64_t chw = g.c * g.win.in_numel(), ohw = g.win.out_numel();
  const T* dy = cdata<T>(in[0]).data();
  const T* wt = cdata<T>(in[1]).data();
  T* dx = mdata<T>(out[0]).data();
  Mat<T> cols(g.rows(), ohw);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t grp = 0; grp < g.group; ++grp) {
      cols.noalias() = CMap<T>(wt + grp * g.mg() * g.rows(), g.mg(), g.rows()).transpose() *
                       CMap<T>(dy + (n * g.m + grp * g.mg()) * ohw, g.mg(), ohw);
      col2im(g, cols.data(), grp, dx + n * chw);
    }
}

// ConvGradWeight(dY, X; weight_shape) -> dW.
template <class T> void conv_grad_weight_ref(const Op& op, Ins in, Outs out) {
  const ConvGeom g = conv_geom(op, in[1]->shape(), op.attr_ints("weight_shape"));
  const std::int64_t chw = g.c * g.win.in_numel(), ohw = g.win.out_numel();
  const T* dy = cdata<T>(in[0]).data();
  const T* x = cdata<T>(in[1]).data();
  T* dw = mdata<T>(out[0]).data();
  std::vector<T> cols(static_cast<std::size_t>(g.rows() * ohw));
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t grp = 0; grp < g.group; ++grp) {
      im2col(g, x + n * chw, grp, cols.data());
      MMap<T>(dw + grp * g.mg() * g.rows(), g.mg(), g.rows()).noalias() +=
          CMap<T>(dy + (n * g.m + grp * g.mg()) * ohw, g.mg(), ohw) *
          CMap<T>(cols.data(), g.rows(), ohw).transpose();
    }
}

void expect_dy(const Op& op, const TensorDesc& dy, const ConvGeom& g) {
  expect_float(op, dy, "input dY");
  if (dy.shape != g.y_shape()) fail(op, "dY has shape {}, expected {}", shape_str(dy.shape), shape_str(g.y_shape()));
}

std::vector<TensorDesc> infer_conv_grad_input(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  const Shape xs = op.attr_ints("input_shape");
  expect_dy(op, in[0], conv_geom(op, xs, in[1].shape, false));
  return {TensorDesc{in[0].dtype, xs, Format::ND}};
}

std::vector<TensorDesc> infer_conv_grad_weight(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  const Shape ws = op.attr_ints("weight_shape");
  expect_dy(op, in[0], conv_geom(op, in[1].shape, ws, false));
  return {TensorDesc{in[0].dtype, ws, Format::ND}};
}

void conv_grad(GradBuilder& b, const Op& op) {
  const std::string dy = b.dy(op);
  if (b.needs(op, 0)) {
    Attrs a = op.attrs;
    a["input_shape"] = b.desc(op.inputs[0]).shape;
    b.emit(op, "x", "ConvGradInput", {dy, op.inputs[1]}, {b.dx(op, 0)}, std::move(a));
  }
  if (b.needs(op, 1)) {
    Attrs a = op.attrs;
    a["weight_shape"] = b.desc(op.inputs[1]).shape;
    b.emit(op, "w", "ConvGradWeight", {dy, op.inputs[0]}, {b.dx(op, 1)}, std::move(a));
  }
  if (has_input(op, 2) && b.needs(op, 2)) {
    std::vector<std::int64_t> axes{0};
    for (std::size_t d = 2; d < b.desc(op.inputs[0]).shape.size(); ++d) axes.push_back(static_cast<std::int64_t>(d));
    b.emit(op, "b", "ReduceSum", {dy}, {b.dx(op, 2)}, {{"axes", axes}, {"keepdims", std::int64_t{0}}});
  }
}

std::vector<AttrSpec> conv_attrs() {
  std::vector<AttrSpec> a = window_attrs(true);
  a.push_back(attr_int("group", 1, "number of channel groups"));
  return a;
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  OpDef conv;
  conv.type = "Conv";
  conv.aliases = {"Conv2d"};
  conv.doc = "convolution over 1-3 spatial dims, NCHW for 2-D (ONNX Conv): Y = W * X + B";
  conv.min_inputs = 2;
  conv.max_inputs = 3;
  conv.attrs = conv_attrs();
  conv.input_names = {"X", "W", "B?"};
  conv.output_names = {"Y"};
  conv.infer = infer_conv;
  conv.reference = typed(conv_ref<float>, conv_ref<double>);
  conv.gradient = conv_grad;
  r.add(std::move(conv));

  OpDef gi;
  gi.type = "ConvGradInput";
  gi.doc = "dX of Conv from dY and W";
  gi.min_inputs = gi.max_inputs = 2;
  gi.attrs = conv_attrs();
  gi.attrs.push_back(attr_nodefault("input_shape", true, "shape of the forward input X"));
  gi.input_names = {"dY", "W"};
  gi.output_names = {"dX"};
  gi.backward = true;
  gi.infer = infer_conv_grad_input;
  gi.reference = typed(conv_grad_input_ref<float>, conv_grad_input_ref<double>);
  r.add(std::move(gi));

  OpDef gw;
  gw.type = "ConvGradWeight";
  gw.doc = "dW of Conv from dY and X";
  gw.min_inputs = gw.max_inputs = 2;
  gw.attrs = conv_attrs();
  gw.attrs.push_back(attr_nodefault("weight_shape", true, "shape of the forward weight W"));
  gw.input_names = {"dY", "X"};
  gw.output_names = {"dW"};
  gw.backward = true;
  gw.infer = infer_conv_grad_weight;
  gw.reference = typed(conv_grad_weight_ref<float>, conv_grad_weight_ref<double>);
  r.add(std::move(gw));
}

}  // namespace probelab::graph::ops
