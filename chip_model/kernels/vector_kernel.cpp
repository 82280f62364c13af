// Generic Vector kernel: graph's FP32 reference kernel on exactly converted inputs.
#include "chip_model/kernels/vector_kernel.h"

#include <algorithm>
#include <map>

#include "chip_model/kernels/op_args_graph.h"
#include "chip_model/kernels/op_runner.h"
#include "graph/format.h"
#include "graph/op_registry.h"

namespace probelab::chip::kernels {

double vector_passes(const graph::Op& op) {
  static const std::map<std::string, double> kPasses = {
      {"Reshape", 0},  {"Flatten", 0},  {"Identity", 0}, {"Concat", 0},  {"Slice", 0},
      {"SliceGrad", 0}, {"PadGrad", 1}, {"Expand", 0},  {"Gather", 0},   {"GatherGrad", 1}, {"Transpose", 1},
      {"Add", 1},      {"Sub", 1},      {"Mul", 1},      {"Div", 2},     {"Scale", 1},
      {"Relu", 1},     {"ReluGrad", 1}, {"SumToShape", 1}, {"ReduceSum", 1}, {"ReduceMean", 1},
      {"GlobalAveragePool", 1},         {"Sigmoid", 4},  {"Tanh", 4},    {"Gelu", 4},
      {"SigmoidGrad", 3}, {"TanhGrad", 3}, {"GeluGrad", 6}, {"Softmax", 5}, {"LogSoftmax", 5},
      {"SoftmaxGrad", 4}, {"LogSoftmaxGrad", 4}, {"LayerNormalization", 6},
      {"LayerNormalizationGrad", 10}, {"BatchNormalization", 6}, {"BatchNormalizationGrad", 8},
      {"InstanceNormalization", 6}, {"InstanceNormalizationGrad", 10},
      {"MeanVarianceNormalization", 6}, {"MeanVarianceNormalizationGrad", 10},
      {"LpNormalization", 4}, {"LpNormalizationGrad", 6}, {"GlobalLpPool", 3}, {"GlobalLpPoolGrad", 4},
      {"SoftmaxCrossEntropyLoss", 6}, {"SoftmaxCrossEntropyLossGrad", 4}, {"MSELoss", 3},
      {"MSELossGrad", 2}, {"SgdUpdate", 3}, {"AdamUpdate", 12},
  };
  const graph::OpDef* def = graph::OpRegistry::instance().find(op.type);
  const std::string type = def ? def->type : op.type;
  if (type == "GridSample" || type == "GridSampleGrad") {  // 1, 4 or 16 gathered taps per output (backward: twice)
    const std::string mode = op.attr_str("mode", "bilinear");
    return (mode == "nearest" ? 2.0 : mode == "bicubic" ? 32.0 : 8.0) * (type == "GridSampleGrad" ? 2 : 1);
  }
  if (type == "LRN" || type == "LRNGrad")  // a square per window channel, then a power (backward: two)
    return static_cast<double>(std::max<std::int64_t>(op.attr_int("size", 1), 1)) + (type == "LRNGrad" ? 8.0 : 4.0);
  if (type == "MaxPool" || type == "AveragePool" || type == "MaxPoolGrad" || type == "AveragePoolGrad") {
    double k = 1;
    for (std::int64_t d : op.attr_ints("kernel_shape", {})) k *= static_cast<double>(d);
    return std::max(1.0, k);
  }
  auto it = kPasses.find(type);
  return it == kPasses.end() ? 2.0 : it->second;
}

std::vector<graph::Tensor> run_vector(const graph::Op& op, std::span<const graph::Tensor* const> inputs,
                                      const num::Mode& mode) {
  std::vector<graph::Tensor> f32;
  f32.reserve(inputs.size());
  std::vector<const graph::Tensor*> ptrs;
  for (const graph::Tensor* t : inputs) {
    if (!t) {
      f32.emplace_back();
      ptrs.push_back(nullptr);
      continue;
    }
    // FP32 without flush-to-zero and integer inputs are read as they are (to_f32 would copy them).
    const bool widen = t->dtype() == graph::DType::F16 || t->dtype() == graph::DType::BF16 ||
                       (t->dtype() == graph::DType::F32 && mode.denormal == num::DenormalMode::FlushToZero);
    if (!widen) {
      f32.emplace_back();
      ptrs.push_back(t);
      continue;
    }
    f32.push_back(to_f32(*t, mode));
    ptrs.push_back(&f32.back());
  }
  return graph::run_reference(op, ptrs, graph::RefPrecision::F32);
}

std::vector<FloatBuffer> run_vector_f32(const graph::Op& op, std::span<const graph::Tensor* const> inputs,
                                       const num::Mode& mode) {
  std::vector<graph::Tensor> outs = run_vector(op, inputs, mode);
  std::vector<FloatBuffer> values;
  values.reserve(outs.size());
  for (graph::Tensor& t : outs) values.push_back(FloatBuffer::adopt(std::move(t)));
  return values;
}

OpWork vector_work(const KernelCall& call) {
  OpWork w;
  std::uint64_t in_elems = 0, out_elems = 0;
  bool first_in = true;
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    const graph::Tensor* t = call.inputs[i];
    if (!t) continue;
    w.in_bytes += graph::physical_nbytes(stored_desc(call.args.inputs[i]));
    in_elems += static_cast<std::uint64_t>(t->numel());
    if (first_in) w.in_addr = call.args.inputs[i].addr;
    first_in = false;
  }
  for (std::size_t o = 0; o < call.outputs.size(); ++o) {
    w.out_bytes += graph::physical_nbytes(stored_desc(call.args.outputs[o]));
    out_elems += static_cast<std::uint64_t>(graph::numel(call.outputs[o].shape));
  }
  if (!call.args.outputs.empty()) w.out_addr = call.args.outputs[0].addr;
  w.vector_elems = std::max(in_elems, out_elems);
  w.vector_passes = vector_passes(call.op);
  return w;
}

Computed compute_vector(const KernelCall& call) {
  Computed c;
  std::vector<graph::Tensor> outs = run_vector(call.op, call.inputs, call.mode);
  c.exact.resize(outs.size());
  for (std::size_t o = 0; o < outs.size(); ++o) {
    if (graph::is_float(outs[o].dtype())) {
      c.values.push_back(FloatBuffer::adopt(std::move(outs[o])));
    } else {
      c.values.push_back(FloatBuffer::copy_of(outs[o]));
      c.exact[o] = std::move(outs[o]);
    }
  }
  return c;
}

namespace {

class VectorKernel final : public Kernel {
 public:
  Computed compute(const KernelCall& call) const override { return compute_vector(call); }
  OpWork work(const KernelCall& call) const override { return vector_work(call); }
};

}  // namespace

std::unique_ptr<Kernel> make_vector_kernel() { return std::make_unique<VectorKernel>(); }

}  // namespace probelab::chip::kernels
