// Ops that walk one axis (ONNX semantics): CumSum (exclusive, reverse; the axis input is an
// attribute here) and Hardmax (one-hot of the first maximum along `axis`, inference only).
#include <cmath>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

struct Lines {
  std::int64_t outer, n, inner;
};

Lines lines(const Op& op, const Shape& s, std::int64_t axis) {
  const auto a = static_cast<std::size_t>(norm_axis(op, axis, static_cast<std::int64_t>(s.size())));
  return {prod(s, 0, a), s[a], prod(s, a + 1, s.size())};
}

std::vector<TensorDesc> infer_same(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  if (in[0].shape.empty()) fail(op, "input must have rank >= 1");
  lines(op, in[0].shape, AttrReader(op).i("axis"));
  return {TensorDesc{in[0].dtype, in[0].shape, Format::ND}};
}

void cumsum_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const AttrReader at(op);
  const Lines l = lines(op, in[0]->shape(), at.i("axis"));
  const bool exclusive = at.i("exclusive") != 0, reverse = at.i("reverse") != 0;
  const bool integer = !is_float(in[0]->dtype());
  const std::vector<double> x = in[0]->to_f64();
  std::vector<double> y(x.size());
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t i = 0; i < l.inner; ++i) {
      double acc = 0;
      float acc32 = 0;  // float inputs sum in float, as ONNX's reference does
      for (std::int64_t t = 0; t < l.n; ++t) {
        const std::int64_t k = reverse ? l.n - 1 - t : t;
        const auto idx = static_cast<std::size_t>((o * l.n + k) * l.inner + i);
        if (exclusive) y[idx] = integer || in[0]->dtype() == DType::F64 ? acc : acc32;
        acc += x[idx];
        acc32 += static_cast<float>(x[idx]);
        if (!exclusive) y[idx] = integer || in[0]->dtype() == DType::F64 ? acc : acc32;
      }
    }
  out[0] = Tensor::from_f64(in[0]->shape(), y, out[0].dtype());
}

void cumsum_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  Attrs a = op.attrs;
  a["reverse"] = std::int64_t{AttrReader(op).i("reverse") != 0 ? 0 : 1};
  b.emit(op, "", "CumSum", {b.dy(op)}, {b.dx(op, 0)}, std::move(a));
}

void hardmax_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Lines l = lines(op, in[0]->shape(), AttrReader(op).i("axis"));
  const std::vector<double> x = in[0]->to_f64();
  std::vector<double> y(x.size(), 0.0);
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t i = 0; i < l.inner; ++i) {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < l.n; ++k)
        if (x[static_cast<std::size_t>((o * l.n + k) * l.inner + i)] > x[static_cast<std::size_t>((o * l.n + best) * l.inner + i)])
          best = k;
      if (l.n > 0) y[static_cast<std::size_t>((o * l.n + best) * l.inner + i)] = 1.0;
    }
  out[0] = Tensor::from_f64(in[0]->shape(), y, out[0].dtype());
}

}  // namespace

void register_axis_scan_ops(OpRegistry& r) {
  OpDef cs;
  cs.type = "CumSum";
  cs.doc = "running sum along `axis` (exclusive: without the element itself; reverse: from the end)";
  cs.attrs = {attr_nodefault("axis", true, "summed axis (negative counts from the end)"),
              attr_int("exclusive", 0, "1: each output excludes its own element"),
              attr_int("reverse", 0, "1: sum from the end of the axis")};
  cs.input_names = {"x"};
  cs.output_names = {"y"};
  cs.infer = [](const Op& op, Descs in) {
    if (in.size() == 1 && in[0].dtype == DType::Bool) fail(op, "input must be a float or integer tensor");
    return infer_same(op, in);
  };
  cs.reference = cumsum_ref;
  cs.gradient = cumsum_grad;
  r.add(std::move(cs));

  OpDef hm;
  hm.type = "Hardmax";
  hm.doc = "1 at the first maximum along `axis`, 0 elsewhere (inference only)";
  hm.piecewise_constant = true;
  hm.attrs = {attr_int("axis", -1, "axis searched (negative counts from the end)")};
  hm.input_names = {"input"};
  hm.output_names = {"output"};
  hm.infer = [](const Op& op, Descs in) {
    if (in.size() == 1) expect_float(op, in[0], "input");
    return infer_same(op, in);
  };
  hm.reference = hardmax_ref;
  r.add(std::move(hm));
}

}  // namespace probelab::graph::ops
