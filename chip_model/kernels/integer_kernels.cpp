// Cube kernels of the integer matrix products of quantized models: MatMulInteger, ConvInteger,
// QLinearMatMul, QLinearConv. The Cube multiplies int8 / uint8 operands into an INT32 accumulator
// (exact; it wraps modulo 2^32 as the hardware's does); QLinear ops requantize in the epilogue on
// the Vector unit. The values are graph's reference (exact integer arithmetic, then the FP32
// requantization); the cost is the float kernel's GEMM of the same geometry read at one byte per
// operand element.
#include <memory>

#include "chip_model/kernels/kernel.h"
#include "chip_model/kernels/vector_kernel.h"
#include "graph/ops/quantize.h"

namespace probelab::chip::kernels {
namespace {

class IntegerCubeKernel final : public Kernel {
 public:
  Computed compute(const KernelCall& c) const override { return compute_vector(c); }  // exact integers

  OpWork work(const KernelCall& c) const override {
    // The float kernel's cost of the same product, on the integer operands.
    const graph::Op f = graph::ops::quant::integer_float_op(c.op);
    const graph::ops::quant::IntegerOperands at = graph::ops::quant::integer_operands(c.op);
    spec::OpArgs args = c.args;
    args.op_type = f.type;
    args.inputs = {c.args.inputs.at(at.a), c.args.inputs.at(at.b)};
    const std::vector<const graph::Tensor*> inputs{c.inputs[at.a], c.inputs[at.b]};
    const KernelCall fc{args, f, inputs, c.outputs, c.mode, c.accum};
    OpWork w = KernelRegistry::instance().get(f.type).work(fc);
    if (c.op.type.starts_with("QLinear")) {  // requantization epilogue: one multiply-round-clamp per output
      w.vector_elems += static_cast<std::uint64_t>(graph::numel(c.outputs[0].shape));
    }
    return w;
  }

  bool uses_cube(const spec::OpArgs&) const override { return true; }
  bool vector_output(const spec::OpArgs& a) const override { return a.op_type.starts_with("QLinear"); }
};

}  // namespace

void register_integer_kernels(KernelRegistry& r) {
  for (const char* type : {"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv"})
    r.add(type, std::make_unique<IntegerCubeKernel>());
}

}  // namespace probelab::chip::kernels
