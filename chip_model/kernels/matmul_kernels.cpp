// Cube kernels of the matrix products: MatMul, Gemm, MatMulGradA, MatMulGradB.
//
// K order (every output element accumulates in FP32 from +0, k ascending, see cube_gemm.h):
//   MatMul        one GEMM per output batch (numpy broadcasting of the batch dims), k = 0..K-1.
//   Gemm          k = 0..K-1 of op(A) @ op(B); then, in FP32 on the Vector unit,
//                 y = alpha * acc + beta * C[broadcast] (each product and the sum rounded to FP32).
//   MatMulGradA   dA[a] = sum over the output batches b that read A batch a (ascending) of
//                 dY[b] @ B[b]^T, as ONE accumulation with k = (b, n) row-major.
//   MatMulGradB   dB[j] = sum over the output batches b reading B batch j of A[b]^T @ dY[b], one
//                 accumulation with k = (b, m) row-major.
#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "chip_model/kernels/cube_gemm.h"
#include "chip_model/kernels/cube_work.h"
#include "chip_model/kernels/kernel.h"
#include "chip_model/kernels/op_args_graph.h"
#include "graph/format.h"
#include "graph/ops/op_util.h"

namespace probelab::chip::kernels {
namespace {

using graph::Shape;
using graph::Tensor;

// Geometry of A @ B after numpy's 1-D promotion: A is batch_a x [m, k], B is batch_b x [k, n].
struct MatMulDims {
  Shape batch_a, batch_b, batch;
  std::int64_t m = 1, k = 1, n = 1;
};

MatMulDims matmul_dims(const graph::Op& op, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) throw std::runtime_error(fmt::format("{}: MatMul operands need rank >= 1", op.name));
  const Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;
  const Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  MatMulDims d;
  d.m = a2[a2.size() - 2];
  d.k = a2[a2.size() - 1];
  d.n = b2[b2.size() - 1];
  if (b2[b2.size() - 2] != d.k)
    throw std::runtime_error(fmt::format("{}: inner dimensions differ ({} vs {})", op.name, graph::shape_str(a),
                                         graph::shape_str(b)));
  d.batch_a.assign(a2.begin(), a2.end() - 2);
  d.batch_b.assign(b2.begin(), b2.end() - 2);
  d.batch = graph::ops::broadcast_shapes(op, d.batch_a, d.batch_b);
  return d;
}

struct BatchPair {
  std::int64_t out, a, b;  // output batch, A batch, B batch
};

std::vector<BatchPair> batch_pairs(const MatMulDims& d) {
  std::vector<BatchPair> v;
  graph::ops::for_each_broadcast(d.batch, d.batch_a, d.batch_b,
                                 [&](std::int64_t ia, std::int64_t ib, std::int64_t o) { v.push_back({o, ia, ib}); });
  return v;
}

const Tensor& input(const KernelCall& c, std::size_t i) {
  if (i >= c.inputs.size() || !c.inputs[i])
    throw std::runtime_error(fmt::format("{} '{}': input {} is missing", c.op.type, c.op.name, i));
  return *c.inputs[i];
}

/// Input 0 scaled by the accumulation mode's input_scale (kept in `storage`).
const Tensor& scaled_first(const KernelCall& c, Tensor& storage) {
  if (c.accum.input_scale == 1.0) return input(c, 0);
  storage = scale_tensor(input(c, 0), c.accum.input_scale, c.mode);
  return storage;
}

}  // namespace

GemmWork gemm_work(const KernelCall& c, std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k,
                   std::int64_t a_distinct, std::int64_t b_distinct, std::size_t ia, std::size_t ib) {
  GemmWork g;
  g.count = count;
  g.m = m;
  g.n = n;
  g.k = k;
  g.in_bytes = static_cast<std::uint32_t>(graph::dtype_size(input(c, ia).dtype()));
  g.a_distinct = a_distinct;
  g.b_distinct = b_distinct;
  g.a_unique_bytes = graph::physical_nbytes(stored_desc(c.args.inputs[ia]));
  g.b_unique_bytes = graph::physical_nbytes(stored_desc(c.args.inputs[ib]));
  g.a_addr = c.args.inputs[ia].addr;
  g.b_addr = c.args.inputs[ib].addr;
  return g;
}

OpWork cube_work(const KernelCall& c, GemmWork g, std::uint64_t epilogue_elems) {
  OpWork w;
  w.flops = 2ull * static_cast<std::uint64_t>(g.count * g.m * g.n * g.k);
  w.gemms.push_back(g);
  w.vector_elems = epilogue_elems;
  for (std::size_t i = 0; i < c.args.inputs.size(); ++i)
    if (c.args.inputs[i].dtype != spec::kAbsentTensor) w.in_bytes += graph::physical_nbytes(stored_desc(c.args.inputs[i]));
  w.out_bytes = graph::physical_nbytes(stored_desc(c.args.outputs.at(0)));
  w.in_addr = c.args.inputs.at(0).addr;
  w.out_addr = c.args.outputs.at(0).addr;
  w.out_elem_bytes = static_cast<std::uint32_t>(graph::dtype_size(c.outputs[0].dtype));
  return w;
}

namespace {

class CubeKernel : public Kernel {
 public:
  bool uses_cube(const spec::OpArgs&) const override { return true; }
  bool vector_output(const spec::OpArgs&) const override { return false; }
};

// ---- MatMul ----------------------------------------------------------------------------------

class MatMulKernel final : public CubeKernel {
 public:
  Computed compute(const KernelCall& c) const override {
    Tensor scaled;
    const Tensor& a = scaled_first(c, scaled);
    const Tensor& b = input(c, 1);
    const MatMulDims d = matmul_dims(c.op, a.shape(), b.shape());
    Computed out;
    out.values.emplace_back(static_cast<std::size_t>(graph::numel(d.batch) * d.m * d.n));
    out.flags.resize(1);
    for (const BatchPair& p : batch_pairs(d)) {
      const num::BulkReport r =
          cube_gemm(d.m, d.n, d.k, operand_of(a, p.a * d.m * d.k, d.k, false), operand_of(b, p.b * d.k * d.n, d.n, false),
                    out.values[0].data() + p.out * d.m * d.n, d.n, c.accum, c.mode);
      out.flags[0].merge(r, p.out * d.m * d.n);
    }
    return out;
  }
  OpWork work(const KernelCall& c) const override {
    const MatMulDims d = matmul_dims(c.op, input(c, 0).shape(), input(c, 1).shape());
    return cube_work(c, gemm_work(c, graph::numel(d.batch), d.m, d.n, d.k, graph::numel(d.batch_a),
                                  graph::numel(d.batch_b), 0, 1),
                     0);
  }
};

// ---- Gemm ------------------------------------------------------------------------------------

struct GemmDims {
  std::int64_t m, k, n;
  bool ta, tb;
};

GemmDims gemm_dims(const KernelCall& c) {
  const graph::ops::AttrReader at(c.op);
  const Shape& a = input(c, 0).shape();
  const Shape& b = input(c, 1).shape();
  if (a.size() != 2 || b.size() != 2) throw std::runtime_error(fmt::format("Gemm '{}': A and B must be 2-D", c.op.name));
  GemmDims d{0, 0, 0, at.i("transA") != 0, at.i("transB") != 0};
  d.m = d.ta ? a[1] : a[0];
  d.k = d.ta ? a[0] : a[1];
  d.n = d.tb ? b[0] : b[1];
  if ((d.tb ? b[1] : b[0]) != d.k) throw std::runtime_error(fmt::format("Gemm '{}': inner dimensions differ", c.op.name));
  return d;
}

class GemmKernel final : public CubeKernel {
 public:
  bool vector_output(const spec::OpArgs& a) const override { return has_epilogue(a); }
  Computed compute(const KernelCall& c) const override {
    Tensor scaled;
    const Tensor& a = scaled_first(c, scaled);
    const Tensor& b = input(c, 1);
    const GemmDims d = gemm_dims(c);
    Computed out;
    out.values.emplace_back(static_cast<std::size_t>(d.m * d.n));
    out.flags.push_back(cube_gemm(d.m, d.n, d.k, operand_of(a, 0, a.shape()[1], d.ta),
                                  operand_of(b, 0, b.shape()[1], d.tb), out.values[0].data(), d.n, c.accum, c.mode));
    const graph::ops::AttrReader at(c.op);
    const auto alpha = static_cast<float>(at.f("alpha")), beta = static_cast<float>(at.f("beta"));
    FloatBuffer& y = out.values[0];
    if (alpha != 1.0f)
      for (float& v : y) v = alpha * v;
    if (c.inputs.size() > 2 && c.inputs[2]) {
      const std::vector<float> cv = c.inputs[2]->to_f32();
      graph::ops::for_each_broadcast(Shape{d.m, d.n}, c.inputs[2]->shape(), Shape{d.m, d.n},
                                     [&](std::int64_t ic, std::int64_t, std::int64_t k) { y[k] += beta * cv[ic]; });
    }
    return out;
  }
  OpWork work(const KernelCall& c) const override {
    const GemmDims d = gemm_dims(c);
    return cube_work(c, gemm_work(c, 1, d.m, d.n, d.k, 1, 1, 0, 1),
                     has_epilogue(c.args) ? static_cast<std::uint64_t>(d.m * d.n) : 0);
  }

 private:
  static bool has_epilogue(const spec::OpArgs& a) {
    auto alpha = a.attrs.find("alpha");
    const bool scaled = alpha != a.attrs.end() && std::holds_alternative<double>(alpha->second) &&
                        std::get<double>(alpha->second) != 1.0;
    return scaled || (a.inputs.size() > 2 && a.inputs[2].dtype != spec::kAbsentTensor);
  }
};

// ---- MatMulGradA / MatMulGradB -----------------------------------------------------------------

/// dA (grad_a) or dB: GEMMs grouped by the operand batch they produce; one FP32 accumulation per
/// group over K' = (batch, inner), materialising concatenated operands when a group has several.
class MatMulGradKernel final : public CubeKernel {
 public:
  explicit MatMulGradKernel(bool grad_a) : grad_a_(grad_a) {}

  Computed compute(const KernelCall& c) const override {
    Tensor scaled;
    const Tensor& x0 = scaled_first(c, scaled);  // dY (grad A) or A (grad B)
    const Tensor& x1 = input(c, 1);              // B (grad A) or dY (grad B)
    const Shape own = c.op.attr_ints(grad_a_ ? "a_shape" : "b_shape");
    const MatMulDims d = grad_a_ ? matmul_dims(c.op, own, x1.shape()) : matmul_dims(c.op, x0.shape(), own);
    const std::int64_t groups = graph::numel(grad_a_ ? d.batch_a : d.batch_b);
    // Result per group: grad A: [m x k] = dY'[m x J*n] @ B'[J*n x k]; grad B: [k x n] = A'[k x J*m] @ dY'[J*m x n].
    const std::int64_t rows = grad_a_ ? d.m : d.k, cols = grad_a_ ? d.k : d.n, inner = grad_a_ ? d.n : d.m;
    std::vector<std::vector<BatchPair>> members(static_cast<std::size_t>(groups));
    for (const BatchPair& p : batch_pairs(d)) members[static_cast<std::size_t>(grad_a_ ? p.a : p.b)].push_back(p);
    Computed out;
    out.values.emplace_back(static_cast<std::size_t>(groups * rows * cols), 0.0f);
    out.flags.resize(1);
    const std::size_t es = graph::dtype_size(x0.dtype());
    for (std::int64_t g = 0; g < groups; ++g) {
      const auto& mem = members[static_cast<std::size_t>(g)];
      const auto J = static_cast<std::int64_t>(mem.size());
      float* dst = out.values[0].data() + g * rows * cols;
      if (J == 0) continue;
      num::BulkReport r;
      if (J == 1) {
        const BatchPair& p = mem[0];
        if (grad_a_)
          r = cube_gemm(d.m, d.k, d.n, operand_of(x0, p.out * d.m * d.n, d.n, false),
                        operand_of(x1, p.b * d.k * d.n, d.n, true), dst, cols, c.accum, c.mode);
        else
          r = cube_gemm(d.k, d.n, d.m, operand_of(x0, p.a * d.m * d.k, d.k, true),
                        operand_of(x1, p.out * d.m * d.n, d.n, false), dst, cols, c.accum, c.mode);
      } else {
        // Left [rows x J*inner], right [J*inner x cols], both row-major copies.
        Tensor left(graph::TensorDesc{x0.dtype(), {rows, J * inner}, graph::Format::ND});
        Tensor right(graph::TensorDesc{x0.dtype(), {J * inner, cols}, graph::Format::ND});
        auto* lp = reinterpret_cast<std::byte*>(left.bytes().data());
        auto* rp = reinterpret_cast<std::byte*>(right.bytes().data());
        const auto* s0 = reinterpret_cast<const std::byte*>(x0.bytes().data());
        const auto* s1 = reinterpret_cast<const std::byte*>(x1.bytes().data());
        for (std::int64_t j = 0; j < J; ++j) {
          const BatchPair& p = mem[static_cast<std::size_t>(j)];
          for (std::int64_t r0 = 0; r0 < rows; ++r0)
            for (std::int64_t i = 0; i < inner; ++i) {
              // grad A: left(m, j*n + n') = dY[out](m, n'); grad B: left(k, j*m + m') = A[a](m', k).
              const std::int64_t src = grad_a_ ? p.out * d.m * d.n + r0 * d.n + i : p.a * d.m * d.k + i * d.k + r0;
              std::memcpy(lp + ((r0 * J * inner) + j * inner + i) * es, s0 + src * es, es);
            }
          for (std::int64_t i = 0; i < inner; ++i)
            for (std::int64_t c0 = 0; c0 < cols; ++c0) {
              // grad A: right(j*n + n', k) = B[b](k, n'); grad B: right(j*m + m', n) = dY[out](m', n).
              const std::int64_t src = grad_a_ ? p.b * d.k * d.n + c0 * d.n + i : p.out * d.m * d.n + i * d.n + c0;
              std::memcpy(rp + ((j * inner + i) * cols + c0) * es, s1 + src * es, es);
            }
        }
        r = cube_gemm(rows, cols, J * inner, operand_of(left, 0, J * inner, false), operand_of(right, 0, cols, false),
                      dst, cols, c.accum, c.mode);
      }
      out.flags[0].merge(r, g * rows * cols);
    }
    return out;
  }

  OpWork work(const KernelCall& c) const override {
    const Shape own = c.op.attr_ints(grad_a_ ? "a_shape" : "b_shape");
    const MatMulDims d =
        grad_a_ ? matmul_dims(c.op, own, input(c, 1).shape()) : matmul_dims(c.op, input(c, 0).shape(), own);
    const std::int64_t groups = graph::numel(grad_a_ ? d.batch_a : d.batch_b);
    const std::int64_t J = graph::numel(d.batch) / std::max<std::int64_t>(groups, 1);
    const std::int64_t rows = grad_a_ ? d.m : d.k, cols = grad_a_ ? d.k : d.n, inner = grad_a_ ? d.n : d.m;
    return cube_work(c, gemm_work(c, groups, rows, cols, J * inner, groups, groups, 0, 1), 0);
  }

 private:
  bool grad_a_;
};

}  // namespace

void register_conv_kernels(KernelRegistry& r);
void register_recurrent_kernels(KernelRegistry& r);
void register_integer_kernels(KernelRegistry& r);
void register_einsum_kernel(KernelRegistry& r);

void register_cube_kernels(KernelRegistry& r) {
  r.add("MatMul", std::make_unique<MatMulKernel>());
  r.add("Gemm", std::make_unique<GemmKernel>());
  r.add("MatMulGradA", std::make_unique<MatMulGradKernel>(true));
  r.add("MatMulGradB", std::make_unique<MatMulGradKernel>(false));
  register_conv_kernels(r);
  register_recurrent_kernels(r);
  register_integer_kernels(r);
  register_einsum_kernel(r);
}

}  // namespace probelab::chip::kernels
