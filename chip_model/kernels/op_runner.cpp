// Functional execution of one op: load, compute, convert, detect, store (see op_runner.h).
#include "chip_model/kernels/op_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <stdexcept>

#include "chip_model/kernels/op_args_graph.h"
#include "chip_model/kernels/quant_kernel.h"
#include "chip_model/spec/quant_args.h"
#include "numerics/bf16.h"
#include "numerics/fp16.h"
#include "numerics/fp32.h"
#include "graph/format.h"
#include "graph/op_registry.h"

namespace probelab::chip::kernels {
namespace {

std::span<const num::f16> as_f16(const graph::Tensor& t) {
  auto raw = t.data<std::uint16_t>();
  return {reinterpret_cast<const num::f16*>(raw.data()), raw.size()};
}
std::span<const num::bf16> as_bf16(const graph::Tensor& t) {
  auto raw = t.data<std::uint16_t>();
  return {reinterpret_cast<const num::bf16*>(raw.data()), raw.size()};
}

num::ScanReport scan_tensor(const graph::Tensor& t) {
  switch (t.dtype()) {
    case graph::DType::F16: return num::scan(as_f16(t));
    case graph::DType::BF16: return num::scan(as_bf16(t));
    case graph::DType::F32: return num::scan(t.data<float>());
    default: return {};
  }
}

std::int64_t lowest(std::initializer_list<std::int64_t> xs) {
  std::int64_t best = -1;
  for (std::int64_t x : xs)
    if (x >= 0 && (best < 0 || x < best)) best = x;
  return best;
}

bool is_plain_layout(graph::Format f) { return f == graph::Format::ND || f == graph::Format::NCHW; }

std::string op_label(const spec::OpArgs& a) { return fmt::format("op '{}' ({})", a.op_name, a.op_type); }

}  // namespace

void KindHit::add(std::int64_t index, std::uint64_t n) {
  if (index < 0) return;
  if (first < 0 || index < first) first = index;
  count += std::max<std::uint64_t>(n, 1);
}

bool TensorFlags::any_kind() const {
  return std::any_of(kinds.begin(), kinds.end(), [](const KindHit& k) { return k.hit(); });
}

spec::ExcKindBit TensorFlags::first_kind() const {
  int best = -1;
  for (int k = 0; k < static_cast<int>(spec::kExcKindCount); ++k)
    if (kinds[k].hit() && (best < 0 || kinds[k].first < kinds[best].first)) best = k;
  return static_cast<spec::ExcKindBit>(best < 0 ? 0 : best);
}

graph::Tensor to_f32(const graph::Tensor& t, const num::Mode& mode) {
  auto f32_desc = [&t] { return graph::TensorDesc{graph::DType::F32, t.shape(), t.desc().format}; };
  switch (t.dtype()) {
    case graph::DType::F16: {
      graph::Tensor out = graph::Tensor::for_overwrite(f32_desc());
      num::convert(as_f16(t), out.data<float>(), mode);
      return out;
    }
    case graph::DType::BF16: {
      graph::Tensor out = graph::Tensor::for_overwrite(f32_desc());
      num::convert(as_bf16(t), out.data<float>(), mode);
      return out;
    }
    case graph::DType::F32: {
      graph::Tensor out = t;
      if (mode.denormal == num::DenormalMode::FlushToZero)
        for (float& x : out.data<float>())
          if (num::is_subnormal(x)) x = std::copysign(0.0f, x);
      return out;
    }
    default: return t;
  }
}

// Writes the FP32 results `pre` into `out` in its dtype through the output conversion of the
// Mode (rounding, overflow mode, FTZ) and returns the flags the conversion raised.
static num::BulkReport deliver(std::span<const float> pre, graph::Tensor& out, const num::Mode& mode) {
  num::BulkReport conv;
  switch (out.dtype()) {
    case graph::DType::F16: {
      auto raw = out.data<std::uint16_t>();
      conv = num::convert(pre, std::span<num::f16>(reinterpret_cast<num::f16*>(raw.data()), raw.size()), mode);
      break;
    }
    case graph::DType::BF16: {
      auto raw = out.data<std::uint16_t>();
      conv = num::convert(pre, std::span<num::bf16>(reinterpret_cast<num::bf16*>(raw.data()), raw.size()), mode);
      break;
    }
    case graph::DType::F32: {
      auto dst = out.data<float>();
      for (std::size_t i = 0; i < pre.size(); ++i) {
        const num::Result<float> r = num::deliver(pre[i], mode);
        dst[i] = r.value;
        if (r.flags.any()) conv.raise(r.flags, static_cast<std::int64_t>(i));
      }
      break;
    }
    case graph::DType::I32: {
      auto dst = out.data<std::int32_t>();
      for (std::size_t i = 0; i < pre.size(); ++i) dst[i] = static_cast<std::int32_t>(pre[i]);
      break;
    }
    case graph::DType::I64: {
      auto dst = out.data<std::int64_t>();
      for (std::size_t i = 0; i < pre.size(); ++i) dst[i] = static_cast<std::int64_t>(pre[i]);
      break;
    }
    case graph::DType::Bool: {
      auto dst = out.data<std::uint8_t>();
      for (std::size_t i = 0; i < pre.size(); ++i) dst[i] = pre[i] != 0.0f ? 1 : 0;
      break;
    }
    case graph::DType::I8: {
      auto dst = out.data<std::int8_t>();
      for (std::size_t i = 0; i < pre.size(); ++i) dst[i] = static_cast<std::int8_t>(static_cast<std::int32_t>(pre[i]));
      break;
    }
    case graph::DType::U8: {
      auto dst = out.data<std::uint8_t>();
      for (std::size_t i = 0; i < pre.size(); ++i) dst[i] = static_cast<std::uint8_t>(static_cast<std::int32_t>(pre[i]));
      break;
    }
    case graph::DType::F64:
      break;  // not a device dtype; callers reject it
  }
  return conv;
}

PreparedOp::PreparedOp(spec::OpArgs a)
    : args(std::move(a)), op(op_from_args(args)), kernel(&KernelRegistry::instance().get(args)) {
  for (const auto& ref : args.outputs) out_descs.push_back(logical_desc(ref));
  // Each ref's stored desc, and the HBM range of a present one from it.
  auto stored = [](const std::vector<spec::TensorRef>& refs, std::vector<graph::TensorDesc>& descs,
                   std::vector<AddrRange>& ranges) {
    for (const auto& ref : refs) {
      if (ref.dtype == spec::kAbsentTensor) {
        descs.emplace_back();
        continue;
      }
      descs.push_back(stored_desc(ref));
      ranges.push_back({ref.addr, graph::physical_nbytes(descs.back())});
    }
  };
  stored(args.inputs, input_stored, input_ranges);
  stored(args.outputs, output_stored, output_ranges);
  accum.acc_dtype = args.accum == spec::AccumDType::FP32 ? graph::DType::F32 : graph::DType::F16;
  accum.f16_double_rounding = args.accum == spec::AccumDType::FP16_VIA_FP32;
  accum.split_k_chunk = args.split_k_chunk;
  accum.partial_dtype = graph::DType::F16;
  state = kernel->prepare(args, op);
  cube = kernel->uses_cube(args);
  vector_out = kernel->vector_output(args);
  quantized = is_quantized(args.attrs);
  const graph::OpDef* def = args.is_fused() ? nullptr : graph::OpRegistry::instance().find(op.type);
  computes = !(def && def->moves_elements);
  // The attribute names, made once (every op looks them up).
  struct Keys {
    const char* prefix;
    std::string meta, history;
  };
  static const std::array<Keys, 2> kKeys = [] {
    std::array<Keys, 2> k{Keys{spec::kQuantActivations, {}, {}}, Keys{spec::kQuantWeights, {}, {}}};
    for (Keys& key : k) {
      key.meta = std::string(key.prefix) + spec::kQuantMetaSuffix;
      key.history = std::string(key.prefix) + spec::kQuantHistorySuffix;
    }
    return k;
  }();
  auto collect = [&](const spec::OpAttrs& attrs) {
    if (attrs.empty()) return;
    for (const Keys& key : kKeys) {
      auto meta = attrs.find(key.meta);
      auto len = attrs.find(key.history);
      if (meta == attrs.end() || len == attrs.end() || !std::holds_alternative<std::int64_t>(meta->second) ||
          !std::holds_alternative<std::int64_t>(len->second))
        continue;
      quant_state.push_back({key.prefix, std::get<std::int64_t>(meta->second), std::get<std::int64_t>(len->second)});
    }
  };
  collect(args.attrs);
  for (const auto& f : args.fused_body) collect(f.attrs);
}

OpRunner::OpRunner(spec::OpArgs args, const num::Mode& mode)
    : OpRunner(std::make_shared<const PreparedOp>(std::move(args)), mode) {}

OpRunner::OpRunner(std::shared_ptr<const PreparedOp> prepared, const num::Mode& mode)
    : prep_(std::move(prepared)), args_(prep_->args), mode_(mode), op_(prep_->op), kernel_(prep_->kernel),
      out_descs_(prep_->out_descs), accum_(prep_->accum) {}

OpRunner::~OpRunner() = default;

void OpRunner::load(KernelMemory& mem, FaultHooks* hooks, const FaultSite& site) {
  inputs_.clear();
  inputs_.reserve(args_.inputs.size());
  input_scans_.assign(args_.inputs.size(), std::nullopt);
  // An input fault changes the bytes after they left HBM: then they are scanned as they are.
  const bool changed = fault_wanted(hooks, kFaultOpInput) || fault_wanted(hooks, kFaultCoreBuffer);
  for (std::size_t i = 0; i < args_.inputs.size(); ++i) {
    const spec::TensorRef& ref = args_.inputs[i];
    if (ref.dtype == spec::kAbsentTensor) {
      inputs_.emplace_back();
      continue;
    }
    const graph::TensorDesc& stored = prep_->input_stored[i];
    graph::Tensor t = graph::Tensor::for_overwrite(stored);
    const std::span<std::byte> bytes = t.bytes();
    mem.read(ref.addr, bytes);
    if (!changed) input_scans_[i] = mem.scanned(ref.addr, bytes.size(), stored);
    if (fault_wanted(hooks, kFaultOpInput)) hooks->on_op_input(site, static_cast<std::uint16_t>(i), stored, bytes);
    if (fault_wanted(hooks, kFaultCoreBuffer)) {
      // Where the operand sits on the core: Cube operands are staged in L1, then A in L0A and B
      // in L0B; vector operands in the Unified Buffer.
      if (prep_->cube) {
        hooks->on_core_buffer(site, CoreBuffer::L1, bytes);
        if (i < 2) hooks->on_core_buffer(site, i == 0 ? CoreBuffer::L0A : CoreBuffer::L0B, bytes);
      } else {
        hooks->on_core_buffer(site, CoreBuffer::UB, bytes);
      }
    }
    inputs_.push_back(is_plain_layout(stored.format) ? std::move(t) : graph::to_logical(t));
    // Bytes as HBM holds them and no scan noted (a DMA'd weight or input, read for the first time
    // since it was written): scanned here and noted, so the next read of the same bytes takes it.
    // Only a tensor whose scan costs more than the note (a map entry and a descriptor copy, and
    // the entry's removal when the range is written again).
    constexpr std::size_t kNoteInputBytes = 16384;
    if (!changed && !input_scans_[i] && bytes.size() >= kNoteInputBytes) {
      input_scans_[i] = scan_tensor(inputs_.back());
      mem.note_scanned(ref.addr, bytes.size(), stored, *input_scans_[i]);
    }
  }
  input_ptrs_.clear();
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    input_ptrs_.push_back(args_.inputs[i].dtype == spec::kAbsentTensor ? nullptr : &inputs_[i]);
  scan_inputs();
  load_quant_state(mem);
}

void OpRunner::load_quant_state(KernelMemory& mem) {
  quant_ = QuantContext{};
  for (const PreparedOp::QuantState& q : prep_->quant_state) {
    if (q.history < 1 || q.history > (1 << 20))
      throw std::runtime_error(fmt::format("{}: {}{} must be in [1, 2^20]", op_label(args_), q.prefix, spec::kQuantHistorySuffix));
    std::vector<float> v(static_cast<std::size_t>(q.history) + 1);
    mem.read(static_cast<std::uint64_t>(q.addr), std::as_writable_bytes(std::span(v)));
    quant_.meta[static_cast<std::uint64_t>(q.addr)] = std::move(v);
  }
}

namespace {

float element_f32(const graph::Tensor& t, std::int64_t i) {
  if (i < 0) return 0.0f;
  const auto k = static_cast<std::size_t>(i);
  switch (t.dtype()) {
    case graph::DType::F16: return num::to_f32(as_f16(t)[k]).value;
    case graph::DType::BF16: return num::to_f32(as_bf16(t)[k]).value;
    case graph::DType::F32: return t.data<float>()[k];
    default: return 0.0f;
  }
}

}  // namespace

void OpRunner::scan_inputs() {
  detection_ = OpDetection{};
  inputs_finite_ = true;
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    if (!input_ptrs_[i]) continue;
    const num::ScanReport r = input_scans_[i] ? *input_scans_[i] : scan_tensor(inputs_[i]);
    auto note = [&](spec::ExcKindBit k, std::int32_t& slot, std::int64_t first, std::int64_t count, std::uint32_t fs) {
      if (count <= 0) return;
      KindHit& h = detection_.inputs.kinds[k];
      if (slot < 0) {
        slot = static_cast<std::int32_t>(i);
        h.first = first;
        h.value = element_f32(inputs_[i], first);
      }
      h.count += static_cast<std::uint64_t>(count);
      detection_.inputs.status |= fs;
    };
    note(spec::kExcNanInput, detection_.nan_input, r.first_nan, r.nan_count, spec::kFsNanInput);
    note(spec::kExcInfInput, detection_.inf_input, r.first_inf, r.inf_count, spec::kFsInfInput);
    if (r.subnormal_count > 0) detection_.inputs.status |= spec::kFsDenormal;
    if (r.nan_count > 0 || r.inf_count > 0) inputs_finite_ = false;
  }
}

OpWork OpRunner::work() const {
  if (!prep_->work_) {
    KernelCall call{args_, op_, input_ptrs_, out_descs_, mode_, accum_, nullptr, nullptr, nullptr, prep_->state.get()};
    prep_->work_ = kernel_->work(call);
  }
  return *prep_->work_;
}

std::shared_ptr<const TilePlan> PreparedOp::plan(const OpWork& w, const CoreTimingParams& p, std::uint32_t cores,
                                                 std::uint64_t out_elems) const {
  const PlanKey key{p, cores, w.stats_bytes, out_elems};
  for (const auto& [k, plan] : plans_)
    if (k == key) return plan;
  constexpr std::size_t kMaxPlans = 16;  // grants of different core counts: a few per op
  if (plans_.size() >= kMaxPlans) plans_.clear();
  plans_.emplace_back(key, std::make_shared<const TilePlan>(plan_tiles(w, p, cores, out_elems)));
  return plans_.back().second;
}

void OpRunner::compute(FaultHooks* hooks, const FaultSite& site) {
  if (prep_->cube && fault_wanted(hooks, kFaultGemmAccumulation))
    hooks->on_gemm_accumulation(site, accum_);
  if (accum_.acc_dtype != graph::DType::F32 && accum_.acc_dtype != graph::DType::F16)
    throw std::runtime_error(fmt::format("{}: accumulation dtype {} is not supported (F32 or F16)", op_label(args_),
                                         graph::dtype_name(accum_.acc_dtype)));
  quant_.records.clear();
  KernelCall call{args_, op_, input_ptrs_, out_descs_, mode_, accum_, hooks, &site, &quant_, prep_->state.get()};
  computed_ = prep_->quantized ? compute_quantized(*kernel_, call) : kernel_->compute(call);
  note_quant_saturation();
  // Cube results sit in the L0C accumulator (FP32) until the output conversion.
  if (prep_->cube && fault_wanted(hooks, kFaultCoreBuffer))
    for (auto& v : computed_.values) hooks->on_core_buffer(site, CoreBuffer::L0C, std::as_writable_bytes(std::span(v)));
  if (computed_.values.size() != out_descs_.size())
    throw std::runtime_error(fmt::format("{}: kernel produced {} outputs, the args name {}", op_label(args_),
                                         computed_.values.size(), out_descs_.size()));
  computed_.flags.resize(out_descs_.size());
  for (std::size_t o = 0; o < out_descs_.size(); ++o)
    if (static_cast<std::int64_t>(computed_.values[o].size()) != graph::numel(out_descs_[o].shape))
      throw std::runtime_error(fmt::format("{}: output {} has {} elements, the args say {} {}", op_label(args_), o,
                                           computed_.values[o].size(), graph::shape_str(out_descs_[o].shape),
                                           graph::dtype_name(out_descs_[o].dtype)));
}

void OpRunner::note_quant_saturation() {
  for (const QuantOpRecord& r : quant_.records)
    for (const QuantOperandRecord* o : {&r.activations, &r.weights}) {
      if (!o->on || o->stats.saturated == 0 || o->slot < 0) continue;
      KindHit& h = detection_.inputs.kinds[spec::kExcOverflow];
      if (!h.hit()) {
        h.first = o->stats.first_saturated;
        h.value = o->stats.first_saturated_value;
        h.slot = o->slot;
      }
      h.count += o->stats.saturated;
      h.detail |= spec::kExcDetailQuantize;
      detection_.inputs.status |= spec::kFsOverflow;
    }
}

void OpRunner::finish(FaultHooks* hooks, const FaultSite& site, std::uint32_t vector_lanes) {
  outputs_.clear();
  output_scans_.clear();
  detection_.outputs.clear();
  const bool lanes = prep_->vector_out && fault_wanted(hooks, kFaultVectorLanes);
  for (std::size_t o = 0; o < out_descs_.size(); ++o) {
    const graph::TensorDesc& d = out_descs_[o];
    FloatBuffer& pre = computed_.values[o];
    if (d.dtype == graph::DType::F64)
      throw std::runtime_error(fmt::format("{}: output {} is float64, which the device does not store",
                                           op_label(args_), o));
    // A plain layout has no padding: the copy or the conversion below writes every byte.
    graph::Tensor out = is_plain_layout(d.format) ? graph::Tensor::for_overwrite(d) : graph::Tensor(d);
    num::BulkReport conv;
    Scans scans;
    if (o < computed_.exact.size() && computed_.exact[o].dtype() == d.dtype && computed_.exact[o].nbytes() == out.nbytes() &&
        !graph::is_float(d.dtype)) {
      std::copy(computed_.exact[o].bytes().begin(), computed_.exact[o].bytes().end(), out.bytes().begin());
    } else if (d.dtype == graph::DType::F16) {
      // The detection circuit's scans of both sides ride along with the conversion.
      auto raw = out.data<std::uint16_t>();
      num::ConvertScan cs = num::convert_scanned(pre, std::span<num::f16>(reinterpret_cast<num::f16*>(raw.data()), raw.size()), mode_);
      conv = cs.flags;
      scans.pre = cs.in;
      scans.out = cs.out;
    } else {
      if (prep_->computes && graph::is_float(d.dtype)) scans.pre = scan_computed(o);  // detect_output's scan, made here
      conv = deliver(pre, out, mode_);
    }
    // The host arithmetic that computed the values gives NaNs of either sign and any payload
    // (which operand's NaN an x86 instruction passes on depends on how the compiler ordered
    // them): a computed NaN is delivered as the default NaN, as the Cube's GEMM and the
    // numerics library's arithmetic give it; the flags and scans above are unchanged by it.
    if (prep_->computes && scans.pre && scans.pre->scan.nan_count > 0) canonicalize_delivered(pre, out);
    if (lanes) hooks->on_vector_lanes(site, d, 0, vector_lanes, out.bytes());
    if (fault_wanted(hooks, kFaultOpOutput)) hooks->on_op_output(site, static_cast<std::uint16_t>(o), d, 0, out.bytes());
    if (lanes || fault_wanted(hooks, kFaultOpOutput)) scans.out.reset();  // a fault may have changed the bytes
    outputs_.push_back(std::move(out));
    if (!scans.out) scans.out = scan_tensor(outputs_.back());
    output_scans_.push_back(*scans.out);
    detection_.outputs.push_back(detect_output(o, conv, inputs_finite_, scans));
  }
}

namespace {

// The least FP32 magnitude that rounds to infinity in an output of `dt` (infinity: none does).
float overflow_limit(graph::DType dt) {
  return dt == graph::DType::F16    ? 65520.0f
         : dt == graph::DType::BF16 ? std::bit_cast<float>(0x7F7F8000u)
                                    : std::numeric_limits<float>::infinity();
}

}  // namespace

num::LimitScan OpRunner::scan_computed(std::size_t o) const {
  const std::span<const float> pre(computed_.values[o]);
  const graph::DType dt = out_descs_[o].dtype;
  if (dt == graph::DType::F16 || dt == graph::DType::BF16) return num::scan(pre, overflow_limit(dt));
  return num::LimitScan{num::scan(pre), 0, -1};
}

void OpRunner::canonicalize_delivered(FloatBuffer& pre, graph::Tensor& out) {
  num::canonicalize_nans(std::span<float>(pre.data(), pre.size()));
  switch (out.dtype()) {
    case graph::DType::F32: num::canonicalize_nans(out.data<float>()); break;
    case graph::DType::F16: {
      auto raw = out.data<std::uint16_t>();
      num::canonicalize_nans(std::span<num::f16>(reinterpret_cast<num::f16*>(raw.data()), raw.size()));
      break;
    }
    case graph::DType::BF16: {
      auto raw = out.data<std::uint16_t>();
      num::canonicalize_nans(std::span<num::bf16>(reinterpret_cast<num::bf16*>(raw.data()), raw.size()));
      break;
    }
    default: break;  // no other dtype holds a NaN (an F64 output is refused before)
  }
}

TensorFlags OpRunner::detect_output(std::size_t o, const num::BulkReport& conv, bool inputs_finite, const Scans& scans) const {
  using num::Flag;
  const FloatBuffer& pre = computed_.values[o];
  const num::BulkReport& cf = computed_.flags[o];
  // Finite results beyond the output format's range (they overflow in the conversion), found in
  // the same pass as the computed values' NaNs and infinities.
  const num::LimitScan pl = scans.pre ? *scans.pre : scan_computed(o);
  const num::ScanReport& ps = pl.scan;
  const std::int64_t over_first = pl.first_beyond;
  const auto over_count = static_cast<std::uint64_t>(pl.beyond_count);
  const num::ScanReport& fs = *scans.out;  // finish() scans the delivered tensor when the conversion did not
  TensorFlags f;

  const bool cube = prep_->cube;
  const std::uint32_t acc_detail =
      cube && accum_.acc_dtype == graph::DType::F16 ? spec::kExcDetailAccumulator | spec::kExcDetailAccFp16
      : cube && accum_.split_k_chunk != 0          ? spec::kExcDetailPartial
                                                   : spec::kExcDetailAccumulator;
  const std::uint32_t cube_fp16 = cube && accum_.acc_dtype == graph::DType::F16 ? spec::kExcDetailAccFp16 : 0u;
  // The element's value as the datapath computed it (before the conversion), or as delivered
  // when the computed value is unremarkable (a NaN that appeared after the computation).
  // An infinite element whose computed value is finite and inside the output format's range was
  // written after the computation (a fault on the output): the latch holds what was delivered.
  const float in_range = overflow_limit(out_descs_[o].dtype);
  auto value_at = [&](std::int64_t i, bool nan_wanted) {
    if (i < 0) return 0.0f;
    const float p = pre[static_cast<std::size_t>(i)];
    if (nan_wanted && !std::isnan(p)) return element_f32(outputs_[o], i);
    if (!nan_wanted && std::fabs(p) < in_range) {
      const float delivered = element_f32(outputs_[o], i);
      if (std::isinf(delivered)) return delivered;
    }
    return p;
  };

  if (detection_.nan_input < 0) {
    const std::int64_t first = lowest({ps.first_nan, fs.first_nan, cf.first_index(Flag::Invalid),
                                       conv.first_index(Flag::Invalid)});
    KindHit& h = f.kinds[spec::kExcInvalid];
    h.add(first, static_cast<std::uint64_t>(std::max(ps.nan_count, fs.nan_count)));
    if (h.hit()) {
      h.value = value_at(first, true);
      h.detail = (cf.first_index(Flag::Invalid) >= 0 ? acc_detail : 0u) | cube_fp16;
      if (ps.first_nan >= 0 || fs.first_nan >= 0 || conv.first_index(Flag::Invalid) >= 0) h.detail |= spec::kExcDetailCompute;
    }
  }
  const std::int64_t inf_first = inputs_finite ? lowest({ps.first_inf, fs.first_inf}) : -1;
  // Conversion overflows are finite before and Inf (INF_NAN) after the conversion: count once.
  const std::uint64_t over_total =
      inputs_finite ? std::max(over_count + static_cast<std::uint64_t>(ps.inf_count), static_cast<std::uint64_t>(fs.inf_count))
                    : over_count;
  {
    KindHit& h = f.kinds[spec::kExcOverflow];
    const std::int64_t acc_over = cf.first_index(Flag::Overflow);
    const std::int64_t conv_over = lowest({conv.first_index(Flag::Overflow), over_first});
    h.add(lowest({conv_over, acc_over, inf_first}), over_total);
    if (h.hit()) {
      h.value = value_at(h.first, false);
      h.detail = cube_fp16;
      if (acc_over >= 0) h.detail |= acc_detail;
      if (conv_over >= 0) h.detail |= spec::kExcDetailConversion;
      // an Inf the accumulation or the conversion does not explain was computed
      if (inf_first >= 0 && acc_over < 0 && (ps.first_inf >= 0 || conv_over < 0)) h.detail |= spec::kExcDetailCompute;
    }
  }
  {
    KindHit& h = f.kinds[spec::kExcUnderflow];
    const std::int64_t acc_under = lowest({cf.first_index(Flag::Underflow), cf.first_index(Flag::DenormalOut)});
    const std::int64_t conv_under = lowest({conv.first_index(Flag::Underflow), conv.first_index(Flag::DenormalOut)});
    h.add(lowest({conv_under, acc_under}), static_cast<std::uint64_t>(fs.subnormal_count));
    if (h.hit()) {
      h.value = value_at(h.first, false);
      h.detail = (acc_under >= 0 ? acc_detail : 0u) | (conv_under >= 0 ? spec::kExcDetailConversion : 0u) | cube_fp16;
    }
  }

  const num::Flags all = conv.flags | cf.flags;
  if (f.kinds[spec::kExcOverflow].hit()) f.status |= spec::kFsOverflow;
  if (f.kinds[spec::kExcUnderflow].hit()) f.status |= spec::kFsUnderflow;
  if (f.kinds[spec::kExcInvalid].hit()) f.status |= spec::kFsInvalid;
  if (all.has(Flag::DenormalOut) || all.has(Flag::DenormalIn)) f.status |= spec::kFsDenormal;
  if (all.has(Flag::DivByZero)) f.status |= spec::kFsDivByZero;
  return f;
}

void OpRunner::store(KernelMemory& mem) const {
  for (std::size_t o = 0; o < outputs_.size(); ++o) {
    const graph::TensorDesc& stored = prep_->output_stored[o];
    const graph::Tensor& t = outputs_[o];
    if (is_plain_layout(stored.format)) {
      mem.write(args_.outputs[o].addr, t.bytes());
      if (o < output_scans_.size()) mem.note_scanned(args_.outputs[o].addr, t.nbytes(), stored, output_scans_[o]);
      continue;
    }
    std::vector<std::byte> dst(graph::physical_nbytes(stored));
    graph::convert_layout(t.bytes(), graph::Format::ND, dst, stored.format, stored.shape,
                          graph::dtype_size(stored.dtype));
    mem.write(args_.outputs[o].addr, dst);
    if (o < output_scans_.size()) mem.note_scanned(args_.outputs[o].addr, dst.size(), stored, output_scans_[o]);
  }
  for (const auto& [addr, v] : quant_.meta) mem.write(addr, std::as_bytes(std::span(v)));
  // Debug partial dumps of a fused op: each requested intermediate, rounded to the ref's dtype.
  for (std::size_t i = 0; i < args_.partial_outputs.size() && i < computed_.intermediates.size(); ++i) {
    const spec::TensorRef& ref = args_.partial_outputs[i];
    if (ref.dtype == spec::kAbsentTensor || computed_.intermediates[i].empty()) continue;
    const graph::TensorDesc d = stored_desc(ref);
    const FloatBuffer& v = computed_.intermediates[i];
    if (static_cast<std::int64_t>(v.size()) != graph::numel(d.shape) || d.dtype == graph::DType::F64)
      throw std::runtime_error(fmt::format("{}: partial output {} has {} elements, its ref says {} {}", op_label(args_),
                                           i, v.size(), graph::shape_str(d.shape), graph::dtype_name(d.dtype)));
    graph::Tensor t = is_plain_layout(d.format) ? graph::Tensor::for_overwrite(d) : graph::Tensor(d);
    deliver(v, t, mode_);  // the same output conversion as the op's outputs
    mem.write(ref.addr, t.bytes());
  }
}

}  // namespace probelab::chip::kernels
