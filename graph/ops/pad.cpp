// Pad (ONNX semantics; pads, axes and the fill value as attributes): constant, reflect and edge
// modes, negative pads crop. Its gradient: a slice of dY (constant mode without crops), else
// PadGrad, which adds every output element's gradient into the input element it copies.
#include <algorithm>
#include <cstring>

#include <fmt/ranges.h>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

struct PadSpec {
  std::vector<std::int64_t> begin, end;
  std::string mode;
};

PadSpec pad_spec(const Op& op, const Shape& x) {
  const std::vector<std::int64_t> pads = op.attr_ints("pads");
  const auto r = x.size();
  std::vector<std::int64_t> axes = op.attr_ints("axes", {});
  if (axes.empty())
    for (std::size_t d = 0; d < r; ++d) axes.push_back(static_cast<std::int64_t>(d));
  if (pads.size() != 2 * axes.size())
    fail(op, "pads [{}] must have 2 x {} entries (begins, then ends)", fmt::join(pads, ", "), axes.size());
  PadSpec s{std::vector<std::int64_t>(r, 0), std::vector<std::int64_t>(r, 0), AttrReader(op).s("mode")};
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<std::size_t>(norm_axis(op, axes[i], static_cast<std::int64_t>(r)));
    s.begin[a] = pads[i];
    s.end[a] = pads[i + axes.size()];
  }
  if (s.mode != "constant" && s.mode != "reflect" && s.mode != "edge")
    fail(op, "mode must be \"constant\", \"reflect\" or \"edge\", got \"{}\"", s.mode);
  return s;
}

std::vector<TensorDesc> infer_pad(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  const PadSpec p = pad_spec(op, in[0].shape);
  Shape s = in[0].shape;
  for (std::size_t d = 0; d < s.size(); ++d) {
    s[d] += p.begin[d] + p.end[d];
    if (s[d] < 0) fail(op, "pads make dimension {} negative", d);
    const std::int64_t kept = in[0].shape[d] + std::min<std::int64_t>(0, p.begin[d]) + std::min<std::int64_t>(0, p.end[d]);
    if (p.mode != "constant" && (p.begin[d] > 0 || p.end[d] > 0) && kept < (p.mode == "reflect" ? 2 : 1))
      fail(op, "{} padding of dimension {} needs at least {} element{} left after cropping, {} left", p.mode, d,
           p.mode == "reflect" ? 2 : 1, p.mode == "reflect" ? "s" : "", std::max<std::int64_t>(0, kept));
  }
  return {TensorDesc{in[0].dtype, s, Format::ND}};
}

// The element of X that output coordinate c (in X's coordinates, c = output index - begin) of
// dimension d copies, or -1 for constant fill. Negative pads crop first and the kept extent is
// then padded, as ONNX Runtime does (and as exporters' Slice -> Pad rewrites read it): edge
// repeats the first and last kept elements, reflect mirrors inside the kept extent.
std::int64_t pad_source(const PadSpec& p, std::size_t d, std::int64_t c, std::int64_t n) {
  const std::int64_t lo = std::max<std::int64_t>(0, -p.begin[d]);
  const std::int64_t hi = n - std::max<std::int64_t>(0, -p.end[d]);
  if (c >= lo && c < hi) return c;
  if (p.mode == "constant") return -1;
  if (p.mode == "edge") return c < lo ? lo : hi - 1;
  const std::int64_t kept = hi - lo;
  if (kept == 1) return lo;
  const std::int64_t period = 2 * (kept - 1);
  std::int64_t m = (c - lo) % period;
  if (m < 0) m += period;
  return lo + (m < kept ? m : period - m);
}

void pad_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape& xs = in[0]->shape();
  const PadSpec p = pad_spec(op, xs);
  const std::size_t es = dtype_size(in[0]->dtype());
  Tensor fill = Tensor::from_f64({}, std::vector<double>{AttrReader(op).f("value")}, in[0]->dtype());
  const std::byte* src = in[0]->bytes().data();
  std::byte* dst = out[0].bytes().data();
  for_each_mapped(
      out[0].shape(), xs, [&](std::size_t d, std::int64_t c) { return pad_source(p, d, c - p.begin[d], xs[d]); },
      [&](std::int64_t k, std::int64_t off) {
        std::memcpy(dst + k * static_cast<std::int64_t>(es), off < 0 ? fill.bytes().data() : src + off * static_cast<std::int64_t>(es), es);
      });
}

// PadGrad(dY; pads, mode, axes, input_shape) -> dX: every output element's gradient added into
// the input element it was copied from (reflect and edge copy some more than once; constant fill
// and cropped elements take none), in output order.
std::vector<TensorDesc> infer_pad_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input dY");
  const Shape xs = op.attr_ints("input_shape");
  const TensorDesc x{in[0].dtype, xs, Format::ND};
  const std::vector<TensorDesc> fwd = infer_pad(op, std::span<const TensorDesc>(&x, 1));
  if (fwd[0].shape != in[0].shape)
    fail(op, "dY {} is not the padded shape {} of input_shape {}", shape_str(in[0].shape), shape_str(fwd[0].shape),
         shape_str(xs));
  return {TensorDesc{in[0].dtype, xs, Format::ND}};
}

template <class T> void pad_grad_ref(const Op& op, Ins in, Outs out) {
  const Shape& xs = out[0].shape();
  const PadSpec p = pad_spec(op, xs);
  auto dy = cdata<T>(in[0]);
  auto dx = mdata<T>(out[0]);
  std::fill(dx.begin(), dx.end(), T(0));
  for_each_mapped(
      in[0]->shape(), xs, [&](std::size_t d, std::int64_t c) { return pad_source(p, d, c - p.begin[d], xs[d]); },
      [&](std::int64_t k, std::int64_t off) {
        if (off >= 0) dx[static_cast<std::size_t>(off)] += dy[static_cast<std::size_t>(k)];
      });
}

void pad_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  const Shape xs = b.desc(op.inputs[0]).shape;
  const PadSpec p = pad_spec(op, xs);
  const bool crops = std::any_of(p.begin.begin(), p.begin.end(), [](std::int64_t v) { return v < 0; }) ||
                     std::any_of(p.end.begin(), p.end.end(), [](std::int64_t v) { return v < 0; });
  if (p.mode == "constant" && !crops) {  // the input is a block of the output: a slice of dY
    std::vector<std::int64_t> starts, ends, axes;
    for (std::size_t d = 0; d < xs.size(); ++d) {
      starts.push_back(p.begin[d]);
      ends.push_back(p.begin[d] + xs[d]);
      axes.push_back(static_cast<std::int64_t>(d));
    }
    b.emit(op, "", "Slice", {b.dy(op)}, {b.dx(op, 0)}, {{"starts", starts}, {"ends", ends}, {"axes", axes}});
    return;
  }
  Attrs a = op.attrs;
  a.erase("value");
  a["input_shape"] = std::vector<std::int64_t>(xs.begin(), xs.end());
  b.emit(op, "", "PadGrad", {b.dy(op)}, {b.dx(op, 0)}, std::move(a));
}

}  // namespace

void register_pad_ops(OpRegistry& r) {
  OpDef pad = data_op_def("Pad", "pads (or crops, for negative pads) each dimension; modes constant, reflect, edge",
                  {attr_nodefault("pads", true, "[begin..., end...] per padded axis"),
                   attr_str("mode", "constant", "constant, reflect or edge"),
                   attr_float("value", 0.0, "fill value of constant mode"),
                   attr_ints("axes", {}, "padded axes (default all)")});
  pad.infer = infer_pad;
  pad.reference = pad_ref;
  pad.gradient = pad_grad;
  r.add(std::move(pad));
  OpDef pg = data_op_def("PadGrad", "dX of Pad: each output element's dY added into the input element it copies",
                     {attr_nodefault("pads", true, "the forward Pad's pads"),
                      attr_str("mode", "constant", "the forward Pad's mode"),
                      attr_ints("axes", {}, "the forward Pad's axes"),
                      attr_nodefault("input_shape", true, "shape of the forward input")});
  pg.input_names = {"dY"};
  pg.output_names = {"dX"};
  pg.backward = true;
  pg.infer = infer_pad_grad;
  pg.reference = typed(pad_grad_ref<float>, pad_grad_ref<double>);
  r.add(std::move(pg));
}

}  // namespace probelab::graph::ops
