// Ops that make tensors from shapes and dtypes (ONNX semantics): Shape, Size, EyeLike (shape
// only: their values never depend on the input's values), Cast, CastLike, and the generators
// ConstantOfShape and Range, whose shape-determining inputs are attributes here (the ONNX
// importer folds the constant inputs into them).
#include <cmath>
#include <cstring>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

DType target_dtype(const Op& op, const char* attr) {
  const std::int64_t code = op.attr_int(attr);
  const auto t = dtype_from_onnx_code(code);
  if (!t) fail(op, "attribute '{}' = {} names an element type this build does not support", attr, code);
  return *t;
}

// Writes `values` (row-major) into `out` through dtype `through`: the values are rounded to
// `through` first (so a cast to float16 yields float16 values even in an FP32 result tensor).
void write_through(const Shape& shape, const std::vector<double>& values, DType through, Tensor& out) {
  Tensor t = Tensor::from_f64(shape, values, through);
  if (t.dtype() == out.dtype()) {
    if (out.nbytes() != 0) std::memcpy(out.bytes().data(), t.bytes().data(), out.nbytes());
    return;
  }
  const std::vector<double> v = t.to_f64();
  out = Tensor::from_f64(shape, v, out.dtype());
}

// --- Shape / Size --------------------------------------------------------------------------------

std::pair<std::int64_t, std::int64_t> shape_range(const Op& op, std::int64_t rank) {
  std::int64_t b = AttrReader(op).i("start"), e = op.attr_int("end", rank);
  if (b < 0) b += rank;
  if (e < 0) e += rank;
  b = std::clamp<std::int64_t>(b, 0, rank);
  e = std::clamp<std::int64_t>(e, 0, rank);
  return {b, std::max(b, e)};
}

std::vector<TensorDesc> infer_shape(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  const auto [b, e] = shape_range(op, static_cast<std::int64_t>(in[0].shape.size()));
  return {TensorDesc{DType::I64, {e - b}, Format::ND}};
}

void shape_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape& s = in[0]->shape();
  const auto [b, e] = shape_range(op, static_cast<std::int64_t>(s.size()));
  auto y = out[0].data<std::int64_t>();
  for (std::int64_t i = b; i < e; ++i) y[static_cast<std::size_t>(i - b)] = s[static_cast<std::size_t>(i)];
}

std::vector<TensorDesc> infer_size(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  return {TensorDesc{DType::I64, {}, Format::ND}};
}

void size_ref(const Op&, Ins in, Outs out, RefPrecision) { out[0].data<std::int64_t>()[0] = in[0]->numel(); }

// --- EyeLike -------------------------------------------------------------------------------------

std::vector<TensorDesc> infer_eye_like(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_rank(op, in[0], 2, "input");
  const DType t = op.has_attr("dtype") ? target_dtype(op, "dtype") : in[0].dtype;
  return {TensorDesc{t, in[0].shape, Format::ND}};
}

void eye_like_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape& s = in[0]->shape();
  const std::int64_t k = AttrReader(op).i("k");
  std::vector<double> v(static_cast<std::size_t>(numel(s)), 0.0);
  for (std::int64_t r = 0; r < s[0]; ++r)
    if (r + k >= 0 && r + k < s[1]) v[static_cast<std::size_t>(r * s[1] + r + k)] = 1.0;
  write_through(s, v, out[0].dtype(), out[0]);
}

// --- Cast / CastLike -------------------------------------------------------------------------------

std::vector<TensorDesc> infer_cast(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  return {TensorDesc{target_dtype(op, "to"), in[0].shape, in[0].format}};
}

std::vector<TensorDesc> infer_cast_like(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  return {TensorDesc{in[1].dtype, in[0].shape, Format::ND}};
}

void cast_values(const Tensor& x, DType to, Tensor& out) {
  if (x.dtype() == DType::I64 && (to == DType::I64 || to == DType::I32 || to == DType::Bool)) {
    // Exact for all of int64 (a detour through double would round above 2^53).
    auto src = x.data<std::int64_t>();
    if (to == DType::I64 && out.nbytes() != 0) std::memcpy(out.bytes().data(), src.data(), out.nbytes());
    else if (to == DType::I32)
      for (std::size_t i = 0; i < src.size(); ++i) out.data<std::int32_t>()[i] = static_cast<std::int32_t>(src[i]);
    else
      for (std::size_t i = 0; i < src.size(); ++i) out.data<std::uint8_t>()[i] = src[i] != 0;
    return;
  }
  write_through(x.shape(), x.to_f64(), to, out);
}

void cast_ref(const Op& op, Ins in, Outs out, RefPrecision) { cast_values(*in[0], target_dtype(op, "to"), out[0]); }
void cast_like_ref(const Op&, Ins in, Outs out, RefPrecision) { cast_values(*in[0], in[1]->dtype(), out[0]); }

void cast_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "Cast", {b.dy(op)}, {b.dx(op, 0)}, {{"to", onnx_code(b.desc(op.inputs[0]).dtype)}});
}

// --- ConstantOfShape / Range ------------------------------------------------------------------------

std::vector<TensorDesc> infer_constant_of_shape(const Op& op, Descs in) {
  expect_inputs(op, in, 0, 0);
  const Shape s = op.attr_ints("shape");
  for (std::int64_t d : s)
    if (d < 0) fail(op, "shape {} has a negative dimension", shape_str(s));
  return {TensorDesc{target_dtype(op, "dtype"), s, Format::ND}};
}

void constant_of_shape_ref(const Op& op, Ins, Outs out, RefPrecision) {
  const std::vector<double> v(static_cast<std::size_t>(out[0].numel()), AttrReader(op).f("value"));
  write_through(out[0].shape(), v, target_dtype(op, "dtype"), out[0]);
}

struct RangeSpec {
  double start, limit, delta;
  std::int64_t n;
};

double scalar_attr(const Op& op, const char* name) { return op.attr_float(name); }

RangeSpec range_spec(const Op& op) {
  RangeSpec r{scalar_attr(op, "start"), scalar_attr(op, "limit"), scalar_attr(op, "delta"), 0};
  if (r.delta == 0) fail(op, "delta is 0");
  r.n = std::max<std::int64_t>(static_cast<std::int64_t>(std::ceil((r.limit - r.start) / r.delta)), 0);
  return r;
}

std::vector<TensorDesc> infer_range(const Op& op, Descs in) {
  expect_inputs(op, in, 0, 0);
  return {TensorDesc{target_dtype(op, "dtype"), {range_spec(op).n}, Format::ND}};
}

void range_ref(const Op& op, Ins, Outs out, RefPrecision) {
  const RangeSpec r = range_spec(op);
  const DType t = target_dtype(op, "dtype");
  if (!is_float(t)) {
    const auto s = op.attr_int("start"), d = op.attr_int("delta");
    std::vector<double> v(static_cast<std::size_t>(r.n));
    for (std::int64_t i = 0; i < r.n; ++i) v[static_cast<std::size_t>(i)] = static_cast<double>(s + i * d);
    write_through({r.n}, v, t, out[0]);
    return;
  }
  // ONNX: element i is start + i * delta computed in the output type.
  std::vector<double> v(static_cast<std::size_t>(r.n));
  if (t == DType::F64) {
    for (std::int64_t i = 0; i < r.n; ++i) v[static_cast<std::size_t>(i)] = r.start + static_cast<double>(i) * r.delta;
  } else {
    const auto s = static_cast<float>(r.start), d = static_cast<float>(r.delta);
    for (std::int64_t i = 0; i < r.n; ++i) v[static_cast<std::size_t>(i)] = s + static_cast<float>(i) * d;
  }
  write_through({r.n}, v, t, out[0]);
}

OpDef def(std::string type, std::string doc, std::vector<std::string> ins, std::vector<AttrSpec> attrs) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.min_inputs = d.max_inputs = static_cast<int>(ins.size());
  d.input_names = std::move(ins);
  d.output_names = {"output"};
  d.attrs = std::move(attrs);
  return d;
}

}  // namespace

void register_shape_query_ops(OpRegistry& r) {
  OpDef shape = def("Shape", "the input's shape as int64 (dims [start, end)); folded at import", {"data"},
                    {attr_int("start", 0, "first dimension"), attr_nodefault("end", false, "end dimension (exclusive)")});
  shape.shape_only = true;
  shape.infer = infer_shape;
  shape.reference = shape_ref;
  r.add(std::move(shape));

  OpDef size = def("Size", "the input's element count as an int64 scalar; folded at import", {"data"}, {});
  size.shape_only = true;
  size.infer = infer_size;
  size.reference = size_ref;
  r.add(std::move(size));

  OpDef eye = def("EyeLike", "ones on diagonal k of a 2-D tensor shaped like the input, zeros elsewhere", {"input"},
                  {attr_int("k", 0, "diagonal offset"), attr_nodefault("dtype", false, "ONNX element type (default: the input's)")});
  eye.shape_only = true;
  eye.infer = infer_eye_like;
  eye.reference = eye_like_ref;
  r.add(std::move(eye));

  OpDef cast = def("Cast", "converts to element type `to` (floats round to nearest even, to integers truncate)",
                   {"input"}, {attr_nodefault("to", true, "ONNX element type code (1 float, 10 float16, 7 int64, ...)")});
  cast.infer = infer_cast;
  cast.reference = cast_ref;
  cast.moves_elements = true;
  cast.gradient = cast_grad;
  r.add(std::move(cast));

  OpDef cl = def("CastLike", "converts the input to the element type of `target_type`", {"input", "target_type"}, {});
  cl.infer = infer_cast_like;
  cl.reference = cast_like_ref;
  cl.moves_elements = true;
  r.add(std::move(cl));

  OpDef cos = def("ConstantOfShape", "a tensor of `shape` filled with `value` (the shape input is an attribute)", {},
                  {attr_nodefault("shape", true, "output shape"), attr_float("value", 0.0, "fill value"),
                   attr_int("dtype", 1, "ONNX element type code of the value")});
  cos.infer = infer_constant_of_shape;
  cos.reference = constant_of_shape_ref;
  r.add(std::move(cos));

  OpDef range = def("Range", "start, start + delta, ... up to limit (exclusive); the scalar inputs are attributes", {},
                    {attr_nodefault("start", true, "first value"), attr_nodefault("limit", true, "bound (exclusive)"),
                     attr_nodefault("delta", true, "step"), attr_int("dtype", 1, "ONNX element type code")});
  range.infer = infer_range;
  range.reference = range_ref;
  r.add(std::move(range));
}

}  // namespace probelab::graph::ops
