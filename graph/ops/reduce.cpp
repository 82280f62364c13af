// ReduceSum / ReduceMean (ONNX semantics: axes, keepdims, noop_with_empty_axes; the axes input of
// opset 13/18 is the `axes` attribute here).
#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

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
  expect_float(op, in[0], "input data");
  return {TensorDesc{in[0].dtype, reduce_spec(op, in[0].shape).out, Format::ND}};
}

template <class T, bool Mean> void reduce_ref(const Op& op, Ins in, Outs out) {
  const Shape& xs = in[0]->shape();
  const ReduceSpec s = reduce_spec(op, xs);
  auto x = cdata<T>(in[0]);
  auto y = mdata<T>(out[0]);
  std::vector<double> acc(y.size(), 0.0);
  for_each_broadcast(xs, xs, s.keep,
                     [&](std::int64_t ox, std::int64_t oy, std::int64_t) { acc[static_cast<std::size_t>(oy)] += x[ox]; });
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] = static_cast<T>(Mean ? (s.count ? acc[i] / static_cast<double>(s.count) : 0.0) : acc[i]);
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
  r.add(reduce_def("ReduceSum", "sum over `axes` (ONNX ReduceSum)", typed(reduce_ref<float, false>, reduce_ref<double, false>),
                   reduce_grad<false>));
  r.add(reduce_def("ReduceMean", "mean over `axes` (ONNX ReduceMean)", typed(reduce_ref<float, true>, reduce_ref<double, true>),
                   reduce_grad<true>));
}

}  // namespace probelab::graph::ops
