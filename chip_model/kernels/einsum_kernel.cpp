// Einsum on the device. A two-operand Einsum that is a batched matrix product ("bhqd,bhkd->bhqk",
// "td,edh->teh"; graph/ops/einsum.h) runs on the Cube as MatMul does - its operands permuted into
// [batch, M, K] and [batch, K, N] by the MTE, one GEMM per batch in the op's accumulation mode,
// k ascending over A's summed labels in their order - so FP16 accumulation and its faults apply as
// to a MatMul. Any other Einsum (diagonals, three operands, sums over one operand) runs the
// generic Vector kernel.
#include <memory>
#include <optional>

#include "chip_model/kernels/cube_gemm.h"
#include "chip_model/kernels/cube_work.h"
#include "chip_model/kernels/kernel.h"
#include "chip_model/kernels/op_args_graph.h"
#include "chip_model/kernels/vector_kernel.h"
#include "graph/ops/einsum.h"

namespace probelab::chip::kernels {
namespace {

bool cube_dtype(graph::DType t) { return t == graph::DType::F16 || t == graph::DType::BF16 || t == graph::DType::F32; }

std::optional<graph::ops::EinsumGemm> plan(const graph::Op& op, const std::vector<graph::TensorDesc>& in) {
  if (in.size() != 2 || in[0].dtype != in[1].dtype || !cube_dtype(in[0].dtype)) return std::nullopt;
  return graph::ops::einsum_as_gemm(op, {in[0].shape, in[1].shape});
}

std::optional<graph::ops::EinsumGemm> plan(const KernelCall& c) {
  if (c.inputs.size() != 2 || !c.inputs[0] || !c.inputs[1]) return std::nullopt;
  return plan(c.op, {c.inputs[0]->desc(), c.inputs[1]->desc()});
}

class EinsumKernel final : public Kernel {
 public:
  Computed compute(const KernelCall& c) const override {
    const auto g = plan(c);
    if (!g) return compute_vector(c);
    graph::Tensor a = graph::ops::permuted(*c.inputs[0], g->perm_a);
    if (c.accum.input_scale != 1.0) a = scale_tensor(a, c.accum.input_scale, c.mode);
    const graph::Tensor b = graph::ops::permuted(*c.inputs[1], g->perm_b);
    Computed out;
    out.values.emplace_back(static_cast<std::size_t>(g->batch * g->m * g->n));
    out.flags.resize(1);
    for (std::int64_t i = 0; i < g->batch; ++i) {
      const num::BulkReport r = cube_gemm(g->m, g->n, g->k, operand_of(a, i * g->m * g->k, g->k, false),
                                          operand_of(b, i * g->k * g->n, g->n, false),
                                          out.values[0].data() + i * g->m * g->n, g->n, c.accum, c.mode);
      out.flags[0].merge(r, i * g->m * g->n);
    }
    return out;
  }

  OpWork work(const KernelCall& c) const override {
    const auto g = plan(c);
    if (!g) return vector_work(c);
    return cube_work(c, gemm_work(c, g->batch, g->m, g->n, g->k, g->batch, g->batch, 0, 1), 0);
  }

  bool uses_cube(const spec::OpArgs& a) const override {
    if (a.inputs.size() != 2) return false;
    return plan(op_from_args(a), {logical_desc(a.inputs[0]), logical_desc(a.inputs[1])}).has_value();
  }
  bool vector_output(const spec::OpArgs& a) const override { return !uses_cube(a); }
};

}  // namespace

void register_einsum_kernel(KernelRegistry& r) { r.add("Einsum", std::make_unique<EinsumKernel>()); }

}  // namespace probelab::chip::kernels
