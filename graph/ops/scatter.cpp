// ScatterElements (ONNX opset 16/18: updates[k] written at data's element with coordinate `axis`
// replaced by indices[k]) and ScatterND (each index tuple of the last indices dim selects a slice of
// data), with reduction none / add / mul / max / min applied in index order (a repeated index with
// reduction none: the last write wins), and their backward ops for reductions none and add.
#include <algorithm>
#include <map>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

enum class Red { None, Add, Mul, Max, Min };

Red reduction(const Op& op) {
  const std::string r = AttrReader(op).s("reduction");
  if (r == "none") return Red::None;
  if (r == "add") return Red::Add;
  if (r == "mul") return Red::Mul;
  if (r == "max") return Red::Max;
  if (r == "min") return Red::Min;
  fail(op, "reduction must be none, add, mul, max or min, got \"{}\"", r);
}

bool nd(const Op& op) { return op.type.starts_with("ScatterND"); }

// Where the updates go: block b of `slice` update elements (from b * slice) lands at data offset
// at[b] onwards.
struct Plan {
  std::int64_t slice = 1;
  std::vector<std::int64_t> at;
};

Plan plan_of(const Op& op, const Shape& data, const Tensor& indices) {
  Plan p;
  if (!nd(op)) {
    p.at.resize(static_cast<std::size_t>(numel(indices.shape())));
    for_each_gather_element(op, data, indices, [&](std::int64_t k, std::int64_t off) { p.at[static_cast<std::size_t>(k)] = off; });
    return p;
  }
  const Shape& is = indices.shape();
  const auto q = static_cast<std::size_t>(is.back());
  p.slice = prod(data, q, data.size());
  const auto ds = strides_of(data);
  const std::vector<std::int64_t> idx = read_indices(indices);
  for (std::size_t t = 0; t + q <= idx.size() && q > 0; t += q) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < q; ++d) {
      std::int64_t j = idx[t + d];
      if (j < -data[d] || j >= data[d]) fail(op, "index {} is out of range for dimension {} of size {}", j, d, data[d]);
      off += (j < 0 ? j + data[d] : j) * ds[d];
    }
    p.at.push_back(off);
  }
  if (q == 0) p.at.assign(static_cast<std::size_t>(numel(Shape(is.begin(), is.end() - 1))), 0);
  return p;
}

// Shape updates must have.
Shape updates_shape(const Op& op, const Shape& data, const Shape& indices) {
  if (!nd(op)) return indices;
  if (indices.empty()) fail(op, "indices must have rank >= 1");
  const std::int64_t q = indices.back();
  if (q < 0 || q > static_cast<std::int64_t>(data.size()))
    fail(op, "the last dimension of indices ({}) must be at most data's rank {}", q, data.size());
  Shape u(indices.begin(), indices.end() - 1);
  u.insert(u.end(), data.begin() + q, data.end());
  return u;
}

void check_indices(const Op& op, const TensorDesc& data, const TensorDesc& indices) {
  expect_int(op, indices, "indices");
  if (!nd(op) && (indices.shape.size() != data.shape.size() || data.shape.empty()))
    fail(op, "data {} and indices {} must have the same rank >= 1", shape_str(data.shape), shape_str(indices.shape));
}

std::vector<TensorDesc> infer_scatter(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 3);
  reduction(op);
  check_indices(op, in[0], in[1]);
  expect_same_dtype(op, in[0], in[2], "updates");
  const Shape u = updates_shape(op, in[0].shape, in[1].shape);
  if (in[2].shape != u) fail(op, "updates must have shape {}, got {}", shape_str(u), shape_str(in[2].shape));
  if (in[0].dtype == DType::Bool && reduction(op) != Red::None) fail(op, "a bool tensor takes reduction none only");
  return {in[0]};
}

template <class T> T reduce(Red r, T a, T b) {
  switch (r) {
    case Red::None: return b;
    case Red::Add: return a + b;
    case Red::Mul: return a * b;
    case Red::Max: return std::max(a, b);
    case Red::Min: return std::min(a, b);
  }
  return b;
}

template <class T> void apply(const Plan& p, Red r, const Tensor& updates, Tensor& out) {
  auto u = updates.data<T>();
  auto y = out.data<T>();
  for (std::size_t b = 0; b < p.at.size(); ++b)
    for (std::int64_t e = 0; e < p.slice; ++e) {
      T& dst = y[static_cast<std::size_t>(p.at[b] + e)];
      dst = reduce(r, dst, u[b * static_cast<std::size_t>(p.slice) + static_cast<std::size_t>(e)]);
    }
}

void scatter_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Plan p = plan_of(op, in[0]->shape(), *in[1]);
  std::copy(in[0]->bytes().begin(), in[0]->bytes().end(), out[0].bytes().begin());
  const Red r = reduction(op);
  switch (in[0]->dtype()) {
    case DType::F32: apply<float>(p, r, *in[2], out[0]); break;
    case DType::F64: apply<double>(p, r, *in[2], out[0]); break;
    case DType::I32: apply<std::int32_t>(p, r, *in[2], out[0]); break;
    case DType::I64: apply<std::int64_t>(p, r, *in[2], out[0]); break;
    case DType::Bool: apply<std::uint8_t>(p, r, *in[2], out[0]); break;
    default: fail(op, "data of dtype {} is not supported", dtype_name(in[0]->dtype()));
  }
}

// <Scatter>Grad(dY, indices) -> dData, dUpdates (reductions none and add).
std::vector<TensorDesc> infer_scatter_grad(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input dY");
  check_indices(op, in[0], in[1]);
  return {in[0], TensorDesc{in[0].dtype, updates_shape(op, in[0].shape, in[1].shape), Format::ND}};
}

template <class T> void scatter_grad_ref(const Op& op, Ins in, Outs out) {
  const Plan p = plan_of(op, in[0]->shape(), *in[1]);
  const bool overwrite = reduction(op) == Red::None;
  auto dy = cdata<T>(in[0]);
  auto dd = mdata<T>(out[0]);
  auto du = mdata<T>(out[1]);
  std::copy(dy.begin(), dy.end(), dd.begin());
  // With overwriting, only the last write to an element reaches the output.
  std::map<std::int64_t, std::size_t> last;
  if (overwrite)
    for (std::size_t b = 0; b < p.at.size(); ++b) last[p.at[b]] = b;
  for (std::size_t b = 0; b < p.at.size(); ++b) {
    const bool reaches = !overwrite || last[p.at[b]] == b;
    for (std::int64_t e = 0; e < p.slice; ++e) {
      const auto d = static_cast<std::size_t>(p.at[b] + e), k = b * static_cast<std::size_t>(p.slice) + static_cast<std::size_t>(e);
      du[k] = reaches ? dy[d] : T(0);
    }
  }
  if (overwrite)
    for (std::int64_t a : p.at)
      for (std::int64_t e = 0; e < p.slice; ++e) dd[static_cast<std::size_t>(a + e)] = T(0);
}

void scatter_grad(GradBuilder& b, const Op& op) {
  const Red r = reduction(op);
  if (r != Red::None && r != Red::Add)
    fail(op, "has a gradient with reduction none or add only, not \"{}\": train without it, or use mode: inference",
         AttrReader(op).s("reduction"));
  const std::vector<std::string> outs{b.needs(op, 0) ? b.dx(op, 0) : GradBuilder::temp(op, "ddata"),
                                      b.needs(op, 2) ? b.dx(op, 2) : GradBuilder::temp(op, "dupdates")};
  Attrs attrs{{"reduction", AttrReader(op).s("reduction")}};
  if (!nd(op)) attrs["axis"] = AttrReader(op).i("axis");
  // The canonical type: an op may carry an alias (ONNX's Scatter before opset 11).
  b.emit(op, "", OpRegistry::instance().get(op.type).type + "Grad", {b.dy(op), op.inputs[1]}, outs, attrs);
}

OpDef scatter_def(std::string type, std::string doc, bool elements) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.attrs = {attr_str("reduction", "none", "none (overwrite; a repeated index: the last write wins), add, mul, max or min")};
  if (elements) d.attrs.push_back(attr_int("axis", 0, "scattered axis of data (negative counts from the end)"));
  return d;
}

}  // namespace

void register_scatter_ops(OpRegistry& r) {
  OpDef se = scatter_def("ScatterElements",
                         "copy of data with updates[k] at data's element whose coordinate `axis` is indices[k] (ONNX "
                         "ScatterElements)",
                         true);
  OpDef sn = scatter_def("ScatterND", "copy of data with each index tuple's slice replaced by (or reduced with) updates "
                         "(ONNX ScatterND)", false);
  se.aliases = {"Scatter"};
  for (OpDef* d : {&se, &sn}) {
    d->min_inputs = d->max_inputs = 3;
    d->input_names = {"data", "indices", "updates"};
    d->output_names = {"output"};
    d->infer = infer_scatter;
    d->reference = scatter_ref;
    d->gradient = scatter_grad;
    OpDef g = scatter_def(d->type + "Grad", "dData (0 where an update overwrote) and dUpdates of " + d->type,
                          d->type == "ScatterElements");
    g.min_inputs = g.max_inputs = 2;
    g.num_outputs = 2;
    g.input_names = {"dY", "indices"};
    g.output_names = {"dData", "dUpdates"};
    g.backward = true;
    g.infer = infer_scatter_grad;
    g.reference = typed(scatter_grad_ref<float>, scatter_grad_ref<double>);
    r.add(std::move(*d));
    r.add(std::move(g));
  }
}

}  // namespace probelab::graph::ops
