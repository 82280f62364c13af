// Fused ops: the body runs in order with every intermediate kept in FP32 on chip.
//  - A body op with a Cube kernel gets its operands in the dtype the Cube reads: op inputs as
//    loaded, FP32 intermediates rounded (through the Mode) to the dtype of the fused op's first
//    floating-point input; its result stays FP32 (L0C precision).
//  - Other body ops run on the Vector unit in FP32 (graph reference kernels).
//  - Accumulation flags of a Cube body op are reported against fused output 0 at the same
//    linear index when the body op's result has output 0's element count, else at element 0.
// Timing: the Cube body ops' GEMMs plus the Vector work of the other body ops; HBM traffic is
// the fused op's inputs and outputs only.
#include <fmt/format.h>

#include <map>
#include <optional>
#include <stdexcept>

#include "chip_model/kernels/cube_gemm.h"
#include "chip_model/kernels/kernel.h"
#include "chip_model/kernels/op_args_graph.h"
#include "chip_model/kernels/quant_kernel.h"
#include "chip_model/kernels/vector_kernel.h"
#include "graph/format.h"
#include "graph/op_registry.h"

namespace probelab::chip::kernels {
namespace {

/// The body op `k` as a stand-alone op: its own args block (intermediates get F32 refs at
/// address 0) and the graph op with tensors named by body index.
struct InnerOp {
  spec::OpArgs args;
  graph::Op op;
  std::vector<graph::TensorDesc> out_descs;
};

/// One body op with its kernel, whether that kernel is a Cube one and whether the op is quantized.
struct BodyOp {
  InnerOp inner;
  const Kernel* kernel = nullptr;
  bool cube = false;
  bool quantized = false;
};

/// The body as prepare() builds it from the args (output descs from shape inference,
/// intermediates F32).
struct FusedBody final : KernelState {
  std::vector<BodyOp> ops;
};

class FusedKernel final : public Kernel {
 public:
  std::shared_ptr<const KernelState> prepare(const spec::OpArgs& a, const graph::Op& op) const override {
    auto body = std::make_shared<FusedBody>();
    std::map<std::int32_t, graph::TensorDesc> descs;  // the inputs as the core loads them
    for (std::size_t i = 0; i < a.inputs.size(); ++i)
      if (a.inputs[i].dtype != spec::kAbsentTensor) descs[static_cast<std::int32_t>(i)] = logical_desc(a.inputs[i]);
    for (std::size_t k = 0; k < a.fused_body.size(); ++k) {
      const spec::FusedInner& f = a.fused_body[k];
      BodyOp b = make_body_op(a, op, k, descs);
      for (std::size_t o = 0; o < f.outputs.size() && o < b.inner.out_descs.size(); ++o) descs[f.outputs[o]] = b.inner.out_descs[o];
      body->ops.push_back(std::move(b));
    }
    return body;
  }

  bool uses_cube(const spec::OpArgs& a) const override {
    for (const auto& f : a.fused_body)
      if (KernelRegistry::instance().get(f.type).uses_cube(a)) return true;
    return false;
  }

  Computed compute(const KernelCall& c) const override {
    const spec::OpArgs& a = c.args;
    const auto n_in = a.inputs.size(), n_out = a.outputs.size();
    // FP32 intermediates and outputs by body index (spec::validate: each written once, in range).
    std::vector<std::optional<graph::Tensor>> values(n_in + n_out + a.num_internal);
    auto value = [&values](std::int32_t t) -> graph::Tensor& { return values.at(static_cast<std::size_t>(t)).value(); };
    const bool prepared = c.state != nullptr;
    // Descs of the body tensors, for body ops built here (a prepared call has them built).
    std::map<std::int32_t, graph::TensorDesc> descs;
    if (!prepared) descs = input_descs(c);
    Computed out;
    out.values.resize(n_out);
    out.flags.resize(n_out);
    const graph::DType cube_dtype = first_float_dtype(c);
    for (std::size_t k = 0; k < a.fused_body.size(); ++k) {
      const spec::FusedInner& f = a.fused_body[k];
      BodyOp scratch;
      const BodyOp& b = body_op(c, k, descs, scratch);
      const InnerOp& inner = b.inner;
      const Kernel& kern = *b.kernel;
      const bool cube = b.cube;
      std::vector<graph::Tensor> rounded(f.inputs.size());
      std::vector<const graph::Tensor*> ins;
      for (std::size_t i = 0; i < f.inputs.size(); ++i) {
        const std::int32_t t = f.inputs[i];
        if (t < 0) {
          ins.push_back(nullptr);
        } else if (static_cast<std::size_t>(t) < n_in) {
          ins.push_back(c.inputs[static_cast<std::size_t>(t)]);
        } else if (cube && value(t).dtype() != cube_dtype) {
          rounded[i] = round_tensor(value(t), cube_dtype, c.mode);
          ins.push_back(&rounded[i]);
        } else {
          ins.push_back(&value(t));
        }
      }
      std::vector<graph::Tensor> results;
      if (cube) {
        const KernelCall ic{inner.args, inner.op, ins, inner.out_descs, c.mode, c.accum, nullptr, nullptr, c.quant};
        Computed r = b.quantized ? compute_quantized(kern, ic) : kern.compute(ic);
        if (b.quantized && c.quant && !c.quant->records.empty()) {
          // Operands of the fused op keep their input index; intermediates have none.
          QuantOpRecord& q = c.quant->records.back();
          for (QuantOperandRecord* o : {&q.activations, &q.weights}) {
            const std::size_t i = static_cast<std::size_t>(o->slot);
            o->slot = i < f.inputs.size() && f.inputs[i] >= 0 && static_cast<std::size_t>(f.inputs[i]) < n_in ? f.inputs[i] : -1;
          }
        }
        for (std::size_t o = 0; o < r.values.size(); ++o) {
          results.push_back(std::move(r.values[o]).into_tensor(inner.out_descs[o].shape));
          if (o < r.flags.size() && r.flags[o].flags.any()) {
            const bool same = results.back().numel() == graph::numel(c.outputs[0].shape);
            if (same) out.flags[0].merge(r.flags[o]);
            else out.flags[0].raise(r.flags[o].flags, 0);
          }
        }
      } else {
        results = run_vector(inner.op, ins, c.mode);
      }
      if (c.hooks && c.site && (c.hooks->sites() & kFaultFusedInner) && !results.empty() &&
          results[0].dtype() == graph::DType::F32)
        c.hooks->on_fused_inner(*c.site, static_cast<std::uint32_t>(k), f.name, results[0].data<float>());
      for (std::size_t o = 0; o < f.outputs.size() && o < results.size(); ++o) {
        const graph::TensorDesc& d = results[o].desc();
        if (prepared && o < inner.out_descs.size() &&
            (d.dtype != inner.out_descs[o].dtype || d.shape != inner.out_descs[o].shape))
          throw std::logic_error(fmt::format("fused op '{}': body op {} ('{}') gave output {} as {} {}, its inference {} {}",
                                             a.op_name, k, f.name, o, graph::dtype_name(d.dtype), graph::shape_str(d.shape),
                                             graph::dtype_name(inner.out_descs[o].dtype),
                                             graph::shape_str(inner.out_descs[o].shape)));
        if (!prepared) descs[f.outputs[o]] = d;
        values.at(static_cast<std::size_t>(f.outputs[o])) = std::move(results[o]);
      }
    }
    if (!a.partial_outputs.empty()) {
      out.intermediates.resize(a.num_internal);
      for (std::size_t i = 0; i < a.num_internal; ++i)
        if (a.partial_outputs[i].dtype != spec::kAbsentTensor)
          if (std::optional<graph::Tensor>& v = values[n_in + n_out + i])
            out.intermediates[i] = FloatBuffer::adopt(std::move(*v));
    }
    for (std::size_t o = 0; o < n_out; ++o) {
      std::optional<graph::Tensor>& v = values[n_in + o];
      if (!v) throw std::runtime_error(fmt::format("fused op '{}': output {} is not written by its body", a.op_name, o));
      out.values[o] = FloatBuffer::adopt(std::move(*v));
    }
    return out;
  }

  OpWork work(const KernelCall& c) const override {
    const spec::OpArgs& a = c.args;
    OpWork w;
    std::map<std::int32_t, graph::TensorDesc> descs = input_descs(c);
    double vector_cost = 0;
    for (std::size_t k = 0; k < a.fused_body.size(); ++k) {
      const spec::FusedInner& f = a.fused_body[k];
      BodyOp scratch;
      const BodyOp& b = body_op(c, k, descs, scratch);
      const InnerOp& inner = b.inner;
      const Kernel& kern = *b.kernel;
      // Shapes only: op inputs as loaded, placeholder tensors for the intermediates' descs.
      std::vector<graph::Tensor> shapes;
      std::vector<const graph::Tensor*> ins;
      shapes.reserve(f.inputs.size());
      for (std::int32_t t : f.inputs) {
        if (t < 0) {
          ins.push_back(nullptr);
        } else if (static_cast<std::size_t>(t) < a.inputs.size()) {
          ins.push_back(c.inputs[static_cast<std::size_t>(t)]);
        } else {
          // work() reads descs only, never values: no zero fill.
          shapes.push_back(graph::Tensor::for_overwrite(graph::TensorDesc{descs.at(t).dtype, descs.at(t).shape, graph::Format::ND}));
          ins.push_back(&shapes.back());
        }
      }
      const KernelCall ic{inner.args, inner.op, ins, inner.out_descs, c.mode, c.accum};
      const OpWork iw = kern.work(ic);
      for (GemmWork g : iw.gemms) {
        for (std::size_t i = 0; i < f.inputs.size(); ++i)
          if (f.inputs[i] >= static_cast<std::int32_t>(a.inputs.size())) {
            // Operands produced on chip: no HBM fetch.
            if (inner.args.inputs[i].addr == g.a_addr) g.a_unique_bytes = 0;
            if (inner.args.inputs[i].addr == g.b_addr) g.b_unique_bytes = 0;
          }
        w.gemms.push_back(g);
      }
      w.flops += iw.flops;
      vector_cost += static_cast<double>(iw.vector_elems) * (b.cube ? 1.0 : iw.vector_passes);
      for (std::size_t o = 0; o < f.outputs.size() && o < inner.out_descs.size(); ++o)
        descs[f.outputs[o]] = inner.out_descs[o];
    }
    w.vector_elems = static_cast<std::uint64_t>(vector_cost);
    w.vector_passes = 1.0;
    for (const auto& ref : a.inputs)
      if (ref.dtype != spec::kAbsentTensor) w.in_bytes += graph::physical_nbytes(stored_desc(ref));
    for (const auto& ref : a.outputs) w.out_bytes += graph::physical_nbytes(stored_desc(ref));
    w.in_addr = a.inputs.empty() ? 0 : a.inputs[0].addr;
    w.out_addr = a.outputs.at(0).addr;
    w.out_elem_bytes = static_cast<std::uint32_t>(graph::dtype_size(c.outputs[0].dtype));
    return w;
  }

 private:
  static std::map<std::int32_t, graph::TensorDesc> input_descs(const KernelCall& c) {
    std::map<std::int32_t, graph::TensorDesc> d;
    for (std::size_t i = 0; i < c.inputs.size(); ++i)
      if (c.inputs[i]) d[static_cast<std::int32_t>(i)] = graph::TensorDesc{c.inputs[i]->dtype(), c.inputs[i]->shape(),
                                                                           graph::Format::ND};
    return d;
  }

  static graph::DType first_float_dtype(const KernelCall& c) {
    for (const graph::Tensor* t : c.inputs)
      if (t && (t->dtype() == graph::DType::F16 || t->dtype() == graph::DType::BF16 || t->dtype() == graph::DType::F32))
        return t->dtype();
    return graph::DType::F32;
  }

  /// Body op k: the prepared one (KernelCall::state), or, for a call that was not prepared, one
  /// built into `scratch` from `descs`.
  static const BodyOp& body_op(const KernelCall& c, std::size_t k, const std::map<std::int32_t, graph::TensorDesc>& descs,
                               BodyOp& scratch) {
    if (c.state) return static_cast<const FusedBody*>(c.state)->ops[k];
    scratch = make_body_op(c.args, c.op, k, descs);
    return scratch;
  }

  static BodyOp make_body_op(const spec::OpArgs& a, const graph::Op& op, std::size_t k,
                             const std::map<std::int32_t, graph::TensorDesc>& descs) {
    BodyOp b;
    b.inner = make_inner(a, op, k, descs);
    b.kernel = &KernelRegistry::instance().get(a.fused_body[k].type);
    b.cube = b.kernel->uses_cube(b.inner.args);
    b.quantized = is_quantized(b.inner.args.attrs);
    return b;
  }

  /// Builds body op k with output descs from shape inference over `descs` (intermediates F32).
  static InnerOp make_inner(const spec::OpArgs& a, const graph::Op& op, std::size_t k,
                            const std::map<std::int32_t, graph::TensorDesc>& descs) {
    const spec::FusedInner& f = a.fused_body[k];
    InnerOp in;
    in.op = op.fused_body.at(k);
    in.args.op_type = f.type;
    in.args.op_name = f.name;
    in.args.attrs = f.attrs;
    in.args.accum = a.accum;
    in.args.split_k_chunk = a.split_k_chunk;
    std::vector<graph::TensorDesc> in_descs;
    for (std::int32_t t : f.inputs) {
      spec::TensorRef ref;
      if (t < 0) {
        ref.dtype = spec::kAbsentTensor;
        in_descs.emplace_back();
      } else if (static_cast<std::size_t>(t) < a.inputs.size()) {
        ref = a.inputs[static_cast<std::size_t>(t)];
        in_descs.push_back(descs.at(t));
      } else {
        const graph::TensorDesc& d = descs.at(t);
        ref = spec::make_tensor_ref(0, static_cast<std::uint8_t>(graph::DType::F32), 0, d.shape);
        in_descs.push_back(d);
      }
      in.args.inputs.push_back(ref);
    }
    // The Vector unit computes in FP32: infer with every float operand as FP32.
    for (auto& d : in_descs)
      if (graph::is_float(d.dtype)) d.dtype = graph::DType::F32;
    const graph::OpDef& def = graph::OpRegistry::instance().get(f.type);
    in.out_descs = def.infer(in.op, in_descs);
    for (auto& d : in.out_descs) {
      if (graph::is_float(d.dtype)) d.dtype = graph::DType::F32;
      d.format = graph::Format::ND;
      in.args.outputs.push_back(spec::make_tensor_ref(0, static_cast<std::uint8_t>(d.dtype), 0, d.shape));
    }
    return in;
  }
};

}  // namespace

std::unique_ptr<Kernel> make_fused_kernel() { return std::make_unique<FusedKernel>(); }

}  // namespace probelab::chip::kernels
