// Shape inference and gradients of the pointwise ops, and PointwiseGrad (see pointwise.h).
#include "graph/ops/pointwise.h"

#include <map>
#include <set>

namespace probelab::graph::ops {

Shape broadcast_all(const Op& op, Descs in) {
  Shape s;
  bool first = true;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!has_input(op, i)) continue;
    s = first ? in[i].shape : broadcast_shapes(op, s, in[i].shape);
    first = false;
  }
  return s;
}

namespace detail {
namespace {

struct GradRegistry {
  std::map<std::string, GradKernel> kernels;
  std::map<std::string, AttrSpec> attrs;
};

GradRegistry& grad_registry() {
  static GradRegistry r;
  return r;
}

}  // namespace

void add_pointwise_grad_kernel(const std::string& type, GradKernel k) { grad_registry().kernels[type] = k; }

void add_pointwise_grad_attrs(const std::vector<AttrSpec>& attrs) {
  for (const AttrSpec& a : attrs) grad_registry().attrs.emplace(a.name, attr_nodefault(a.name, false, a.doc));
}

std::vector<TensorDesc> infer_pointwise(const Op& op, Descs in, Kind kind) {
  if (in.empty() || !has_input(op, 0)) fail(op, "input 0 is required");
  const TensorDesc& a = in[0];
  for (std::size_t i = 1; i < in.size(); ++i) {
    if (!has_input(op, i)) continue;
    // Pow's exponent may have another numeric dtype; every other op takes one dtype.
    const bool mixed_ok = op.type == "Pow" && in[i].dtype != DType::Bool;
    if (!mixed_ok) expect_same_dtype(op, a, in[i], "all inputs");
  }
  switch (kind) {
    case Kind::Float:
    case Kind::FloatTest:
      if (!is_float(a.dtype) && !(op.type == "Pow" && is_integer(a.dtype)))
        fail(op, "input must be a float tensor, got {}", dtype_name(a.dtype));
      break;
    case Kind::Numeric:
      if (!is_float(a.dtype) && !is_integer(a.dtype))
        fail(op, "input must be a float or integer tensor, got {}", dtype_name(a.dtype));
      break;
    case Kind::Compare:
      break;
    case Kind::Logic:
      if (a.dtype != DType::Bool) fail(op, "inputs must be bool tensors, got {}", dtype_name(a.dtype));
      break;
  }
  Shape s = broadcast_all(op, in);
  const bool bool_out = kind == Kind::Compare || kind == Kind::Logic || kind == Kind::FloatTest;
  const Format f = s == a.shape && !bool_out ? a.format : Format::ND;
  return {TensorDesc{bool_out ? DType::Bool : a.dtype, std::move(s), f}};
}

void pointwise_gradient(GradBuilder& b, const Op& op) {
  const std::string dy = b.dy(op);
  if (dy.empty()) return;
  const Shape ys = b.desc(op.outputs[0]).shape;
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    if (!b.needs(op, i)) continue;
    Attrs a = op.attrs;
    a["of"] = op.type;
    a["wrt"] = static_cast<std::int64_t>(i);
    std::vector<std::string> ins{dy, op.outputs[0]};
    ins.insert(ins.end(), op.inputs.begin(), op.inputs.end());
    b.emit_to_input(op, i, ys, fmt::format("x{}", i), "PointwiseGrad", std::move(ins), std::move(a));
  }
}

}  // namespace detail

namespace {

std::vector<TensorDesc> infer_pointwise_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 3, -1);
  expect_float(op, in[0], "input dY");
  const std::string of = op.attr_str("of");
  if (!detail::grad_registry().kernels.count(of)) fail(op, "'{}' has no pointwise gradient", of);
  const std::int64_t wrt = op.attr_int("wrt", 0);
  if (wrt < 0 || wrt + 2 >= static_cast<std::int64_t>(in.size()))
    fail(op, "wrt {} is not an input of the forward op ({} inputs)", wrt, in.size() - 2);
  Shape s = broadcast_all(op, in);
  if (s != in[0].shape) fail(op, "the inputs broadcast to {}, dY is {}", shape_str(s), shape_str(in[0].shape));
  return {TensorDesc{in[0].dtype, std::move(s), Format::ND}};
}

void pointwise_grad_ref(const Op& op, Ins in, Outs out, RefPrecision p) {
  Op fwd = op;
  fwd.type = op.attr_str("of");
  fwd.attrs.erase("of");
  fwd.attrs.erase("wrt");
  fwd.inputs.assign(op.inputs.begin() + 2, op.inputs.end());
  fwd.outputs = {op.inputs[1]};
  detail::grad_registry().kernels.at(fwd.type)(fwd, static_cast<int>(op.attr_int("wrt", 0)), in, out, p);
}

}  // namespace

void register_pointwise_grad_op(OpRegistry& r) {
  OpDef d;
  d.type = "PointwiseGrad";
  d.doc = "dX_wrt of a pointwise op `of`: dY * dF/dX_wrt at the forward inputs and output";
  d.min_inputs = 3;
  d.max_inputs = -1;
  d.input_names = {"dY", "Y", "X..."};
  d.output_names = {"dX"};
  d.backward = true;
  d.attrs = {attr_nodefault("of", true, "forward op type"), attr_int("wrt", 0, "forward input differentiated")};
  for (const auto& [name, spec] : detail::grad_registry().attrs) d.attrs.push_back(spec);
  d.infer = infer_pointwise_grad;
  d.reference = pointwise_grad_ref;
  r.add(std::move(d));
}

}  // namespace probelab::graph::ops
