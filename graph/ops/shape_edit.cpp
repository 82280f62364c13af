// Data movement that edits shapes (ONNX semantics; shape-determining inputs are attributes):
// Unsqueeze, Squeeze, Split, Tile, Trilu, Dropout (inference: a copy and an all-true mask),
// DepthToSpace, SpaceToDepth (Pad: pad.cpp). Kernels move bytes, so every dtype works.
#include <algorithm>
#include <random>
#include <cstring>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

void copy_ref(const Op&, Ins in, Outs out, RefPrecision) {
  if (out[0].nbytes() != 0) std::memcpy(out[0].bytes().data(), in[0]->bytes().data(), out[0].nbytes());
}

void reshape_back(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  b.emit(op, "", "Reshape", {b.dy(op)}, {b.dx(op, 0)},
         {{"shape", b.desc(op.inputs[0]).shape}, {"allowzero", std::int64_t{1}}});
}

std::vector<bool> axis_set(const Op& op, const std::vector<std::int64_t>& axes, std::int64_t rank) {
  std::vector<bool> s(static_cast<std::size_t>(rank), false);
  for (std::int64_t a : axes) {
    const auto ax = static_cast<std::size_t>(norm_axis(op, a, rank));
    if (s[ax]) fail(op, "axis {} is listed twice", a);
    s[ax] = true;
  }
  return s;
}

// --- Unsqueeze / Squeeze --------------------------------------------------------------------------

std::vector<TensorDesc> infer_unsqueeze(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  const std::vector<std::int64_t> axes = op.attr_ints("axes");
  const auto rank = static_cast<std::int64_t>(in[0].shape.size() + axes.size());
  const std::vector<bool> at = axis_set(op, axes, rank);
  Shape s;
  std::size_t j = 0;
  for (std::int64_t d = 0; d < rank; ++d) s.push_back(at[static_cast<std::size_t>(d)] ? 1 : in[0].shape[j++]);
  return {TensorDesc{in[0].dtype, s, Format::ND}};
}

std::vector<TensorDesc> infer_squeeze(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  const Shape& x = in[0].shape;
  const std::vector<std::int64_t> axes = op.attr_ints("axes", {});
  std::vector<bool> at = axis_set(op, axes, static_cast<std::int64_t>(x.size()));
  Shape s;
  for (std::size_t d = 0; d < x.size(); ++d) {
    const bool drop = axes.empty() ? x[d] == 1 : at[d];
    if (drop && x[d] != 1) fail(op, "cannot squeeze axis {} of size {} (input {})", d, x[d], shape_str(x));
    if (!drop) s.push_back(x[d]);
  }
  return {TensorDesc{in[0].dtype, s, Format::ND}};
}

// --- Split ------------------------------------------------------------------------------------------

std::vector<std::int64_t> split_sizes(const Op& op, const Shape& x, std::size_t outputs) {
  if (const std::int64_t n = AttrReader(op).i("num_outputs"); n != 0 && n != static_cast<std::int64_t>(outputs))
    fail(op, "num_outputs {} differs from the {} outputs", n, outputs);
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(x.size())));
  std::vector<std::int64_t> sizes = op.attr_ints("split", {});
  if (sizes.empty()) {
    const auto n = static_cast<std::int64_t>(outputs);
    const std::int64_t each = (x[axis] + n - 1) / n;
    for (std::int64_t i = 0, left = x[axis]; i < n; ++i, left -= each) sizes.push_back(std::max<std::int64_t>(0, std::min(each, left)));
  }
  std::int64_t total = 0;
  for (std::int64_t s : sizes) total += s;
  if (sizes.size() != outputs || total != x[axis])
    fail(op, "split [{}] must have one entry per output ({}) summing to dimension {} of {}", fmt::join(sizes, ", "),
         outputs, axis, shape_str(x));
  return sizes;
}

std::vector<TensorDesc> infer_split(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  const Shape& x = in[0].shape;
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(x.size())));
  std::vector<TensorDesc> out;
  for (std::int64_t s : split_sizes(op, x, op.outputs.size())) {
    Shape o = x;
    o[axis] = s;
    out.push_back(TensorDesc{in[0].dtype, o, Format::ND});
  }
  return out;
}

void split_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape& x = in[0]->shape();
  const auto axis = static_cast<std::size_t>(norm_axis(op, AttrReader(op).i("axis"), static_cast<std::int64_t>(x.size())));
  const auto es = static_cast<std::int64_t>(dtype_size(in[0]->dtype()));
  const std::int64_t outer = prod(x, 0, axis), inner = prod(x, axis + 1, x.size()) * es;
  const std::byte* src = in[0]->bytes().data();
  std::int64_t col = 0;
  for (Tensor& o : out) {
    const std::int64_t row = o.shape()[axis] * inner;
    for (std::int64_t i = 0; row != 0 && i < outer; ++i)
      std::memcpy(o.bytes().data() + i * row, src + i * x[axis] * inner + col, static_cast<std::size_t>(row));
    col += row;
  }
}

void split_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < op.outputs.size(); ++i) {
    std::string g = b.dy(op, i);
    if (g.empty()) {  // an output no gradient reaches contributes zeros
      const TensorDesc& d = b.desc(op.outputs[i]);
      g = GradBuilder::temp(op, fmt::format("zeros{}", i));
      b.emit(op, fmt::format("zeros{}", i), "ConstantOfShape", {}, {g},
             {{"shape", d.shape}, {"value", 0.0}, {"dtype", onnx_code(d.dtype)}});
    }
    parts.push_back(g);
  }
  b.emit(op, "", "Concat", parts, {b.dx(op, 0)}, {{"axis", AttrReader(op).i("axis")}});
}

// --- Tile ---------------------------------------------------------------------------------------------

std::vector<TensorDesc> infer_tile(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  const std::vector<std::int64_t> reps = op.attr_ints("repeats");
  if (reps.size() != in[0].shape.size())
    fail(op, "repeats [{}] must have one entry per dimension of {}", fmt::join(reps, ", "), shape_str(in[0].shape));
  Shape s = in[0].shape;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (reps[d] < 0) fail(op, "repeats [{}] has a negative entry", fmt::join(reps, ", "));
    s[d] *= reps[d];
  }
  return {TensorDesc{in[0].dtype, s, Format::ND}};
}


void tile_ref(const Op&, Ins in, Outs out, RefPrecision) {
  const Shape& xs = in[0]->shape();
  const std::size_t es = dtype_size(in[0]->dtype());
  const std::byte* src = in[0]->bytes().data();
  std::byte* dst = out[0].bytes().data();
  for_each_mapped(out[0].shape(), xs, [&](std::size_t d, std::int64_t c) { return c % xs[d]; },
                  [&](std::int64_t k, std::int64_t off) { std::memcpy(dst + k * static_cast<std::int64_t>(es), src + off * static_cast<std::int64_t>(es), es); });
}

void tile_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  const Shape xs = b.desc(op.inputs[0]).shape;
  const std::vector<std::int64_t> reps = op.attr_ints("repeats");
  Shape split;
  std::vector<std::int64_t> axes;
  for (std::size_t d = 0; d < xs.size(); ++d) {
    axes.push_back(static_cast<std::int64_t>(split.size()));
    split.push_back(reps[d]);
    split.push_back(xs[d]);
  }
  const std::string t = GradBuilder::temp(op, "split");
  b.emit(op, "split", "Reshape", {b.dy(op)}, {t}, {{"shape", split}, {"allowzero", std::int64_t{1}}});
  b.emit(op, "", "ReduceSum", {t}, {b.dx(op, 0)}, {{"axes", axes}, {"keepdims", std::int64_t{0}}});
}

// --- Trilu --------------------------------------------------------------------------------------------

std::vector<TensorDesc> infer_trilu(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  if (in[0].shape.size() < 2) fail(op, "input must have rank >= 2, got {}", shape_str(in[0].shape));
  return {TensorDesc{in[0].dtype, in[0].shape, Format::ND}};
}

void trilu_ref(const Op& op, Ins in, Outs out, RefPrecision) {
  const Shape& s = in[0]->shape();
  const AttrReader at(op);
  const std::int64_t k = at.i("k");
  const bool upper = at.i("upper") != 0;
  const std::int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  const std::size_t es = dtype_size(in[0]->dtype());
  if (out[0].nbytes() != 0) std::memcpy(out[0].bytes().data(), in[0]->bytes().data(), out[0].nbytes());
  std::byte* y = out[0].bytes().data();
  const std::int64_t mats = rows * cols == 0 ? 0 : numel(s) / (rows * cols);
  for (std::int64_t m = 0; m < mats; ++m)
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep) std::memset(y + ((m * rows + i) * cols + j) * static_cast<std::int64_t>(es), 0, es);
      }
}

void trilu_grad(GradBuilder& b, const Op& op) {
  if (b.needs(op, 0)) b.emit(op, "", "Trilu", {b.dy(op)}, {b.dx(op, 0)}, op.attrs);
}

// --- Dropout -------------------------------------------------------------------------------------------

bool dropout_drops(const Op& op) { return AttrReader(op).i("training_mode") != 0 && AttrReader(op).f("ratio") > 0; }

std::vector<TensorDesc> infer_dropout(const Op& op, Descs in) {
  expect_inputs(op, in, 1, 1);
  expect_outputs(op, 1, 2);
  const double ratio = AttrReader(op).f("ratio");
  if (!(ratio >= 0 && ratio < 1)) fail(op, "ratio {} is outside [0, 1)", ratio);
  std::vector<TensorDesc> out{in[0]};
  if (op.outputs.size() > 1) out.push_back(TensorDesc{DType::Bool, in[0].shape, Format::ND});
  return out;
}

// Training mode keeps element i when u_i >= ratio, u_i the i-th draw of numpy's legacy uniform
// generator seeded with `seed` (MT19937 init_genrand, 53 bits from two 32-bit outputs), as ONNX's
// reference implementation draws it; kept elements are scaled by 1 / (1 - ratio). The same seed
// gives the same mask at every run, so a replay is deterministic.
template <class T>
void dropout_kernel(const Op& op, Ins in, Outs out) {
  const auto x = cdata<T>(in[0]);
  auto y = mdata<T>(out[0]);
  std::vector<std::uint8_t> keep(x.size(), 1);
  if (dropout_drops(op)) {
    const AttrReader at(op);
    const double ratio = at.f("ratio");
    std::mt19937 gen(static_cast<std::uint32_t>(op.attr_int("seed", 0)));
    for (auto& k : keep) {
      const std::uint32_t a = gen() >> 5, b = gen() >> 6;
      k = (a * 67108864.0 + b) / 9007199254740992.0 >= ratio ? 1 : 0;
    }
    const T scale = static_cast<T>(1.0 / (1.0 - ratio));
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = keep[i] ? x[i] * scale : T(0);
  } else {
    std::copy(x.begin(), x.end(), y.begin());
  }
  if (out.size() > 1) std::copy(keep.begin(), keep.end(), out[1].data<std::uint8_t>().begin());
}

// Y = mask * X * scale is linear in X with the same mask at every run: its gradient applies the
// same dropout to dY.
void dropout_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  if (dropout_drops(op)) b.emit(op, "", "Dropout", {b.dy(op)}, {b.dx(op, 0)}, op.attrs);
  else b.emit(op, "", "Identity", {b.dy(op)}, {b.dx(op, 0)});
}

// --- DepthToSpace / SpaceToDepth ---------------------------------------------------------------------

std::vector<TensorDesc> infer_depth_space(const Op& op, Descs in, bool to_space) {
  expect_inputs(op, in, 1, 1);
  expect_rank(op, in[0], 4, "input");
  const std::int64_t b = AttrReader(op).i("blocksize");
  const Shape& x = in[0].shape;
  if (b < 1) fail(op, "blocksize must be >= 1, got {}", b);
  if (to_space) {
    if (x[1] % (b * b) != 0) fail(op, "channels {} are not divisible by blocksize^2 = {}", x[1], b * b);
    return {TensorDesc{in[0].dtype, {x[0], x[1] / (b * b), x[2] * b, x[3] * b}, Format::ND}};
  }
  if (x[2] % b != 0 || x[3] % b != 0) fail(op, "spatial dims of {} are not divisible by blocksize {}", shape_str(x), b);
  return {TensorDesc{in[0].dtype, {x[0], x[1] * b * b, x[2] / b, x[3] / b}, Format::ND}};
}

// DCR: output (n, c, h*b + i, w*b + j) = input (n, (i*b + j)*C' + c, h, w); CRD: (n, c*b*b + i*b + j, h, w).
void depth_space_ref(const Op& op, Ins in, Outs out, bool to_space) {
  const std::int64_t b = AttrReader(op).i("blocksize");
  const bool crd = to_space && AttrReader(op).s("mode") == "CRD";
  const Shape& sp = to_space ? out[0].shape() : in[0]->shape();  // the space-side shape [N, C', H*b, W*b]
  const std::int64_t n = sp[0], c = sp[1], h = sp[2] / b, w = sp[3] / b;
  const std::size_t es = dtype_size(in[0]->dtype());
  const std::byte* src = in[0]->bytes().data();
  std::byte* dst = out[0].bytes().data();
  for (std::int64_t in_ = 0; in_ < n; ++in_)
    for (std::int64_t ic = 0; ic < c; ++ic)
      for (std::int64_t y = 0; y < h * b; ++y)
        for (std::int64_t x = 0; x < w * b; ++x) {
          const std::int64_t i = y % b, j = x % b;
          const std::int64_t dc = crd ? ic * b * b + i * b + j : (i * b + j) * c + ic;
          const std::int64_t space = ((in_ * c + ic) * h * b + y) * w * b + x;
          const std::int64_t depth = ((in_ * c * b * b + dc) * h + y / b) * w + x / b;
          const std::int64_t from = to_space ? depth : space, to = to_space ? space : depth;
          std::memcpy(dst + to * static_cast<std::int64_t>(es), src + from * static_cast<std::int64_t>(es), es);
        }
}

}  // namespace

void register_shape_edit_ops(OpRegistry& r) {
  OpDef un = data_op_def("Unsqueeze", "inserts size-1 dimensions at `axes` of the output", {attr_nodefault("axes", true, "output axes of the new dimensions")});
  un.infer = infer_unsqueeze;
  un.reference = copy_ref;
  un.gradient = reshape_back;
  r.add(std::move(un));

  OpDef sq = data_op_def("Squeeze", "removes size-1 dimensions (`axes`, default all of them)", {attr_ints("axes", {}, "axes to remove")});
  sq.infer = infer_squeeze;
  sq.reference = copy_ref;
  sq.gradient = reshape_back;
  r.add(std::move(sq));

  OpDef sp = data_op_def("Split", "cuts the input along `axis` into outputs of sizes `split` (default: equal parts)",
                 {attr_int("axis", 0, "axis to cut"), attr_ints("split", {}, "size of each output"),
                  attr_int("num_outputs", 0, "opset 18: number of outputs (must equal the output count)")});
  sp.num_outputs = -1;
  sp.min_outputs = 1;
  sp.output_names = {"outputs..."};
  sp.infer = infer_split;
  sp.reference = split_ref;
  sp.gradient = split_grad;
  r.add(std::move(sp));

  OpDef tile = data_op_def("Tile", "repeats the input `repeats[d]` times along each dimension d", {attr_nodefault("repeats", true, "repeat count per dimension")});
  tile.infer = infer_tile;
  tile.reference = tile_ref;
  tile.gradient = tile_grad;
  r.add(std::move(tile));

  OpDef tri = data_op_def("Trilu", "keeps the upper (or lower) triangle of the last two dims from diagonal k, zeros the rest",
                  {attr_int("upper", 1, "1: upper triangle, 0: lower"), attr_int("k", 0, "diagonal offset")});
  tri.infer = infer_trilu;
  tri.reference = trilu_ref;
  tri.gradient = trilu_grad;
  r.add(std::move(tri));

  OpDef drop = data_op_def("Dropout",
                   "Y = X (mask all true); training_mode: Y = mask * X / (1 - ratio), the mask numpy's draw seeded by `seed`",
                   {attr_float("ratio", 0.5, "drop probability"), attr_int("training_mode", 0, "1: training mode"),
                    attr_int("seed", 0, "seed of the mask's generator (numpy's legacy MT19937), the same mask at every run")});
  drop.num_outputs = -1;
  drop.min_outputs = 1;
  drop.max_outputs = 2;
  drop.output_names = {"output", "mask?"};
  drop.moves_elements = false;  // training mode scales what it keeps
  drop.infer = infer_dropout;
  drop.reference = typed(dropout_kernel<float>, dropout_kernel<double>);
  drop.gradient = dropout_grad;
  r.add(std::move(drop));

  OpDef d2s = data_op_def("DepthToSpace", "moves channel blocks into spatial blocks (modes DCR, CRD; inference only)",
                  {attr_nodefault("blocksize", true, "block edge"), attr_str("mode", "DCR", "DCR or CRD")});
  d2s.infer = [](const Op& op, Descs in) { return infer_depth_space(op, in, true); };
  d2s.reference = [](const Op& op, Ins in, Outs out, RefPrecision) { depth_space_ref(op, in, out, true); };
  r.add(std::move(d2s));

  OpDef s2d = data_op_def("SpaceToDepth", "moves spatial blocks into channels (the inverse of DepthToSpace DCR; inference only)",
                  {attr_nodefault("blocksize", true, "block edge")});
  s2d.infer = [](const Op& op, Descs in) { return infer_depth_space(op, in, false); };
  s2d.reference = [](const Op& op, Ins in, Outs out, RefPrecision) { depth_space_ref(op, in, out, false); };
  r.add(std::move(s2d));
}

}  // namespace probelab::graph::ops
