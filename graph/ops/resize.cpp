// Resize (ONNX opset 11+ semantics: modes nearest / linear / cubic over any dims;
// coordinate_transformation_mode half_pixel, pytorch_half_pixel, align_corners, asymmetric,
// tf_crop_and_resize with roi and extrapolation_value; nearest_mode; cubic_coeff_a;
// exclude_outside; opset 18's axes, keep_aspect_ratio_policy and antialias; roi/scales/sizes inputs are
// attributes here) and its backward op ResizeGrad.
// Interpolation is separable: each dimension, last to first, maps its input positions to output
// positions by a few weighted taps (ONNX's reference interpolates recursively in the same order,
// so extrapolated values take part in the outer dimensions' interpolation exactly as there).
#include <algorithm>
#include <array>
#include <cmath>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

struct ResizeSpec {
  Shape out;
  std::vector<double> scale;  // output / input per dimension
  std::vector<double> roi;    // [starts..., ends...] over every dimension, or empty
};

// Opset 18's `axes`: scales, sizes and roi name only those dimensions (negative counts from the
// end); the others keep scale 1, their size and the whole extent.
std::vector<std::size_t> resize_axes(const Op& op, std::size_t rank) {
  std::vector<std::size_t> axes;
  const std::vector<std::int64_t> given = op.attr_ints("axes", {});
  if (given.empty()) {
    for (std::size_t d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  for (std::int64_t a : given) {
    const auto d = static_cast<std::size_t>(norm_axis(op, a, static_cast<std::int64_t>(rank)));
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) fail(op, "axes lists dimension {} twice", d);
    axes.push_back(d);
  }
  return axes;
}

ResizeSpec resize_spec(const Op& op, const Shape& in) {
  const std::vector<std::int64_t> sizes = op.attr_ints("sizes", {});
  const std::vector<double> scales = op.attr_floats("scales", {});
  const std::vector<double> roi = op.attr_floats("roi", {});
  const std::vector<std::size_t> axes = resize_axes(op, in.size());
  const std::string policy = AttrReader(op).s("keep_aspect_ratio_policy");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    fail(op, "keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got \"{}\"", policy);
  ResizeSpec s{in, std::vector<double>(in.size(), 1.0), {}};
  if (!sizes.empty() && !scales.empty()) fail(op, "has both scales and sizes (ONNX: only one of them may be given)");
  if (!sizes.empty()) {
    if (sizes.size() != axes.size()) fail(op, "sizes has {} entries for {} resized dimensions", sizes.size(), axes.size());
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const std::size_t d = axes[i];
      if (sizes[i] < 0) fail(op, "size {} of dimension {} must be >= 0", sizes[i], d);
      s.out[d] = sizes[i];
      s.scale[d] = in[d] ? static_cast<double>(sizes[i]) / static_cast<double>(in[d]) : 1.0;
    }
    if (policy != "stretch") {
      // One scale for all the resized dimensions, the smallest (not_larger) or the largest of
      // theirs; each size then round(scale * input) (ONNX: half away from zero).
      double k = s.scale[axes.front()];
      for (std::size_t d : axes) k = policy == "not_larger" ? std::min(k, s.scale[d]) : std::max(k, s.scale[d]);
      for (std::size_t d : axes) {
        s.scale[d] = k;
        s.out[d] = static_cast<std::int64_t>(std::round(k * static_cast<double>(in[d])));
      }
    }
  } else if (!scales.empty()) {
    if (scales.size() != axes.size()) fail(op, "scales has {} entries for {} resized dimensions", scales.size(), axes.size());
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const std::size_t d = axes[i];
      if (scales[i] <= 0) fail(op, "scale {} of dimension {} must be > 0", scales[i], d);
      s.scale[d] = scales[i];
      // ONNX: floor(input * scale), the product in double precision.
      s.out[d] = static_cast<std::int64_t>(std::floor(scales[i] * static_cast<double>(in[d])));
    }
  } else {
    fail(op, "needs scales or sizes");
  }
  if (!roi.empty()) {
    if (roi.size() != 2 * axes.size()) fail(op, "roi has {} entries, expected {} (starts, then ends)", roi.size(), 2 * axes.size());
    s.roi.assign(2 * in.size(), 0.0);
    std::fill(s.roi.begin() + static_cast<std::ptrdiff_t>(in.size()), s.roi.end(), 1.0);
    for (std::size_t i = 0; i < axes.size(); ++i) {
      s.roi[axes[i]] = roi[i];
      s.roi[axes[i] + in.size()] = roi[i + axes.size()];
    }
  }
  return s;
}

// One output position along one dimension: sum of weight * input[index] (indices clamped to the
// dimension, as ONNX's edge padding), or the extrapolation value.
struct Tap1d {
  bool extrapolate = false;
  std::vector<std::pair<std::int64_t, double>> taps;
};

struct Params {
  std::string mode, coord, nearest;
  double cubic_a, extrapolation;
  bool exclude_outside, antialias;
};

Params params(const Op& op) {
  const AttrReader at(op);
  Params p{at.s("mode"),         at.s("coordinate_transformation_mode"), at.s("nearest_mode"), at.f("cubic_coeff_a"),
           at.f("extrapolation_value"), at.i("exclude_outside") != 0, at.i("antialias") != 0};
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic")
    fail(op, "mode must be nearest, linear or cubic, got \"{}\"", p.mode);
  static const std::vector<std::string> coords = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                                  "tf_crop_and_resize", "tf_half_pixel_for_nn"};
  if (std::find(coords.begin(), coords.end(), p.coord) == coords.end())
    fail(op, "coordinate_transformation_mode \"{}\" is not one of {}", p.coord, fmt::join(coords, ", "));
  return p;
}

std::vector<TensorDesc> infer_resize(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  const ResizeSpec s = resize_spec(op, in[0].shape);
  // Checked with the shapes (at import and load), not first when the op runs.
  if (params(op).coord == "tf_crop_and_resize" && s.roi.empty())
    fail(op, "coordinate_transformation_mode tf_crop_and_resize needs roi (the crop box: starts and ends of every "
             "resized dim)");
  return {TensorDesc{in[0].dtype, s.out, Format::ND}};
}

// Opset 18's antialiased filters for a dimension downscaled by `scale` < 1: the linear (triangle)
// or cubic kernel stretched by 1 / scale, so that every input element inside the output
// element's footprint contributes, weights normalised to sum 1 (ONNX's reference:
// _linear_coeffs_antialias / _cubic_coeffs_antialias, the same taps in the same order).
std::vector<double> antialias_coeffs(const Params& p, double ratio, double scale) {
  const bool linear = p.mode == "linear";
  const double a = p.cubic_a;
  const auto start = static_cast<std::int64_t>(std::floor((linear ? -1.0 : -2.0) / scale) + 1);
  const std::int64_t end = 2 - start;  // linear: 2 - 2 start taps, cubic: 3 - 2 start
  std::vector<double> c;
  double sum = 0;
  for (std::int64_t i = start; i < end; ++i) {
    const double x = std::fabs((static_cast<double>(i) - ratio) * scale);
    double w = 0;
    const double x2 = x * x, x3 = x * x2;
    if (linear) {
      w = std::clamp(1 - x, 0.0, 1.0);
    } else if (x <= 1) {
      w = (a + 2) * x3 - (a + 3) * x2 + 1;
    } else if (x < 2) {
      w = a * x3 - 5 * a * x2 + 8 * a * x - 4 * a;
    }
    c.push_back(w);
    sum += w;
  }
  for (double& w : c) w /= sum;
  return c;
}

std::vector<double> coeffs(const Params& p, double ratio, bool integer, double scale) {
  if (p.antialias && scale < 1.0 && p.mode != "nearest") return antialias_coeffs(p, ratio, scale);
  if (p.mode == "linear") return {1 - ratio, ratio};
  if (p.mode == "nearest") {
    if (integer) return {0, 1};
    if (p.nearest == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (p.nearest == "floor") return {1, 0};
    if (p.nearest == "ceil") return {0, 1};
    return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};  // round_prefer_floor
  }
  const std::array<double, 4> w = cubic_weights(ratio, p.cubic_a);
  return {w.begin(), w.end()};
}

// Taps of every output position of dimension d (roi_lo/hi: tf_crop_and_resize's region).
std::vector<Tap1d> taps_1d(const Params& p, std::int64_t in, std::int64_t out, double scale, double roi_lo,
                           double roi_hi) {
  std::vector<Tap1d> res(static_cast<std::size_t>(out));
  const auto iw = static_cast<double>(in), ow = scale * iw;
  for (std::int64_t xi = 0; xi < out; ++xi) {
    const auto x = static_cast<double>(xi);
    double xo = 0;
    if (p.coord == "align_corners") {
      xo = ow == 1 ? 0.0 : x * (iw - 1) / (ow - 1);
    } else if (p.coord == "asymmetric") {
      xo = x / scale;
    } else if (p.coord == "tf_crop_and_resize") {
      xo = ow == 1 ? (roi_hi - roi_lo) * (iw - 1) / 2 : x * (roi_hi - roi_lo) * (iw - 1) / (ow - 1);
      xo += roi_lo * (iw - 1);
      if (xo < 0 || xo > iw - 1) {
        res[static_cast<std::size_t>(xi)].extrapolate = true;
        continue;
      }
    } else if (p.coord == "pytorch_half_pixel") {
      xo = ow == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else if (p.coord == "tf_half_pixel_for_nn") {
      xo = (x + 0.5) / scale;
    } else {  // half_pixel
      xo = (x + 0.5) / scale - 0.5;
    }
    const double fl = std::floor(xo);
    const bool integer = xo == fl;
    std::vector<double> c = coeffs(p, integer ? 1.0 : xo - fl, integer, scale);
    const auto n = static_cast<std::int64_t>(c.size());
    // The n indices nearest to xo, ties to the smaller (ONNX's get_neighbor_idxes), over the
    // edge-padded range [-pad, in + pad).
    const std::int64_t pad = (n + 1) / 2;
    std::vector<std::int64_t> cand;
    for (std::int64_t i = static_cast<std::int64_t>(fl) - n; i <= static_cast<std::int64_t>(fl) + n; ++i)
      if (i >= -pad && i < in + pad) cand.push_back(i);
    std::stable_sort(cand.begin(), cand.end(), [&](std::int64_t a, std::int64_t b) {
      const double da = std::fabs(xo - static_cast<double>(a)), db = std::fabs(xo - static_cast<double>(b));
      return da != db ? da < db : a < b;
    });
    cand.resize(static_cast<std::size_t>(std::min<std::int64_t>(n, static_cast<std::int64_t>(cand.size()))));
    std::sort(cand.begin(), cand.end());
    if (p.exclude_outside) {
      double sum = 0;
      for (std::size_t i = 0; i < cand.size(); ++i) {
        if (cand[i] < 0 || cand[i] >= in) c[i] = 0;
        sum += c[i];
      }
      for (double& v : c) v /= sum;
    }
    Tap1d& t = res[static_cast<std::size_t>(xi)];
    for (std::size_t i = 0; i < cand.size(); ++i)
      if (c[i] != 0) t.taps.emplace_back(std::clamp<std::int64_t>(cand[i], 0, in - 1), c[i]);
  }
  return res;
}

// Per-dimension taps of a resize from `in` to the op's output.
std::vector<std::vector<Tap1d>> all_taps(const Op& op, const Shape& in) {
  const ResizeSpec s = resize_spec(op, in);
  const Params p = params(op);
  const std::size_t r = in.size();
  if (p.coord == "tf_crop_and_resize" && s.roi.empty()) fail(op, "tf_crop_and_resize needs roi");
  std::vector<std::vector<Tap1d>> t(r);
  for (std::size_t d = 0; d < r; ++d)
    t[d] = taps_1d(p, in[d], s.out[d], s.scale[d], s.roi.empty() ? 0.0 : s.roi[d], s.roi.empty() ? 1.0 : s.roi[d + r]);
  return t;
}

// Applies dimension d's taps to `x` of shape `shape` (shape[d] becomes the output size).
std::vector<double> apply_dim(const std::vector<double>& x, Shape& shape, std::size_t d, const std::vector<Tap1d>& taps,
                              double extrapolation) {
  const std::int64_t outer = prod(shape, 0, d), n_in = shape[d], inner = prod(shape, d + 1, shape.size());
  const auto n_out = static_cast<std::int64_t>(taps.size());
  std::vector<double> y(static_cast<std::size_t>(outer * n_out * inner));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < n_out; ++j) {
      const Tap1d& t = taps[static_cast<std::size_t>(j)];
      double* dst = y.data() + (o * n_out + j) * inner;
      if (t.extrapolate) {
        std::fill(dst, dst + inner, extrapolation);
        continue;
      }
      for (const auto& [idx, w] : t.taps) {
        const double* src = x.data() + (o * n_in + idx) * inner;
        for (std::int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
      }
    }
  shape[d] = n_out;
  return y;
}

// The transpose of apply_dim: from output gradients of dimension d back to its input positions.
std::vector<double> apply_dim_t(const std::vector<double>& dy, Shape& shape, std::size_t d, std::int64_t n_in,
                                const std::vector<Tap1d>& taps) {
  const std::int64_t outer = prod(shape, 0, d), inner = prod(shape, d + 1, shape.size());
  const auto n_out = static_cast<std::int64_t>(taps.size());
  std::vector<double> dx(static_cast<std::size_t>(outer * n_in * inner), 0.0);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < n_out; ++j) {
      const Tap1d& t = taps[static_cast<std::size_t>(j)];
      if (t.extrapolate) continue;
      const double* src = dy.data() + (o * n_out + j) * inner;
      for (const auto& [idx, w] : t.taps) {
        double* dst = dx.data() + (o * n_in + idx) * inner;
        for (std::int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
      }
    }
  shape[d] = n_in;
  return dx;
}

void resize_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape& xs = in[0]->shape();
  const auto taps = all_taps(op, xs);
  const double extrapolation = AttrReader(op).f("extrapolation_value");
  std::vector<double> v = in[0]->to_f64();
  Shape s = xs;
  for (std::size_t d = xs.size(); d-- > 0;) v = apply_dim(v, s, d, taps[d], extrapolation);
  out[0] = Tensor::from_f64(s, v, out[0].dtype());
}

// ResizeGrad(dY; input_shape + Resize's attributes) -> dX.
std::vector<TensorDesc> infer_resize_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input dY");
  const Shape xs = op.attr_ints("input_shape");
  const ResizeSpec s = resize_spec(op, xs);
  if (s.out != in[0].shape) fail(op, "dY has shape {}, expected {}", shape_str(in[0].shape), shape_str(s.out));
  return {TensorDesc{in[0].dtype, xs, Format::ND}};
}

void resize_grad_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape xs = op.attr_ints("input_shape");
  const auto taps = all_taps(op, xs);
  std::vector<double> g = in[0]->to_f64();
  Shape s = in[0]->shape();
  for (std::size_t d = 0; d < xs.size(); ++d) g = apply_dim_t(g, s, d, xs[d], taps[d]);
  out[0] = Tensor::from_f64(xs, g, out[0].dtype());
}

void resize_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  Attrs a = op.attrs;
  a["input_shape"] = b.desc(op.inputs[0]).shape;
  b.emit(op, "", "ResizeGrad", {b.dy(op)}, {b.dx(op, 0)}, std::move(a));
}

std::vector<AttrSpec> resize_attrs() {
  return {attr_str("mode", "nearest", "nearest, linear or cubic"),
          attr_str("coordinate_transformation_mode", "half_pixel",
                   "half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize"),
          attr_str("nearest_mode", "round_prefer_floor", "round_prefer_floor, round_prefer_ceil, floor or ceil"),
          attr_float("cubic_coeff_a", -0.75, "cubic kernel parameter"),
          attr_int("exclude_outside", 0, "1: taps outside the input get weight 0 (renormalised)"),
          attr_float("extrapolation_value", 0.0, "tf_crop_and_resize: value outside the roi"),
          attr_nodefault("roi", false, "tf_crop_and_resize: [starts..., ends...] normalised"),
          attr_nodefault("scales", false, "output / input per dimension"),
          attr_nodefault("sizes", false, "output shape (instead of scales)"),
          attr_ints("axes", {}, "the dimensions scales, sizes and roi name (default all)"),
          attr_str("keep_aspect_ratio_policy", "stretch", "with sizes: stretch, not_larger or not_smaller"),
          attr_int("antialias", 0, "1: linear/cubic filters widened by 1 / scale where a dimension is downscaled (upscaling unchanged)")};
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  OpDef d;
  d.type = "Resize";
  d.doc = "interpolating resize (nearest, linear, cubic) over any dims (roi/scales/sizes as attributes)";
  d.aliases = {"Upsample"};
  d.attrs = resize_attrs();
  d.input_names = {"X"};
  d.output_names = {"Y"};
  d.infer = infer_resize;
  d.reference = resize_ref;
  d.gradient = resize_grad;
  r.add(std::move(d));

  OpDef g;
  g.type = "ResizeGrad";
  g.doc = "dX of Resize: dY spread back over the taps that read each input element";
  g.attrs = resize_attrs();
  g.attrs.push_back(attr_nodefault("input_shape", true, "shape of the forward input"));
  g.input_names = {"dY"};
  g.output_names = {"dX"};
  g.backward = true;
  g.infer = infer_resize_grad;
  g.reference = resize_grad_ref;
  r.add(std::move(g));
}

}  // namespace probelab::graph::ops
