// Cube kernels of convolution via im2col: Conv, ConvGradWeight and ConvGradInput (1 to 3 spatial
// dims; NCHW for 2-D).
//
// K order (FP32 accumulation from +0, k ascending, see cube_gemm.h):
//   Conv            per image n and group g: Y[n, g] = W_g [mg x R] @ cols(X[n], g) [R x P] with
//                   k = (c, kh, kw) row-major over the group's input channels and the kernel window
//                   (R = C/group * kH * kW, P = oH * oW); padding contributes zeros that are
//                   multiplied like any operand; then bias b[m] is added in FP32. Depthwise
//                   groups (one input channel) skip the columns where that gives the same bits
//                   (depthwise_conv.h).
//   ConvGradWeight  per group: dW_g [mg x R] = dY_g [mg x N*P] @ cols_g^T [N*P x R], one
//                   accumulation with k = (n, oh, ow) row-major.
//   ConvTranspose   as ConvGradInput over N-D tap tables, with k = c of the group, then bias.
//   ConvGradInput   per image and group: dcols [R x P] = W_g^T @ dY[n, g] with k = m of the group,
//                   then col2im adds the columns into dX in FP32 in the order (c, kh, kw, oh, ow);
//                   accumulation flags of dcols are reported at the first element of the image.
#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <stdexcept>

#include "chip_model/kernels/cube_gemm.h"
#include "chip_model/kernels/depthwise_conv.h"
#include "chip_model/kernels/kernel.h"
#include "chip_model/kernels/op_args_graph.h"
#include "graph/format.h"
#include "graph/ops/conv_transpose.h"
#include "graph/ops/op_util.h"
#include "graph/ops/spatial.h"

namespace probelab::chip::kernels {
namespace {

using graph::Shape;
using graph::Tensor;

struct ConvGeom {
  std::int64_t n = 0, c = 0, m = 0, group = 1;
  ConvShape s;  // of one group
  std::int64_t mg() const { return m / group; }
  std::int64_t chw() const { return c * s.h * s.w; }
};

ConvGeom conv_geom(const graph::Op& op, const Shape& x, const Shape& w) {
  if (x.size() != 4 || w.size() != 4)
    throw std::runtime_error(fmt::format("{} '{}': X and W must be 4-D (got {} and {})", op.type, op.name,
                                         graph::shape_str(x), graph::shape_str(w)));
  ConvGeom g;
  g.n = x[0];
  g.c = x[1];
  g.m = w[0];
  g.group = graph::ops::AttrReader(op).i("group");
  if (g.group < 1 || g.c % g.group != 0 || g.m % g.group != 0 || w[1] != g.c / g.group)
    throw std::runtime_error(fmt::format("{} '{}': group {} does not fit X {} and W {}", op.type, op.name, g.group,
                                         graph::shape_str(x), graph::shape_str(w)));
  const auto k = graph::ops::kernel_shape(op, 2, {w[2], w[3]});
  const graph::ops::Window win = graph::ops::make_window(op, {x[2], x[3]}, k, false);
  g.s.c = g.c / g.group;
  g.s.h = x[2];
  g.s.w = x[3];
  g.s.kh = win.kernel[0];
  g.s.kw = win.kernel[1];
  g.s.sh = win.stride[0];
  g.s.sw = win.stride[1];
  g.s.dh = win.dilation[0];
  g.s.dw = win.dilation[1];
  g.s.ph = win.pad_begin[0];
  g.s.pw = win.pad_begin[1];
  g.s.oh = win.out[0];
  g.s.ow = win.out[1];
  return g;
}

// Convolutions with 1 or 3 spatial dims go through a tap table (graph::ops::tap_table) instead
// of the 2-D ConvShape; the K order is the same, k = (c, tap) row-major.
struct NdGeom {
  std::int64_t n = 0, c = 0, m = 0, group = 1;
  graph::ops::Window win;
  std::vector<std::int64_t> taps;
  std::int64_t cg() const { return c / group; }
  std::int64_t mg() const { return m / group; }
  std::int64_t rows() const { return cg() * win.kernel_numel(); }
  std::int64_t cols() const { return win.out_numel(); }
  std::int64_t plane() const { return win.in_numel(); }
};

NdGeom nd_geom(const graph::Op& op, const Shape& x, const Shape& w, bool with_taps) {
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
    throw std::runtime_error(fmt::format("{} '{}': X {} and W {} must be [N, C, D...] with 1 to 3 spatial dims",
                                         op.type, op.name, graph::shape_str(x), graph::shape_str(w)));
  NdGeom g;
  g.n = x[0];
  g.c = x[1];
  g.m = w[0];
  g.group = graph::ops::AttrReader(op).i("group");
  if (g.group < 1 || g.c % g.group != 0 || g.m % g.group != 0 || w[1] != g.c / g.group)
    throw std::runtime_error(fmt::format("{} '{}': group {} does not fit X {} and W {}", op.type, op.name, g.group,
                                         graph::shape_str(x), graph::shape_str(w)));
  const std::size_t r = x.size() - 2;
  const auto k = graph::ops::kernel_shape(op, r, {w.begin() + 2, w.end()});
  g.win = graph::ops::make_window(op, {x.begin() + 2, x.end()}, k, false);
  if (with_taps) g.taps = graph::ops::tap_table(g.win);
  return g;
}

const Tensor& input(const KernelCall& c, std::size_t i) {
  if (i >= c.inputs.size() || !c.inputs[i])
    throw std::runtime_error(fmt::format("{} '{}': input {} is missing", c.op.type, c.op.name, i));
  return *c.inputs[i];
}

const Tensor& scaled_first(const KernelCall& c, Tensor& storage) {
  if (c.accum.input_scale == 1.0) return input(c, 0);
  storage = scale_tensor(input(c, 0), c.accum.input_scale, c.mode);
  return storage;
}

const std::byte* bytes_at(const Tensor& t, std::int64_t elem) {
  return reinterpret_cast<const std::byte*>(t.bytes().data()) + static_cast<std::size_t>(elem) * graph::dtype_size(t.dtype());
}

OpWork conv_work(const KernelCall& c, GemmWork g, std::size_t a_in, std::size_t b_in, std::uint64_t epilogue) {
  g.in_bytes = static_cast<std::uint32_t>(graph::dtype_size(input(c, 0).dtype()));
  g.a_unique_bytes = graph::physical_nbytes(stored_desc(c.args.inputs[a_in]));
  g.b_unique_bytes = graph::physical_nbytes(stored_desc(c.args.inputs[b_in]));
  g.a_addr = c.args.inputs[a_in].addr;
  g.b_addr = c.args.inputs[b_in].addr;
  OpWork w;
  w.flops = 2ull * static_cast<std::uint64_t>(g.count * g.m * g.n * g.k);
  w.gemms.push_back(g);
  w.vector_elems = epilogue;
  for (const auto& ref : c.args.inputs)
    if (ref.dtype != spec::kAbsentTensor) w.in_bytes += graph::physical_nbytes(stored_desc(ref));
  w.out_bytes = graph::physical_nbytes(stored_desc(c.args.outputs.at(0)));
  w.in_addr = c.args.inputs.at(0).addr;
  w.out_addr = c.args.outputs.at(0).addr;
  w.out_elem_bytes = static_cast<std::uint32_t>(graph::dtype_size(c.outputs[0].dtype));
  return w;
}

GemmWork shape(std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t ad, std::int64_t bd) {
  GemmWork g;
  g.count = count;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a_distinct = ad;
  g.b_distinct = bd;
  return g;
}

class ConvKernelBase : public Kernel {
 public:
  bool uses_cube(const spec::OpArgs&) const override { return true; }
};

// ---- Conv --------------------------------------------------------------------------------------

class ConvKernel final : public ConvKernelBase {
 public:
  bool vector_output(const spec::OpArgs& a) const override {
    return a.inputs.size() > 2 && a.inputs[2].dtype != spec::kAbsentTensor;
  }
  Computed compute(const KernelCall& c) const override {
    Tensor scaled;
    const Tensor& x = scaled_first(c, scaled);
    const Tensor& w = input(c, 1);
    Computed out;
    out.flags.resize(1);
    std::int64_t m_total = 0, P = 0, n_img = 0;
    if (x.shape().size() == 4) {
      const ConvGeom g = conv_geom(c.op, x.shape(), w.shape());
      const std::int64_t R = g.s.rows(), mg = g.mg();
      P = g.s.cols();
      m_total = g.m;
      n_img = g.n;
      const std::size_t es = graph::dtype_size(x.dtype());
      // A 1x1 window with unit stride and no padding reads the image as it is: its columns are
      // the image's channels, so the Cube reads them in place (the same values in the same K order).
      const bool identity = g.s.kh == 1 && g.s.kw == 1 && g.s.sh == 1 && g.s.sw == 1 && g.s.ph == 0 && g.s.pw == 0 &&
                            g.s.oh == g.s.h && g.s.ow == g.s.w;
      out.values.emplace_back(static_cast<std::size_t>(g.n * g.m * P));
      // One input channel per group (depthwise): the same bits without the columns, when the operands allow.
      const std::optional<num::BulkReport> dw = depthwise_conv(g.s, g.n, g.group, mg, x, w, c.accum, c.mode, out.values[0].data());
      const bool direct = dw.has_value();
      if (direct) out.flags[0] = *dw;
      // im2col writes every column element (padding taps as zeros).
      Tensor cols = identity || direct ? Tensor() : Tensor::for_overwrite(graph::TensorDesc{x.dtype(), {R, P}, graph::Format::ND});
      auto* cp = reinterpret_cast<std::byte*>(cols.bytes().data());
      for (std::int64_t n = 0; n < g.n && !direct; ++n)
        for (std::int64_t grp = 0; grp < g.group; ++grp) {
          const std::int64_t img = n * g.chw() + grp * g.s.c * g.s.h * g.s.w;
          if (!identity) im2col(g.s, bytes_at(x, img), es, cp, P);
          const CubeOperand b = identity ? operand_of(x, img, P, false) : operand_of(cols, 0, P, false);
          const std::int64_t y0 = (n * g.m + grp * mg) * P;
          out.flags[0].merge(cube_gemm(mg, P, R, operand_of(w, grp * mg * R, R, false), b, out.values[0].data() + y0, P,
                                       c.accum, c.mode),
                             y0);
        }
    } else {
      const NdGeom g = nd_geom(c.op, x.shape(), w.shape(), true);
      const std::int64_t R = g.rows(), mg = g.mg(), kn = g.win.kernel_numel();
      P = g.cols();
      m_total = g.m;
      n_img = g.n;
      const std::size_t es = graph::dtype_size(x.dtype());
      Tensor cols = Tensor::for_overwrite(graph::TensorDesc{x.dtype(), {R, P}, graph::Format::ND});  // as above
      auto* cp = reinterpret_cast<std::byte*>(cols.bytes().data());
      out.values.emplace_back(static_cast<std::size_t>(g.n * g.m * P));
      for (std::int64_t n = 0; n < g.n; ++n)
        for (std::int64_t grp = 0; grp < g.group; ++grp) {
          im2col_taps(g.taps, g.cg(), kn, P, g.plane(), bytes_at(x, (n * g.c + grp * g.cg()) * g.plane()), es, cp, P);
          const std::int64_t y0 = (n * g.m + grp * mg) * P;
          out.flags[0].merge(cube_gemm(mg, P, R, operand_of(w, grp * mg * R, R, false), operand_of(cols, 0, P, false),
                                       out.values[0].data() + y0, P, c.accum, c.mode),
                             y0);
        }
    }
    if (c.inputs.size() > 2 && c.inputs[2]) {
      const std::vector<float> b = c.inputs[2]->to_f32();
      for (std::int64_t n = 0; n < n_img; ++n)
        for (std::int64_t m = 0; m < m_total; ++m) {
          float* y = out.values[0].data() + (n * m_total + m) * P;
          for (std::int64_t p = 0; p < P; ++p) y[p] += b[static_cast<std::size_t>(m)];
        }
    }
    return out;
  }
  OpWork work(const KernelCall& c) const override {
    const bool bias = c.inputs.size() > 2 && c.inputs[2];
    const Shape& xs = input(c, 0).shape();
    std::int64_t n, group, mg, P, R, m;
    if (xs.size() == 4) {
      const ConvGeom g = conv_geom(c.op, xs, input(c, 1).shape());
      n = g.n, group = g.group, mg = g.mg(), P = g.s.cols(), R = g.s.rows(), m = g.m;
    } else {
      const NdGeom g = nd_geom(c.op, xs, input(c, 1).shape(), false);
      n = g.n, group = g.group, mg = g.mg(), P = g.cols(), R = g.rows(), m = g.m;
    }
    // Operand A = weights (one matrix per group), B = columns of each (image, group).
    return conv_work(c, shape(n * group, mg, P, R, group, n * group), 1, 0,
                     bias ? static_cast<std::uint64_t>(n * m * P) : 0);
  }
};

// ---- ConvGradWeight (dY, X; weight_shape) / ConvGradInput (dY, W; input_shape) ----------------

// What the gradient kernels need of a convolution of 1 to 3 spatial dims: the 2-D one through
// ConvShape (im2col / col2im), the others through a tap table; the same K orders.
struct GradGeom {
  std::int64_t n = 0, c = 0, m = 0, group = 1, R = 0, P = 0, plane = 0;
  std::optional<ConvGeom> two_d;
  std::optional<NdGeom> nd;
  std::int64_t mg() const { return m / group; }
  std::int64_t cg() const { return c / group; }
  /// The columns of image n's group grp (elements of `es` bytes) into dst, rows `ld` apart.
  void im2col(const std::byte* x, std::size_t es, std::int64_t img, std::int64_t grp, std::byte* dst, std::int64_t ld) const {
    const std::byte* src = x + static_cast<std::size_t>((img * c + grp * cg()) * plane) * es;
    if (two_d) kernels::im2col(two_d->s, src, es, dst, ld);
    else im2col_taps(nd->taps, cg(), nd->win.kernel_numel(), P, plane, src, es, dst, ld);
  }
  /// Adds the columns [R x P] of image n's group grp into dx (FP32).
  void col2im(const float* cols, std::int64_t img, std::int64_t grp, float* dx) const {
    float* dst = dx + (img * c + grp * cg()) * plane;
    if (two_d) kernels::col2im(two_d->s, cols, dst);
    else col2im_taps(nd->taps, cg(), nd->win.kernel_numel(), P, plane, cols, dst);
  }
};

GradGeom grad_geom(const graph::Op& op, const Shape& x, const Shape& w, bool with_taps) {
  GradGeom g;
  if (x.size() == 4) {
    g.two_d = conv_geom(op, x, w);
    g.n = g.two_d->n, g.c = g.two_d->c, g.m = g.two_d->m, g.group = g.two_d->group;
    g.R = g.two_d->s.rows(), g.P = g.two_d->s.cols(), g.plane = g.two_d->s.h * g.two_d->s.w;
  } else {
    g.nd = nd_geom(op, x, w, with_taps);
    g.n = g.nd->n, g.c = g.nd->c, g.m = g.nd->m, g.group = g.nd->group;
    g.R = g.nd->rows(), g.P = g.nd->cols(), g.plane = g.nd->plane();
  }
  return g;
}

class ConvGradWeightKernel final : public ConvKernelBase {
 public:
  bool vector_output(const spec::OpArgs&) const override { return false; }
  Computed compute(const KernelCall& c) const override {
    Tensor scaled;
    const Tensor& dy = scaled_first(c, scaled);
    const Tensor& x = input(c, 1);
    const GradGeom g = grad_geom(c.op, x.shape(), c.op.attr_ints("weight_shape"), true);
    const std::int64_t R = g.R, P = g.P, mg = g.mg(), NP = g.n * P;
    const std::size_t es = graph::dtype_size(x.dtype());
    if (dy.dtype() != x.dtype()) throw std::runtime_error(fmt::format("ConvGradWeight '{}': dY and X differ in dtype", c.op.name));
    Tensor left(graph::TensorDesc{dy.dtype(), {mg, NP}, graph::Format::ND});   // dY_g, k = (n, p)
    Tensor right(graph::TensorDesc{x.dtype(), {R, NP}, graph::Format::ND});    // cols_g, read transposed
    auto* lp = reinterpret_cast<std::byte*>(left.bytes().data());
    auto* rp = reinterpret_cast<std::byte*>(right.bytes().data());
    const auto* xp = reinterpret_cast<const std::byte*>(x.bytes().data());
    Computed out;
    out.values.emplace_back(static_cast<std::size_t>(g.m * R));
    out.flags.resize(1);
    for (std::int64_t grp = 0; grp < g.group; ++grp) {
      for (std::int64_t n = 0; n < g.n; ++n) {
        for (std::int64_t m = 0; m < mg; ++m)
          std::memcpy(lp + static_cast<std::size_t>(m * NP + n * P) * es, bytes_at(dy, (n * g.m + grp * mg + m) * P),
                      static_cast<std::size_t>(P) * es);
        g.im2col(xp, es, n, grp, rp + static_cast<std::size_t>(n * P) * es, NP);
      }
      const std::int64_t w0 = grp * mg * R;
      out.flags[0].merge(cube_gemm(mg, R, NP, operand_of(left, 0, NP, false), operand_of(right, 0, NP, true),
                                   out.values[0].data() + w0, R, c.accum, c.mode),
                         w0);
    }
    return out;
  }
  OpWork work(const KernelCall& c) const override {
    const GradGeom g = grad_geom(c.op, input(c, 1).shape(), c.op.attr_ints("weight_shape"), false);
    return conv_work(c, shape(g.group, g.mg(), g.R, g.n * g.P, g.group, g.group), 0, 1, 0);
  }
};

class ConvGradInputKernel final : public ConvKernelBase {
 public:
  Computed compute(const KernelCall& c) const override {
    Tensor scaled;
    const Tensor& dy = scaled_first(c, scaled);
    const Tensor& w = input(c, 1);
    const GradGeom g = grad_geom(c.op, c.op.attr_ints("input_shape"), w.shape(), true);
    const std::int64_t R = g.R, P = g.P, mg = g.mg();
    std::vector<float> dcols(static_cast<std::size_t>(R * P));
    Computed out;
    out.values.emplace_back(static_cast<std::size_t>(g.n * g.c * g.plane), 0.0f);
    out.flags.resize(1);
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t grp = 0; grp < g.group; ++grp) {
        const num::BulkReport r = cube_gemm(R, P, mg, operand_of(w, grp * mg * R, R, true),
                                            operand_of(dy, (n * g.m + grp * mg) * P, P, false), dcols.data(), P,
                                            c.accum, c.mode);
        g.col2im(dcols.data(), n, grp, out.values[0].data());
        if (r.flags.any()) out.flags[0].raise(r.flags, (n * g.c + grp * g.cg()) * g.plane);
      }
    return out;
  }
  OpWork work(const KernelCall& c) const override {
    const GradGeom g = grad_geom(c.op, c.op.attr_ints("input_shape"), input(c, 1).shape(), false);
    // Operand A = W_g^T (one per group), B = dY of each (image, group); col2im on the Vector unit.
    return conv_work(c, shape(g.n * g.group, g.R, g.P, g.mg(), g.group, g.n * g.group), 1, 0,
                     static_cast<std::uint64_t>(g.n * g.group * g.R * g.P));
  }
};

// ---- ConvTranspose (X, W, B?) -------------------------------------------------------------------

// Per image and group, the Cube computes cols [R x P] = W_g^T @ X[n, g] with k = c of the group
// (R = M/group * taps, P = X's spatial size); the Vector unit then adds the columns into Y
// (col2im over the tap table, order (c, tap, p)) and the bias, in FP32.
class ConvTransposeKernel final : public ConvKernelBase {
 public:
  Computed compute(const KernelCall& c) const override {
    Tensor scaled;
    const Tensor& x = scaled_first(c, scaled);
    const Tensor& w = input(c, 1);
    const graph::ops::ConvTransposeGeom g = graph::ops::conv_transpose_geom(c.op, x.shape(), w.shape());
    const std::vector<std::int64_t> taps = graph::ops::tap_table(g.win);
    const std::int64_t P = g.win.out_numel(), plane = g.win.in_numel(), kn = g.win.kernel_numel();
    const std::int64_t cg = g.cg(), mg = g.mg(), R = mg * kn;
    std::vector<float> cols(static_cast<std::size_t>(R * P));
    Computed out;
    out.values.emplace_back(static_cast<std::size_t>(g.n * g.m * plane), 0.0f);
    out.flags.resize(1);
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t grp = 0; grp < g.group; ++grp) {
        const num::BulkReport r = cube_gemm(R, P, cg, operand_of(w, grp * cg * R, R, true),
                                            operand_of(x, (n * g.c + grp * cg) * P, P, false), cols.data(), P,
                                            c.accum, c.mode);
        const std::int64_t y0 = (n * g.m + grp * mg) * plane;
        col2im_taps(taps, mg, kn, P, plane, cols.data(), out.values[0].data() + y0);
        if (r.flags.any()) out.flags[0].raise(r.flags, y0);
      }
    if (c.inputs.size() > 2 && c.inputs[2]) {
      const std::vector<float> b = c.inputs[2]->to_f32();
      for (std::int64_t n = 0; n < g.n; ++n)
        for (std::int64_t m = 0; m < g.m; ++m) {
          float* y = out.values[0].data() + (n * g.m + m) * plane;
          for (std::int64_t p = 0; p < plane; ++p) y[p] += b[static_cast<std::size_t>(m)];
        }
    }
    return out;
  }
  OpWork work(const KernelCall& c) const override {
    const graph::ops::ConvTransposeGeom g =
        graph::ops::conv_transpose_geom(c.op, input(c, 0).shape(), input(c, 1).shape());
    const std::int64_t P = g.win.out_numel(), R = g.mg() * g.win.kernel_numel();
    // Operand A = W_g^T (one per group), B = X of each (image, group); col2im on the Vector unit.
    return conv_work(c, shape(g.n * g.group, R, P, g.cg(), g.group, g.n * g.group), 1, 0,
                     static_cast<std::uint64_t>(g.n * g.group * R * P));
  }
};

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  r.add("Conv", std::make_unique<ConvKernel>());
  r.add("ConvGradWeight", std::make_unique<ConvGradWeightKernel>());
  r.add("ConvGradInput", std::make_unique<ConvGradInputKernel>());
  r.add("ConvTranspose", std::make_unique<ConvTransposeKernel>());
}

}  // namespace probelab::chip::kernels
