// Functional execution of one compute op on the AI core: MTE load (format conversion, input
// hook, input scans), compute (accumulation hook, kernel), output conversion through the Mode,
// vector-lane and output hooks, detection, MTE store. Timing is not modelled here (ai_core.h
// charges it per tile from work()); this class moves and computes the real values.
//
// Detection rules (what the exception circuits see of one op), in this scan order:
//  - NaN input / Inf input: inputs in argument order, each in logical row-major order; per kind the
//    element is the first NaN (Inf) of the first input holding one, as a linear index *in that
//    input* (the latch's slot register then holds the input index). Denormal inputs set
//    kFsDenormal only.
//  - For each output, in output order, elements in logical row-major order:
//    invalid   a NaN produced (before or after the output conversion, or after the output hook)
//              while no input held a NaN; with a NaN input, NaN outputs are propagation;
//    overflow  the output conversion or a GEMM accumulation step overflowed, or an Inf appears
//              in the result while every input was finite (FP32 results overflowing in compute);
//    underflow the output conversion or an accumulation step raised Underflow or DenormalOut.
//    A kind's element is the lowest index raising it; each kind is reported with its own element
//    (the output's first kind is the kind with the lowest element; ties: lowest kind bit).
//  Per kind the report also carries the element's value (KindHit::value: the FP32 result before
//  the output conversion for produced kinds, the operand for input kinds) and what raised the
//  kind anywhere in the tensor (spec::ExcDetailBits): an accumulation step of the Cube (FP16
//  accumulator: kExcDetailAccFp16 too), a split-K partial rounding, the output conversion of a
//  finite result, or the computation.
//  - Quantized Cube ops (quant_kernel.h): an operand that saturated its low-bit format reports
//    overflow on that input (element: its first saturated element, detail kExcDetailQuantize),
//    after NaN/Inf input; saturation of a fused body op's intermediate operand is counted in
//    quant_records() only.
//  In SATURATION mode the delivered values are clamped (Inf -> max, NaN -> 0) but the kinds are
//  reported from the values before clamping, as the flags are raised by the IEEE result.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/kernels/kernel.h"
#include "chip_model/kernels/tiling.h"
#include "numerics/bulk.h"
#include "numerics/mode.h"
#include "chip_model/spec/op_args.h"
#include "chip_model/spec/registers.h"
#include "graph/op.h"
#include "graph/tensor.h"

namespace probelab::chip::kernels {

/// Functional view of HBM (the backing store; timing is charged separately).
class KernelMemory {
 public:
  virtual ~KernelMemory() = default;
  virtual void read(std::uint64_t addr, std::span<std::byte> dst) = 0;
  virtual void write(std::uint64_t addr, std::span<const std::byte> src) = 0;
  /// What the scan of the tensor written at [addr, addr + len) as `stored` found, when it was
  /// noted with that write and nothing wrote there since (scan_memo.h); nullopt: scan it.
  virtual std::optional<num::ScanReport> scanned(std::uint64_t /*addr*/, std::uint64_t /*len*/,
                                                 const graph::TensorDesc& /*stored*/) const {
    return std::nullopt;
  }
  /// Notes the scan of the logical tensor just written at [addr, addr + len) as `stored`.
  virtual void note_scanned(std::uint64_t /*addr*/, std::uint64_t /*len*/, const graph::TensorDesc& /*stored*/,
                            const num::ScanReport& /*scan*/) {}
};

/// First element and number of elements of one exception kind in one tensor, the first element's
/// value and what raised the kind (spec::ExcDetailBits).
struct KindHit {
  std::int64_t first = -1;
  std::uint64_t count = 0;
  float value = 0.0f;
  std::uint32_t detail = 0;
  std::int32_t slot = -1;  // input kinds raised by quantization: the operand's input index
  bool hit() const { return first >= 0; }
  void add(std::int64_t index, std::uint64_t n);
};

/// What the detection circuit is told about one tensor.
struct TensorFlags {
  std::uint32_t status = 0;  // spec::FloatStatusBits
  std::array<KindHit, spec::kExcKindCount> kinds{};
  bool any_kind() const;
  /// Kind with the lowest first element (ties: lowest kind bit); only valid when any_kind().
  spec::ExcKindBit first_kind() const;
  std::int64_t first_elem() const { return kinds[first_kind()].first; }
};

struct OpDetection {
  std::int32_t nan_input = -1;  // index of the first input holding a NaN; -1: none
  std::int32_t inf_input = -1;  // index of the first input holding an Inf; -1: none
  /// kExcNanInput (element in input nan_input), kExcInfInput (element in input inf_input),
  /// kFsNanInput / kFsInfInput / kFsDenormal
  TensorFlags inputs;
  std::vector<TensorFlags> outputs;
};

/// Exact FP32 copy of a float tensor's logical values (FTZ reads subnormals as zero); integer
/// and bool tensors are returned unchanged.
graph::Tensor to_f32(const graph::Tensor& t, const num::Mode& mode);

/// What an op's args block alone determines: the args, the op rebuilt from them, its kernel, the
/// outputs' logical descs and the accumulation mode the args ask for. A pure function of the
/// args, so it may be kept and run again by any number of OpRunners (the AI core keeps one per
/// args block it has decoded: ai_core.h). `args` must be validated (spec::decode_op_args does it).
struct PreparedOp {
  explicit PreparedOp(spec::OpArgs args);
  spec::OpArgs args;
  graph::Op op;
  const Kernel* kernel;
  std::vector<graph::TensorDesc> out_descs;
  AccumulationMode accum;
  std::shared_ptr<const KernelState> state;  // kernel->prepare(args, op)
  // What the kernel says of these args, asked once (a fused kernel asks its body ops' kernels).
  bool cube = false;        // kernel->uses_cube(args)
  bool vector_out = true;   // kernel->vector_output(args)
  bool quantized = false;   // is_quantized(args.attrs)
  /// The outputs are computed, not moved (graph::OpDef::moves_elements): a NaN the op delivers
  /// is the default NaN, whatever NaN the host arithmetic computing it gave.
  bool computes = true;
  /// Delayed-scaling state the attrs name (`<prefix>.meta` address and `<prefix>.history`
  /// length, both integers), op attrs first, then each fused body op's, activations before weights.
  struct QuantState {
    const char* prefix;
    std::int64_t addr, history;
  };
  std::vector<QuantState> quant_state;
  /// The stored bytes of the present inputs and of the outputs (stored_desc), in order.
  std::vector<AddrRange> input_ranges, output_ranges;
  /// stored_desc of each input and output (an absent one: a default desc).
  std::vector<graph::TensorDesc> input_stored, output_stored;

  /// The tile plan of this op's work `w` (its stats_bytes included) on `cores` units with core
  /// parameters `p` (plan_tiles), made on first use and kept: the work is a function of the args.
  std::shared_ptr<const TilePlan> plan(const OpWork& w, const CoreTimingParams& p, std::uint32_t cores,
                                       std::uint64_t out_elems) const;

 private:
  friend class OpRunner;
  mutable std::optional<OpWork> work_;  // Kernel::work of the args (shapes only), made on first use
  struct PlanKey {
    CoreTimingParams params;
    std::uint32_t cores = 0;
    std::uint64_t stats_bytes = 0, out_elems = 0;
    bool operator==(const PlanKey&) const = default;
  };
  mutable std::vector<std::pair<PlanKey, std::shared_ptr<const TilePlan>>> plans_;
};

class OpRunner {
 public:
  /// Decodes nothing itself: `args` must be validated (spec::decode_op_args does it).
  OpRunner(spec::OpArgs args, const num::Mode& mode);
  OpRunner(std::shared_ptr<const PreparedOp> prepared, const num::Mode& mode);
  ~OpRunner();
  OpRunner(OpRunner&&) = default;  // the prepared op moves along; its references stay valid

  const spec::OpArgs& args() const { return args_; }
  const graph::Op& op() const { return op_; }
  const Kernel& kernel() const { return *kernel_; }
  const PreparedOp& prepared() const { return *prep_; }

  /// MTE load of every input (and of the delayed-scaling state of quantized operands); calls
  /// FaultHooks::on_op_input when wanted.
  void load(KernelMemory& mem, FaultHooks* hooks, const FaultSite& site);
  /// Cost of the op (valid after load()); computed once per prepared op (Kernel::work depends on
  /// the args alone).
  OpWork work() const;
  /// Runs the kernel; Cube kernels first pass the accumulation mode to on_gemm_accumulation.
  void compute(FaultHooks* hooks, const FaultSite& site);
  /// Output conversion, on_vector_lanes (ops with Vector results), on_op_output, detection.
  void finish(FaultHooks* hooks, const FaultSite& site, std::uint32_t vector_lanes);
  /// MTE store of every output in its stored format (and of the updated delayed-scaling state).
  void store(KernelMemory& mem) const;

  const OpDetection& detection() const { return detection_; }
  /// Loaded inputs (logical layout, stored dtype; empty desc where absent), valid after load().
  const std::vector<graph::Tensor>& inputs() const { return inputs_; }
  /// Final outputs (logical layout, output dtype), valid after finish().
  const std::vector<graph::Tensor>& outputs() const { return outputs_; }
  const AccumulationMode& accumulation() const { return accum_; }
  /// What quantization did in this execution (quantized Cube ops and fused body ops), valid
  /// after compute().
  const std::vector<QuantOpRecord>& quant_records() const { return quant_.records; }

 private:
  void scan_inputs();
  void load_quant_state(KernelMemory& mem);
  void note_quant_saturation();
  /// Scans of an output: `pre` made with its conversion (num::convert_scanned; unset:
  /// detect_output scans the FP32 results), `out` of the delivered tensor (always set).
  struct Scans {
    std::optional<num::LimitScan> pre;  // the FP32 results, limit = the output format's range
    std::optional<num::ScanReport> out;  // the delivered tensor
  };
  TensorFlags detect_output(std::size_t o, const num::BulkReport& conv, bool inputs_finite, const Scans& scans) const;
  /// The FP32 results of output o scanned against the output format's range (Scans::pre).
  num::LimitScan scan_computed(std::size_t o) const;
  /// pre's NaNs and the delivered tensor's (F32, F16, BF16) replaced by the default NaN.
  static void canonicalize_delivered(FloatBuffer& pre, graph::Tensor& out);

  std::shared_ptr<const PreparedOp> prep_;
  const spec::OpArgs& args_;
  num::Mode mode_;
  const graph::Op& op_;
  const Kernel* kernel_;
  std::vector<graph::Tensor> inputs_;       // logical, stored dtype; empty desc when absent
  std::vector<const graph::Tensor*> input_ptrs_;
  std::vector<std::optional<num::ScanReport>> input_scans_;  // noted when they were stored (else scanned)
  const std::vector<graph::TensorDesc>& out_descs_;
  AccumulationMode accum_;  // this execution's: the accumulation fault hook may change it
  Computed computed_;
  std::vector<graph::Tensor> outputs_;
  std::vector<num::ScanReport> output_scans_;  // of outputs_, noted with them by store()
  OpDetection detection_;
  bool inputs_finite_ = true;
  QuantContext quant_;  // delayed-scaling state (loaded, written back by store) and records
};

}  // namespace probelab::chip::kernels
