// MatMul (ONNX semantics: 1-D promotion, batched broadcasting), Gemm, and the MatMul backward ops.
#include <Eigen/Core>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

template <class T> using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using CMap = Eigen::Map<const Mat<T>>;
template <class T> using MMap = Eigen::Map<Mat<T>>;

// Geometry of A @ B after ONNX's 1-D promotion: A is batch_a x [M, K], B is batch_b x [K, N].
struct MatMulDims {
  Shape batch_a, batch_b, batch;
  std::int64_t m = 1, k = 1, n = 1;
  Shape out;
};

MatMulDims matmul_dims(const Op& op, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty())
    fail(op, "operands must have rank >= 1, got {} and {}", shape_str(a), shape_str(b));
  Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;
  Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  MatMulDims d;
  d.m = a2[a2.size() - 2];
  d.k = a2[a2.size() - 1];
  d.n = b2[b2.size() - 1];
  if (b2[b2.size() - 2] != d.k)
    fail(op, "inner dimensions differ: A {} has K = {}, B {} has K = {}", shape_str(a), d.k, shape_str(b),
         b2[b2.size() - 2]);
  d.batch_a.assign(a2.begin(), a2.end() - 2);
  d.batch_b.assign(b2.begin(), b2.end() - 2);
  d.batch = broadcast_shapes(op, d.batch_a, d.batch_b);
  d.out = d.batch;
  if (a.size() > 1) d.out.push_back(d.m);
  if (b.size() > 1) d.out.push_back(d.n);
  return d;
}

std::vector<TensorDesc> infer_matmul(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 2);
  expect_float(op, in[0], "input A");
  expect_same_dtype(op, in[0], in[1], "inputs A and B");
  return {TensorDesc{in[0].dtype, matmul_dims(op, in[0].shape, in[1].shape).out, Format::ND}};
}

// MatMulGradA(dY, B; a_shape) -> dA and MatMulGradB(A, dY; b_shape) -> dB.
std::vector<TensorDesc> infer_matmul_grad(const Op& op, Descs in, bool grad_a) {
  expect_inputs(op, in, 2, 2);
  const TensorDesc& dy = grad_a ? in[0] : in[1];
  const TensorDesc& other = grad_a ? in[1] : in[0];
  expect_float(op, dy, "input dY");
  expect_same_dtype(op, dy, other, "inputs");
  const Shape own = op.attr_ints(grad_a ? "a_shape" : "b_shape");
  const MatMulDims d = grad_a ? matmul_dims(op, own, other.shape) : matmul_dims(op, other.shape, own);
  if (d.out != dy.shape) fail(op, "dY has shape {}, expected {}", shape_str(dy.shape), shape_str(d.out));
  return {TensorDesc{dy.dtype, own, Format::ND}};
}

// Calls f(batch offset of A, batch offset of B, output batch index) per output batch.
template <class F>
void for_each_batch(const MatMulDims& d, F&& f) {
  for_each_broadcast(d.batch, d.batch_a, d.batch_b, f);
}

template <class T> void matmul_ref(const Op& op, Ins in, Outs out) {
  const MatMulDims d = matmul_dims(op, in[0]->shape(), in[1]->shape());
  const T* a = cdata<T>(in[0]).data();
  const T* b = cdata<T>(in[1]).data();
  T* y = mdata<T>(out[0]).data();
  for_each_batch(d, [&](std::int64_t ia, std::int64_t ib, std::int64_t k) {
    MMap<T>(y + k * d.m * d.n, d.m, d.n).noalias() =
        CMap<T>(a + ia * d.m * d.k, d.m, d.k) * CMap<T>(b + ib * d.k * d.n, d.k, d.n);
  });
}

template <class T> void matmul_grad_a_ref(const Op& op, Ins in, Outs out) {
  const MatMulDims d = matmul_dims(op, op.attr_ints("a_shape"), in[1]->shape());
  const T* dy = cdata<T>(in[0]).data();
  const T* b = cdata<T>(in[1]).data();
  T* da = mdata<T>(out[0]).data();  // zero-filled; broadcast batches accumulate
  for_each_batch(d, [&](std::int64_t ia, std::int64_t ib, std::int64_t k) {
    MMap<T>(da + ia * d.m * d.k, d.m, d.k).noalias() +=
        CMap<T>(dy + k * d.m * d.n, d.m, d.n) * CMap<T>(b + ib * d.k * d.n, d.k, d.n).transpose();
  });
}

template <class T> void matmul_grad_b_ref(const Op& op, Ins in, Outs out) {
  const MatMulDims d = matmul_dims(op, in[0]->shape(), op.attr_ints("b_shape"));
  const T* a = cdata<T>(in[0]).data();
  const T* dy = cdata<T>(in[1]).data();
  T* db = mdata<T>(out[0]).data();
  for_each_batch(d, [&](std::int64_t ia, std::int64_t ib, std::int64_t k) {
    MMap<T>(db + ib * d.k * d.n, d.k, d.n).noalias() +=
        CMap<T>(a + ia * d.m * d.k, d.m, d.k).transpose() * CMap<T>(dy + k * d.m * d.n, d.m, d.n);
  });
}

void matmul_grad(GradBuilder& b, const Op& op) {
  const std::string dy = b.dy(op);
  if (b.needs(op, 0))
    b.emit(op, "a", "MatMulGradA", {dy, op.inputs[1]}, {b.dx(op, 0)}, {{"a_shape", b.desc(op.inputs[0]).shape}});
  if (b.needs(op, 1))
    b.emit(op, "b", "MatMulGradB", {op.inputs[0], dy}, {b.dx(op, 1)}, {{"b_shape", b.desc(op.inputs[1]).shape}});
}

// --- Gemm ----------------------------------------------------------------------------------------

struct GemmDims {
  std::int64_t m, k, n;
};

GemmDims gemm_dims(const Op& op, const Shape& a, const Shape& b) {
  const AttrReader at(op);
  if (a.size() != 2 || b.size() != 2) fail(op, "A and B must be 2-D, got {} and {}", shape_str(a), shape_str(b));
  const bool ta = at.i("transA") != 0, tb = at.i("transB") != 0;
  const GemmDims d{ta ? a[1] : a[0], ta ? a[0] : a[1], tb ? b[0] : b[1]};
  const std::int64_t kb = tb ? b[1] : b[0];
  if (kb != d.k)
    fail(op, "inner dimensions differ: op(A) is {}x{}, op(B) is {}x{} (transA={}, transB={})", d.m, d.k, kb, d.n,
         int(ta), int(tb));
  return d;
}

std::vector<TensorDesc> infer_gemm(const Op& op, Descs in) {
  expect_inputs(op, in, 2, 3);
  expect_float(op, in[0], "input A");
  expect_same_dtype(op, in[0], in[1], "inputs A and B");
  const GemmDims d = gemm_dims(op, in[0].shape, in[1].shape);
  const Shape out{d.m, d.n};
  if (has_input(op, 2)) {
    expect_same_dtype(op, in[0], in[2], "inputs A and C");
    if (!broadcastable_to(in[2].shape, out))
      fail(op, "bias C {} does not broadcast to the output {}", shape_str(in[2].shape), shape_str(out));
  }
  return {TensorDesc{in[0].dtype, out, Format::ND}};
}

template <class T> void gemm_ref(const Op& op, Ins in, Outs out) {
  const AttrReader at(op);
  const GemmDims d = gemm_dims(op, in[0]->shape(), in[1]->shape());
  const T alpha = static_cast<T>(at.f("alpha")), beta = static_cast<T>(at.f("beta"));
  const CMap<T> a(cdata<T>(in[0]).data(), in[0]->shape()[0], in[0]->shape()[1]);
  const CMap<T> b(cdata<T>(in[1]).data(), in[1]->shape()[0], in[1]->shape()[1]);
  MMap<T> y(mdata<T>(out[0]).data(), d.m, d.n);
  const bool ta = at.i("transA") != 0, tb = at.i("transB") != 0;
  if (!ta && !tb) y.noalias() = a * b;
  else if (ta && !tb) y.noalias() = a.transpose() * b;
  else if (!ta && tb) y.noalias() = a * b.transpose();
  else y.noalias() = a.transpose() * b.transpose();
  y *= alpha;
  if (in.size() > 2 && in[2]) {
    auto c = cdata<T>(in[2]);
    auto yv = mdata<T>(out[0]);
    for_each_broadcast(out[0].shape(), in[2]->shape(), out[0].shape(),
                       [&](std::int64_t oc, std::int64_t, std::int64_t k) { yv[k] += beta * c[oc]; });
  }
}

void gemm_grad(GradBuilder& b, const Op& op) {
  const AttrReader at(op);
  const std::int64_t ta = at.i("transA") != 0, tb = at.i("transB") != 0;
  const double alpha = at.f("alpha"), beta = at.f("beta");
  const std::string dy = b.dy(op);
  const std::string& a = op.inputs[0];
  const std::string& bb = op.inputs[1];
  auto attrs = [&](std::int64_t t_a, std::int64_t t_b) {
    return Attrs{{"alpha", alpha}, {"transA", t_a}, {"transB", t_b}};
  };
  if (b.needs(op, 0)) {
    if (!ta) b.emit(op, "a", "Gemm", {dy, bb}, {b.dx(op, 0)}, attrs(0, 1 - tb));  // alpha dY op(B)^T
    else b.emit(op, "a", "Gemm", {bb, dy}, {b.dx(op, 0)}, attrs(tb, 1));          // alpha op(B) dY^T
  }
  if (b.needs(op, 1)) {
    if (!tb) b.emit(op, "b", "Gemm", {a, dy}, {b.dx(op, 1)}, attrs(1 - ta, 0));  // alpha op(A)^T dY
    else b.emit(op, "b", "Gemm", {dy, a}, {b.dx(op, 1)}, attrs(1, ta));          // alpha dY^T op(A)
  }
  if (has_input(op, 2) && b.needs(op, 2)) {
    const Shape ys = b.desc(op.outputs[0]).shape;
    if (beta == 1.0) b.reduce_to_input(op, 2, dy, ys, "c");
    else b.emit_to_input(op, 2, ys, "c", "Scale", {dy}, {{"alpha", beta}});
  }
}

OpDef matmul_grad_def(bool grad_a) {
  OpDef d;
  d.type = grad_a ? "MatMulGradA" : "MatMulGradB";
  d.doc = grad_a ? "dA of MatMul: dY @ B^T summed over broadcast batches" : "dB of MatMul: A^T @ dY summed over broadcast batches";
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {attr_nodefault(grad_a ? "a_shape" : "b_shape", true,
                            grad_a ? "shape of the forward input A" : "shape of the forward input B")};
  d.input_names = grad_a ? std::vector<std::string>{"dY", "B"} : std::vector<std::string>{"A", "dY"};
  d.output_names = {grad_a ? "dA" : "dB"};
  d.backward = true;
  d.infer = [grad_a](const Op& op, Descs in) { return infer_matmul_grad(op, in, grad_a); };
  d.reference = grad_a ? typed(matmul_grad_a_ref<float>, matmul_grad_a_ref<double>)
                       : typed(matmul_grad_b_ref<float>, matmul_grad_b_ref<double>);
  return d;
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  OpDef mm;
  mm.type = "MatMul";
  mm.doc = "matrix product with numpy semantics (1-D promotion, broadcast batch dimensions)";
  mm.min_inputs = mm.max_inputs = 2;
  mm.input_names = {"A", "B"};
  mm.output_names = {"Y"};
  mm.infer = infer_matmul;
  mm.reference = typed(matmul_ref<float>, matmul_ref<double>);
  mm.gradient = matmul_grad;
  r.add(std::move(mm));
  r.add(matmul_grad_def(true));
  r.add(matmul_grad_def(false));

  OpDef gemm;
  gemm.type = "Gemm";
  gemm.doc = "Y = alpha * op(A) @ op(B) + beta * C, op = optional transpose, C broadcast to [M, N]";
  gemm.min_inputs = 2;
  gemm.max_inputs = 3;
  gemm.attrs = {attr_float("alpha", 1.0, "scale of op(A) @ op(B)"), attr_float("beta", 1.0, "scale of C"),
                attr_int("transA", 0, "1: use A^T"), attr_int("transB", 0, "1: use B^T")};
  gemm.input_names = {"A", "B", "C?"};
  gemm.output_names = {"Y"};
  gemm.infer = infer_gemm;
  gemm.reference = typed(gemm_ref<float>, gemm_ref<double>);
  gemm.gradient = gemm_grad;
  r.add(std::move(gemm));
}

}  // namespace probelab::graph::ops
