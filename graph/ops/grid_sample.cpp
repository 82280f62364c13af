// GridSample (ONNX opset 16: X [N, C, H, W] sampled at the normalised (x, y) locations of
// grid [N, H_out, W_out, 2]; modes bilinear, nearest, bicubic; padding_mode zeros, border,
// reflection; align_corners) and GridSampleGrad (dX and dgrid), computed as PyTorch's
// grid_sample and its backward compute them. A location whose coordinate is NaN or infinite reads
// NaN in every channel, and its dgrid is NaN: the fault stays visible.
#include <array>
#include <cmath>
#include <limits>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

enum class Mode { Bilinear, Nearest, Bicubic };
enum class Pad { Zeros, Border, Reflection };

struct Params {
  Mode mode;
  Pad pad;
  bool align;
};

Params params(const Op& op) {
  const AttrReader at(op);
  const std::string m = at.s("mode"), p = at.s("padding_mode");
  Params r{};
  if (m == "bilinear") r.mode = Mode::Bilinear;
  else if (m == "nearest") r.mode = Mode::Nearest;
  else if (m == "bicubic") r.mode = Mode::Bicubic;
  else fail(op, "mode must be bilinear, nearest or bicubic, got \"{}\"", m);
  if (p == "zeros") r.pad = Pad::Zeros;
  else if (p == "border") r.pad = Pad::Border;
  else if (p == "reflection") r.pad = Pad::Reflection;
  else fail(op, "padding_mode must be zeros, border or reflection, got \"{}\"", p);
  const std::int64_t a = at.i("align_corners");
  if (a != 0 && a != 1) fail(op, "align_corners must be 0 or 1, got {}", a);
  r.align = a == 1;
  return r;
}

void check_shapes(const Op& op, const Shape& x, const Shape& g) {
  if (x.size() != 4) fail(op, "input X must be [N, C, H, W], got {}", shape_str(x));
  if (g.size() != 4 || g[0] != x[0] || g[3] != 2)
    fail(op, "grid must be [N, H_out, W_out, 2] with N = {} (X's), got {}", x[0], shape_str(g));
}

std::vector<TensorDesc> infer_grid_sample(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input X");
  expect_float(op, in[1], "input grid");
  params(op);
  check_shapes(op, in[0].shape, in[1].shape);
  return {TensorDesc{in[0].dtype, {in[0].shape[0], in[0].shape[1], in[1].shape[1], in[1].shape[2]}, Format::ND}};
}

// One axis of size n: where a normalised coordinate reads, in pixels, and how fast it moves.
struct Axis {
  double n;
  const Params* p;
  double scale() const { return p->align ? (n - 1) / 2 : n / 2; }  // d pixel / d normalised
  double unnormalise(double g) const { return p->align ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2; }
  // Border and reflection move a coordinate into the image (zeros leaves it); *d is multiplied by
  // the derivative of the move (0 where clamped, -1 where mirrored an odd number of times).
  double pad(double c, double* d = nullptr) const {
    if (p->pad == Pad::Zeros) return c;
    if (p->pad == Pad::Reflection) {
      const double lo = p->align ? 0 : -0.5, span = p->align ? n - 1 : n;
      if (span <= 0) {
        if (d) *d = 0;
        return 0;
      }
      const double sign = c < lo ? -1 : 1, dist = std::fabs(c - lo), extra = std::fmod(dist, span);
      const bool even = std::fmod(std::floor(dist / span), 2) == 0;
      c = even ? lo + extra : lo + span - extra;
      if (d) *d *= even ? sign : -sign;
    }
    if (c <= 0 || c >= n - 1) {
      if (d) *d = 0;
      return std::clamp(c, 0.0, n - 1);
    }
    return c;
  }
  bool inside(double i) const { return i >= 0 && i <= n - 1; }
};

// Derivatives of cubic_weights(t, A) with respect to t.
std::array<double, 4> cubic_slopes(double t, double A) {
  auto d1 = [A](double x) { return (3 * (A + 2) * x - 2 * (A + 3)) * x; };   // |x| <= 1
  auto d2 = [A](double x) { return (3 * A * x - 10 * A) * x + 8 * A; };       // 1 < |x| < 2
  return {d2(t + 1), d1(t), -d1(1 - t), -d2(2 - t)};
}

// The taps one output location reads: plane offset, weight, and the weight's derivatives with
// respect to the normalised x and y of the grid.
struct Taps {
  bool finite = false;
  int n = 0;
  std::array<std::int64_t, 16> at{};
  std::array<double, 16> w{}, dwx{}, dwy{};
};

Taps taps_of(const Params& p, const Axis& ax, const Axis& ay, std::int64_t W, double gx, double gy) {
  Taps t;
  double cx = ax.unnormalise(gx), cy = ay.unnormalise(gy);
  t.finite = std::isfinite(cx) && std::isfinite(cy);
  if (!t.finite) return t;
  double sx = ax.scale(), sy = ay.scale();
  // Zero weights count too: a NaN neighbour reads NaN (NaN * 0), as in PyTorch.
  auto add = [&](double ix, double iy, double w, double dwx, double dwy) {
    if (p.mode == Mode::Bicubic) ix = ax.pad(ix), iy = ay.pad(iy);  // each tap padded on its own
    if (!ax.inside(ix) || !ay.inside(iy)) return;
    t.at[t.n] = static_cast<std::int64_t>(iy) * W + static_cast<std::int64_t>(ix);
    t.w[t.n] = w;
    t.dwx[t.n] = dwx * sx;
    t.dwy[t.n++] = dwy * sy;
  };
  if (p.mode == Mode::Bicubic) {
    const double fx = std::floor(cx), fy = std::floor(cy);
    const auto wx = cubic_weights(cx - fx, -0.75), wy = cubic_weights(cy - fy, -0.75);
    const auto vx = cubic_slopes(cx - fx, -0.75), vy = cubic_slopes(cy - fy, -0.75);
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) add(fx - 1 + i, fy - 1 + j, wx[i] * wy[j], vx[i] * wy[j], wx[i] * vy[j]);
    return t;
  }
  cx = ax.pad(cx, &sx), cy = ay.pad(cy, &sy);
  if (p.mode == Mode::Nearest) {
    add(std::nearbyint(cx), std::nearbyint(cy), 1, 0, 0);
    return t;
  }
  const double fx = std::floor(cx), fy = std::floor(cy), tx = cx - fx, ty = cy - fy;
  add(fx, fy, (1 - tx) * (1 - ty), -(1 - ty), -(1 - tx));
  add(fx + 1, fy, tx * (1 - ty), 1 - ty, -tx);
  add(fx, fy + 1, (1 - tx) * ty, -ty, 1 - tx);
  add(fx + 1, fy + 1, tx * ty, ty, tx);
  return t;
}

struct Geom {
  std::int64_t N, C, H, W, Ho, Wo;
};
Geom geom(const Shape& x, const Shape& g) { return {x[0], x[1], x[2], x[3], g[1], g[2]}; }

template <class T> void grid_sample_ref(const Op& op, Ins in, Outs out) {
  const Params p = params(op);
  const Geom s = geom(in[0]->shape(), in[1]->shape());
  const T* x = cdata<T>(in[0]).data();
  const T* grid = cdata<T>(in[1]).data();
  T* y = mdata<T>(out[0]).data();
  const Axis ax{static_cast<double>(s.W), &p}, ay{static_cast<double>(s.H), &p};
  for (std::int64_t n = 0; n < s.N; ++n) {
    for (std::int64_t o = 0; o < s.Ho * s.Wo; ++o) {
      const T* g = grid + (n * s.Ho * s.Wo + o) * 2;
      const Taps t = taps_of(p, ax, ay, s.W, g[0], g[1]);
      for (std::int64_t c = 0; c < s.C; ++c) {
        const T* plane = x + (n * s.C + c) * s.H * s.W;
        double v = t.finite ? 0.0 : std::numeric_limits<double>::quiet_NaN();
        for (int k = 0; k < t.n; ++k) v += static_cast<double>(plane[t.at[k]]) * t.w[k];
        y[(n * s.C + c) * s.Ho * s.Wo + o] = static_cast<T>(v);
      }
    }
  }
}

// GridSampleGrad(dY, X, grid) -> dX, dgrid.
std::vector<TensorDesc> infer_grid_sample_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 3);
  params(op);
  check_shapes(op, in[1].shape, in[2].shape);
  const Shape y{in[1].shape[0], in[1].shape[1], in[2].shape[1], in[2].shape[2]};
  if (in[0].shape != y) fail(op, "dY must have Y's shape {}, got {}", shape_str(y), shape_str(in[0].shape));
  return {in[1], in[2]};
}

template <class T> void grid_sample_grad_ref(const Op& op, Ins in, Outs out) {
  const Params p = params(op);
  const Geom s = geom(in[1]->shape(), in[2]->shape());
  const T* dy = cdata<T>(in[0]).data();
  const T* x = cdata<T>(in[1]).data();
  const T* grid = cdata<T>(in[2]).data();
  std::vector<double> dx(static_cast<std::size_t>(s.N * s.C * s.H * s.W), 0.0);
  T* dgrid = mdata<T>(out[1]).data();
  const Axis ax{static_cast<double>(s.W), &p}, ay{static_cast<double>(s.H), &p};
  for (std::int64_t n = 0; n < s.N; ++n) {
    for (std::int64_t o = 0; o < s.Ho * s.Wo; ++o) {
      const std::int64_t gi = (n * s.Ho * s.Wo + o) * 2;
      const Taps t = taps_of(p, ax, ay, s.W, grid[gi], grid[gi + 1]);
      double gx = t.finite ? 0.0 : std::numeric_limits<double>::quiet_NaN(), gy = gx;
      for (std::int64_t c = 0; c < s.C; ++c) {
        const std::int64_t plane = (n * s.C + c) * s.H * s.W;
        const double d = dy[(n * s.C + c) * s.Ho * s.Wo + o];
        for (int k = 0; k < t.n; ++k) {
          const double v = x[plane + t.at[k]];
          dx[static_cast<std::size_t>(plane + t.at[k])] += d * t.w[k];
          gx += d * v * t.dwx[k];
          gy += d * v * t.dwy[k];
        }
      }
      dgrid[gi] = static_cast<T>(gx);
      dgrid[gi + 1] = static_cast<T>(gy);
    }
  }
  auto dxo = mdata<T>(out[0]);
  for (std::size_t i = 0; i < dx.size(); ++i) dxo[i] = static_cast<T>(dx[i]);
}

void grid_sample_grad(GradBuilder& b, const Op& op) {
  const std::vector<std::string> outs{b.needs(op, 0) ? b.dx(op, 0) : GradBuilder::temp(op, "dx"),
                                      b.needs(op, 1) ? b.dx(op, 1) : GradBuilder::temp(op, "dgrid")};
  const AttrReader at(op);
  b.emit(op, "", "GridSampleGrad", {b.dy(op), op.inputs[0], op.inputs[1]}, outs,
         {{"mode", at.s("mode")}, {"padding_mode", at.s("padding_mode")}, {"align_corners", at.i("align_corners")}});
}

std::vector<AttrSpec> grid_sample_attrs() {
  return {attr_str("mode", "bilinear", "bilinear, nearest (half to even) or bicubic (A = -0.75)"),
          attr_str("padding_mode", "zeros", "zeros, border (clamp) or reflection (mirror, then clamp)"),
          attr_int("align_corners", 0, "1: -1 and 1 are the centres of the corner pixels; 0: their outer edges")};
}

}  // namespace

void register_grid_sample_ops(OpRegistry& r) {
  OpDef d;
  d.type = "GridSample";
  d.doc = "X [N, C, H, W] sampled at grid [N, H_out, W_out, 2] of normalised (x, y) in [-1, 1] (ONNX GridSample, "
          "opset 16)";
  d.min_inputs = d.max_inputs = 2;
  d.num_outputs = 1;
  d.attrs = grid_sample_attrs();
  d.input_names = {"X", "grid"};
  d.output_names = {"Y"};
  d.infer = infer_grid_sample;
  d.reference = typed(grid_sample_ref<float>, grid_sample_ref<double>);
  d.gradient = grid_sample_grad;
  r.add(std::move(d));

  OpDef g;
  g.type = "GridSampleGrad";
  g.doc = "dX (each location's taps, weighted) and dgrid (the weights' slopes; 0 where border or reflection clamp) "
          "of GridSample";
  g.min_inputs = g.max_inputs = 3;
  g.num_outputs = 2;
  g.attrs = grid_sample_attrs();
  g.input_names = {"dY", "X", "grid"};
  g.output_names = {"dX", "dgrid"};
  g.backward = true;
  g.infer = infer_grid_sample_grad;
  g.reference = typed(grid_sample_grad_ref<float>, grid_sample_grad_ref<double>);
  r.add(std::move(g));
}

}  // namespace probelab::graph::ops
