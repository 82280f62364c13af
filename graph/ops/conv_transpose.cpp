// ConvTranspose over 1 to 3 spatial dimensions (ONNX semantics: strides, dilations, pads,
// output_padding, output_shape, auto_pad, group, optional bias): per image and group,
// cols = W_g^T @ X[n, g], then col2im adds the columns into Y - the adjoint of Conv. Its gradient
// is a Conv (dX) and a ConvGradWeight (dW) over the mirrored geometry.
#include <Eigen/Core>

#include "graph/autodiff.h"
#include "graph/ops/conv_transpose.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {

ConvTransposeGeom conv_transpose_geom(const Op& op, const Shape& x, const Shape& w) {
  if (x.size() < 3 || x.size() > 5)
    fail(op, "input X must be [N, C, D...] with 1 to 3 spatial dimensions, got {}", shape_str(x));
  if (w.size() != x.size())
    fail(op, "weight W must be [C, M/group, k...] of the same rank as X {}, got {}", shape_str(x), shape_str(w));
  const AttrReader at(op);
  ConvTransposeGeom g;
  g.n = x[0];
  g.c = x[1];
  g.group = at.i("group");
  if (g.group < 1 || g.c % g.group != 0 || w[0] != g.c)
    fail(op, "group {} must divide the input channels {}, and W {} must have {} input channels", g.group, g.c,
         shape_str(w), g.c);
  g.m = w[1] * g.group;
  const std::size_t r = x.size() - 2;
  const std::vector<std::int64_t> wk(w.begin() + 2, w.end());
  const std::vector<std::int64_t> k = kernel_shape(op, r, wk);
  if (k != wk) fail(op, "kernel_shape [{}] disagrees with weight W {}", fmt::join(k, ", "), shape_str(w));
  auto list = [&](const char* name, std::int64_t def) {
    std::vector<std::int64_t> v = op.attr_ints(name, {});
    if (v.empty()) v.assign(r, def);
    if (v.size() != r) fail(op, "{} must have {} entries, got {}", name, r, v.size());
    return v;
  };
  const std::vector<std::int64_t> s = list("strides", 1), d = list("dilations", 1), opad = list("output_padding", 0);
  std::vector<std::int64_t> pads = op.attr_ints("pads", {});
  if (pads.empty()) pads.assign(2 * r, 0);
  if (pads.size() != 2 * r) fail(op, "pads must have {} entries, got {}", 2 * r, pads.size());
  std::vector<std::int64_t> out_shape = op.attr_ints("output_shape", {});
  if (out_shape.size() == r + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  const std::string auto_pad = at.s("auto_pad");
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" && auto_pad != "VALID")
    fail(op, "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got {}", auto_pad);
  if (out_shape.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
    for (std::size_t i = 0; i < r; ++i) out_shape.push_back(x[i + 2] * s[i]);
  if (!out_shape.empty() && out_shape.size() != r)
    fail(op, "output_shape must have {} (or {}) entries, got {}", r, r + 2, out_shape.size());
  Window& win = g.win;
  win.kernel = k;
  win.stride = s;
  win.dilation = d;
  win.out.assign(x.begin() + 2, x.end());  // the positions of X, as Conv's output of the mirrored window
  win.pad_begin.resize(r);
  win.pad_end.resize(r);
  win.in.resize(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t full = s[i] * (x[i + 2] - 1) + opad[i] + (k[i] - 1) * d[i] + 1;
    if (!out_shape.empty()) {
      // ONNX's split of the total padding, with floor division (a negative total, an output
      // larger than the full one, extends the end).
      const std::int64_t total = full - out_shape[i];
      const std::int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      const bool upper = auto_pad == "SAME_UPPER";
      win.pad_begin[i] = upper ? half : total - half;
      win.pad_end[i] = total - win.pad_begin[i];
      win.in[i] = out_shape[i];
    } else {
      win.pad_begin[i] = auto_pad == "VALID" ? 0 : pads[i];
      win.pad_end[i] = auto_pad == "VALID" ? 0 : pads[i + r];
      win.in[i] = full - win.pad_begin[i] - win.pad_end[i];
    }
    if (win.in[i] < 1) fail(op, "output dimension {} would be {}", i, win.in[i]);
  }
  return g;
}

namespace {

template <class T> using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using CMap = Eigen::Map<const Mat<T>>;

std::vector<TensorDesc> infer_conv_transpose(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 3);
  expect_float(op, in[0], "input X");
  expect_same_dtype(op, in[0], in[1], "inputs X and W");
  const ConvTransposeGeom g = conv_transpose_geom(op, in[0].shape, in[1].shape);
  if (has_input(op, 2)) expect_same_dtype(op, in[0], in[2], "inputs X and B");
  if (has_input(op, 2) && in[2].shape != Shape{g.m})
    fail(op, "bias B must have shape [{}], got {}", g.m, shape_str(in[2].shape));
  return {TensorDesc{in[0].dtype, g.y_shape(), Format::ND}};
}

template <class T> void conv_transpose_ref(const Op& op, Ins in, Outs out) {
  const ConvTransposeGeom g = conv_transpose_geom(op, in[0]->shape(), in[1]->shape());
  const std::vector<std::int64_t> taps = tap_table(g.win);
  const std::int64_t P = g.win.out_numel(), plane = g.win.in_numel(), kn = g.win.kernel_numel();
  const std::int64_t cg = g.cg(), mg = g.mg(), R = mg * kn;
  const T* x = cdata<T>(in[0]).data();
  const T* w = cdata<T>(in[1]).data();
  T* y = mdata<T>(out[0]).data();
  Mat<T> cols(R, P);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t grp = 0; grp < g.group; ++grp) {
      cols.noalias() = CMap<T>(w + grp * cg * R, cg, R).transpose() * CMap<T>(x + (n * g.c + grp * cg) * P, cg, P);
      for (std::int64_t c = 0; c < mg; ++c) {
        T* yc = y + (n * g.m + grp * mg + c) * plane;
        for (std::int64_t ki = 0; ki < kn; ++ki) {
          const std::int64_t* tap = taps.data() + ki * P;
          const T* row = cols.data() + (c * kn + ki) * P;
          for (std::int64_t p = 0; p < P; ++p)
            if (tap[p] >= 0) yc[tap[p]] += row[p];
        }
      }
    }
  if (in.size() > 2 && in[2]) {
    auto b = cdata<T>(in[2]);
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t m = 0; m < g.m; ++m)
        for (std::int64_t p = 0; p < plane; ++p) y[(n * g.m + m) * plane + p] += b[static_cast<std::size_t>(m)];
  }
}

// The Conv that ConvTranspose is the input-adjoint of: input Y's positions, output X's.
Attrs mirrored_conv_attrs(const ConvTransposeGeom& g) {
  std::vector<std::int64_t> pads = g.win.pad_begin;
  pads.insert(pads.end(), g.win.pad_end.begin(), g.win.pad_end.end());
  return {{"strides", g.win.stride}, {"dilations", g.win.dilation}, {"pads", pads},
          {"kernel_shape", g.win.kernel}, {"group", g.group}};
}

void conv_transpose_grad(GradBuilder& b, const Op& op) {
  const std::string dy = b.dy(op);
  const Shape xs = b.desc(op.inputs[0]).shape, ws = b.desc(op.inputs[1]).shape;
  const ConvTransposeGeom g = conv_transpose_geom(op, xs, ws);
  for (std::size_t i = 0; i < g.win.rank(); ++i)
    if ((g.win.in[i] + g.win.pad_begin[i] + g.win.pad_end[i] - g.win.dilation[i] * (g.win.kernel[i] - 1) - 1) /
                g.win.stride[i] + 1 != g.win.out[i])
      fail(op, "ConvTranspose with output_padding >= stride is inference only (no gradient)");
  const Attrs conv = mirrored_conv_attrs(g);
  if (b.needs(op, 0)) b.emit(op, "x", "Conv", {dy, op.inputs[1]}, {b.dx(op, 0)}, conv);
  if (b.needs(op, 1)) {
    Attrs a = conv;
    a["weight_shape"] = ws;
    b.emit(op, "w", "ConvGradWeight", {op.inputs[0], dy}, {b.dx(op, 1)}, std::move(a));
  }
  if (has_input(op, 2) && b.needs(op, 2)) {
    std::vector<std::int64_t> axes{0};
    for (std::size_t d = 2; d < xs.size(); ++d) axes.push_back(static_cast<std::int64_t>(d));
    b.emit(op, "b", "ReduceSum", {dy}, {b.dx(op, 2)}, {{"axes", axes}, {"keepdims", std::int64_t{0}}});
  }
}

}  // namespace

void register_conv_transpose_ops(OpRegistry& r) {
  OpDef d;
  d.type = "ConvTranspose";
  d.doc = "transposed convolution over 1-3 spatial dims (ONNX ConvTranspose): the adjoint of Conv plus bias";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = window_attrs(true);
  d.attrs.push_back(attr_int("group", 1, "number of channel groups"));
  d.attrs.push_back(attr_ints("output_padding", {}, "extra size added at the end of each output dimension"));
  d.attrs.push_back(attr_ints("output_shape", {}, "output spatial shape (pads are then derived)"));
  d.input_names = {"X", "W", "B?"};
  d.output_names = {"Y"};
  d.infer = infer_conv_transpose;
  d.reference = typed(conv_transpose_ref<float>, conv_transpose_ref<double>);
  d.gradient = conv_transpose_grad;
  r.add(std::move(d));
}

}  // namespace probelab::graph::ops
