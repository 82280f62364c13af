// Device kernels of the AI core, registered by op type. What every kernel means on the chip:
//
// Operands. A Kernel task's args block is a spec::OpArgs (spec/op_args.h). Inputs are read from
// HBM in their dtype (FP16 / BF16 / FP32; I32 / I64 / Bool index tensors as they are); private
// formats (NC1HWC0, FRACTAL_NZ, NHWC) are converted to the logical row-major layout by the MTE.
// Outputs are written in the dtype and format their TensorRef names.
//
// Cube ops (MatMul, Gemm, Conv and their backward ops MatMulGradA/B, ConvGradInput/Weight, and the
// Cube part of fused ops) run on numerics::gemm: FP16 or BF16 inputs, exact products, FP32
// accumulation with k = 0, 1, ..., K-1 in order (or the FP16 accumulation modes / split-K the
// args or the fault hook ask for). The K order of each op is documented with its kernel
// (cube_kernels.cpp); Conv uses im2col with k = (c, kh, kw) row-major. FP32 inputs run an FP32
// GEMM with the same sequential K order (fused multiply-add per step). Scalars applied after the
// GEMM (Gemm alpha/beta/bias, Conv bias, col2im sums) are FP32 Vector work on the L0C result.
//
// Vector ops (everything else: elementwise, activations, softmax, norms, pools, reductions,
// losses, optimizer updates, data movement): inputs are converted to FP32 exactly (FTZ mode reads
// subnormal inputs as zero), the op is computed in FP32 by graph's deterministic reference kernel
// (graph::run_reference), and each result is rounded once to its output dtype.
//
// Fused ops run their body in order, keeping every intermediate in FP32 (Cube results stay in
// L0C precision; a Cube body op reading an FP32 intermediate gets it rounded to the op's input
// dtype first); only the fused op's outputs are rounded.
//
// Output conversion goes through the chip's Mode (saturation or INF_NAN, FTZ) with flags. The
// per-kind detection rules and the scan order are in op_runner.h.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/kernels/float_buffer.h"
#include "numerics/bulk.h"
#include "numerics/mode.h"
#include "numerics/quant.h"
#include "chip_model/spec/op_args.h"
#include "graph/op.h"
#include "graph/tensor.h"

namespace probelab::chip::kernels {

/// What quantizing one operand of a quantized Cube op did (quant_kernel.h).
struct QuantOperandRecord {
  bool on = false;
  num::QuantFormat format = num::QuantFormat::Int8;
  bool delayed = false;       // the scale came from the amax history (delayed scaling)
  float scale = 0.0f;         // the per-tensor scale used (per-channel weights: the largest)
  float next_scale = 0.0f;    // delayed scaling: the scale the next execution will use
  num::QuantStats stats;
  std::int32_t slot = -1;     // the operand's index in the executed op's inputs; -1: a fused intermediate
  /// Activations: amax of each input channel (Conv axis 1; MatMul / Gemm the reduction axis K),
  /// what a per-channel scale would be built from.
  std::vector<float> channel_amax;
};
/// One quantized Cube op (or fused body op) execution.
struct QuantOpRecord {
  std::string op;  // the op's name (a fused body op's own name)
  QuantOperandRecord activations, weights;
};
/// Quantization state of one op execution, owned by the OpRunner: delayed-scaling state read from
/// HBM before the kernel runs and written back after it (by address: spec/quant_args.h), and
/// what every quantized body op did.
struct QuantContext {
  std::map<std::uint64_t, std::vector<float>> meta;
  std::vector<QuantOpRecord> records;
};

struct KernelState;

/// Everything a kernel sees of one op execution.
struct KernelCall {
  const spec::OpArgs& args;
  /// The op rebuilt from args (op_args_graph.h): inputs named "in<i>" ("" when absent), outputs
  /// "out<i>", fused body tensors "t<index>".
  const graph::Op& op;
  /// Loaded inputs in logical row-major layout and their stored dtype; nullptr = omitted.
  std::span<const graph::Tensor* const> inputs;
  /// Logical descs of the outputs (dtype from the args, format ND).
  std::span<const graph::TensorDesc> outputs;
  num::Mode mode;
  /// Cube accumulation after the fault hook (filled from args.accum / split_k_chunk).
  AccumulationMode accum;
  /// Fault hooks and site of this execution (fused kernels call on_fused_inner); may be null.
  FaultHooks* hooks = nullptr;
  const FaultSite* site = nullptr;
  /// Quantized Cube ops: delayed-scaling state and records (null: none kept).
  QuantContext* quant = nullptr;
  /// What the kernel's prepare() made of these args (null: not prepared; the kernel works
  /// without it).
  const KernelState* state = nullptr;
};


/// Results before the output conversion: exact FP32 values (an FP16-accumulated GEMM result is
/// an FP16 number held in FP32) plus the flags the datapath raised computing them (GEMM
/// accumulation), indices relative to each output's logical row-major order.
struct Computed {
  /// FP32 results of each output (a kernel writes every element of a FloatBuffer(n), or creates
  /// it as FloatBuffer(n, 0.0f) when it accumulates into it).
  std::vector<FloatBuffer> values;
  std::vector<num::BulkReport> flags;
  /// Integer and bool outputs held exactly (an int64 above 2^24 does not survive FP32): when
  /// exact[o] has output o's dtype, the output conversion copies it instead of converting values[o].
  std::vector<graph::Tensor> exact;
  /// Fused kernels with partial outputs requested: FP32 value of each intermediate (index i is
  /// body tensor n_in + n_out + i), empty where none was requested.
  std::vector<FloatBuffer> intermediates;
};

/// One batch of identical GEMMs on the Cube, for the timing model.
struct GemmWork {
  std::int64_t count = 1;  // independent GEMMs of this shape (batches, images x groups)
  std::int64_t m = 0, n = 0, k = 0;
  std::uint32_t in_bytes = 2;  // bytes per input element as the Cube reads it
  /// GEMM i of the batch reads A matrix i % a_distinct and B matrix i % b_distinct (a broadcast
  /// operand, e.g. Conv's weights shared by all images, has fewer distinct matrices).
  std::int64_t a_distinct = 1, b_distinct = 1;
  /// Distinct operand bytes in HBM (what the MTE must fetch at least once; im2col expansion
  /// happens on chip, so Conv's B side counts the feature map, not the columns).
  std::uint64_t a_unique_bytes = 0, b_unique_bytes = 0;
  std::uint64_t a_addr = 0, b_addr = 0;  // HBM base addresses (channel interleaving)
};

/// What an op costs, independent of how it is tiled.
struct OpWork {
  std::vector<GemmWork> gemms;     // Cube part; empty for a pure Vector op
  std::uint64_t vector_elems = 0;  // FP32 elements streamed through the Vector unit
  double vector_passes = 1.0;      // Vector cycles per element = passes * 4 / vector_bytes_per_cycle
  std::uint64_t in_bytes = 0;      // HBM bytes of all inputs (Vector streaming loads)
  std::uint64_t out_bytes = 0;     // HBM bytes of all outputs
  std::uint64_t in_addr = 0, out_addr = 0;
  std::uint64_t flops = 0;         // 2 * MACs of the Cube part (for the op record)
  std::uint32_t out_elem_bytes = 2;  // bytes per output element (Cube tile stores)
  /// Bytes of the tensors whose statistics the kernel computes in-kernel (TaskDescriptor
  /// stats_outputs / stats_inputs): one extra Vector pass over them, spread over the tiles'
  /// epilogues. Set by the AI core, not by kernels.
  std::uint64_t stats_bytes = 0;
};

/// What a kernel derives from an op's args alone (Kernel::prepare): made once per args block and
/// kept with it (kernels::PreparedOp), handed back in every KernelCall of that op.
struct KernelState {
  virtual ~KernelState() = default;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  /// State derived from the args and the op rebuilt from them, for KernelCall::state; none by
  /// default. Must not depend on anything else (it is reused while the args block is unchanged).
  virtual std::shared_ptr<const KernelState> prepare(const spec::OpArgs&, const graph::Op&) const { return nullptr; }
  /// Functional result of the op. Throws std::runtime_error naming the op on bad operands.
  virtual Computed compute(const KernelCall& call) const = 0;
  /// Cost of the op for the tile pipeline (shapes only; no values needed).
  virtual OpWork work(const KernelCall& call) const = 0;
  /// True when the op runs a Cube GEMM (the core then calls FaultHooks::on_gemm_accumulation).
  virtual bool uses_cube(const spec::OpArgs&) const { return false; }
  /// True when the results leave through the Vector unit (FaultHooks::on_vector_lanes applies);
  /// false for plain Cube results written out of L0C.
  virtual bool vector_output(const spec::OpArgs&) const { return true; }
};

/// Kernels by canonical graph op type. Ops with a fused body run the fused kernel whatever their
/// type; types without an explicit kernel that graph can compute (a reference kernel exists) get
/// the generic Vector kernel. The built-in kernels are registered on first use of instance().
class KernelRegistry {
 public:
  static KernelRegistry& instance();
  void add(const std::string& type, std::unique_ptr<Kernel> k);  // throws on a duplicate
  /// The kernel of `type` (canonical name or alias); throws std::runtime_error naming the type
  /// when neither a kernel nor a reference kernel exists.
  const Kernel& get(const std::string& type) const;
  /// The kernel for an args block (fused kernel when args.is_fused()).
  const Kernel& get(const spec::OpArgs& args) const;
  /// Canonical type names with an explicit kernel, sorted.
  std::vector<std::string> explicit_types() const;

 private:
  KernelRegistry();
  std::map<std::string, std::unique_ptr<Kernel>> kernels_;
  std::unique_ptr<Kernel> vector_;
  std::unique_ptr<Kernel> fused_;
};

// The built-in kernel families.
void register_cube_kernels(KernelRegistry& r);
std::unique_ptr<Kernel> make_vector_kernel();
std::unique_ptr<Kernel> make_fused_kernel();

}  // namespace probelab::chip::kernels
