#include "probes/fake_device.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "chip_model/spec/irq.h"
#include "chip_model/spec/op_args.h"
#include "graph/format.h"
#include "probes/capture_drain.h"
#include "probes/expr.h"
#include "probes/tensor_stats.h"

namespace probelab::probes {

using namespace spec;

FakeDevice::FakeDevice(std::uint32_t rank, std::size_t hbm_bytes) : rank_(rank), hbm_capacity_(hbm_bytes) {
  regs_[kRegVersion] = 0x00010000;
  regs_[kRegNumCores] = 1;
  regs_[kRegClockMhz] = 1000;
}

std::uint32_t FakeDevice::reg(std::uint32_t offset) const {
  auto it = regs_.find(offset);
  return it == regs_.end() ? 0 : it->second;
}

bool FakeDevice::halted(std::uint32_t stream) const { return halted_task_.count(stream) != 0; }

std::uint64_t FakeDevice::cycles() {
  tick();
  return cycle_;
}

std::uint32_t FakeDevice::read_reg(std::uint32_t off) {
  tick();
  if (ExceptionUnit::owns(off)) return exc_.read(off);
  if (off >= kRegStreamBase && off < kRegStreamBase + kNumStreams * kStreamStride) {
    std::uint32_t s = (off - kRegStreamBase) / kStreamStride, r = (off - kRegStreamBase) % kStreamStride;
    if (r == kStreamStatus) return halted(s) ? kStreamHalted : kStreamIdle;
    if (r == kStreamHaltTask) return halted(s) ? halted_task_.at(s) : reg(off);
  }
  switch (off) {
    case kRegChipId: return rank_;
    case kRegCycleLo: regs_[kRegCycleHi] = static_cast<std::uint32_t>(cycle_ >> 32); return static_cast<std::uint32_t>(cycle_);
    case kRegIrqRaw: return raw_irq_;
    case kRegIrqPending: return raw_irq_ & ~reg(kRegIrqMask);
    case kRegCapActive: return active_ < 0 ? 0 : static_cast<std::uint32_t>(active_);
    case kRegCapFill: return fill_;
    case kRegCapReady: return ready_;
    case kRegCapReadyBytes0: return ready_bytes_[0];
    case kRegCapReadyBytes1: return ready_bytes_[1];
    case kRegCapRecords: return static_cast<std::uint32_t>(produced_);
    case kRegCapDropped: return static_cast<std::uint32_t>(dropped_);
    case kRegCapOversize: return static_cast<std::uint32_t>(oversize_);
    case kRegCapOversizeMax: return static_cast<std::uint32_t>(oversize_max_);
    case kRegCapBytesLo: return static_cast<std::uint32_t>(cap_bytes_);
    case kRegCapBytesHi: return static_cast<std::uint32_t>(cap_bytes_ >> 32);
    case kRegCapStallLo: return static_cast<std::uint32_t>(stall_cycles_);
    case kRegCapStallHi: return static_cast<std::uint32_t>(stall_cycles_ >> 32);
    default: return reg(off);
  }
}

void FakeDevice::write_reg(std::uint32_t off, std::uint32_t v) {
  tick();
  if (off >= kRegStreamBase && off < kRegStreamBase + kNumStreams * kStreamStride) {
    std::uint32_t s = (off - kRegStreamBase) / kStreamStride, r = (off - kRegStreamBase) % kStreamStride;
    if (r == kStreamResume) {
      if (v & 1) {
        regs_[stream_reg(s, kStreamHaltTask)] = halted(s) ? halted_task_[s] : 0;
        halted_task_.erase(s);
      }
      return;
    }
  }
  if (ExceptionUnit::owns(off)) {
    exc_.write(off, v);
    return;
  }
  switch (off) {
    case kRegIrqAck: raw_irq_ &= ~v; return;
    case kRegIrqMask: regs_[off] = v; deliver(); return;
    case kRegCapCtrl:
      if ((v & kCapEnable) && !(reg(kRegCapCtrl) & kCapEnable)) {
        active_ = 0;
        fill_ = ready_ = 0;
        ready_bytes_[0] = ready_bytes_[1] = 0;
      }
      regs_[off] = v;
      return;
    case kRegCapRelease:
      if (v < 2) {
        ready_ &= ~(1u << v);
        ready_bytes_[v] = 0;
        if (active_ < 0) {
          active_ = static_cast<int>(v);
          fill_ = 0;
        }
      }
      return;
    case kRegCapFlush:
      if ((v & 1) && active_ >= 0 && fill_ > 0) cap_handover();
      return;
    default: regs_[off] = v; return;
  }
}

// ---- memory ------------------------------------------------------------------------------------

std::uint64_t FakeDevice::alloc(std::size_t bytes, std::size_t align) {
  tick();
  if (align == 0) align = 1;
  std::uint64_t a = (next_addr_ + align - 1) / align * align;
  if (a + bytes > hbm_capacity_ + 0x1000) throw std::runtime_error(fmt::format("FakeDevice: HBM exhausted allocating {} bytes", bytes));
  next_addr_ = a + std::max<std::size_t>(bytes, 1);
  blocks_[a] = Block{a, std::vector<std::byte>(bytes)};
  return a;
}

void FakeDevice::free(std::uint64_t addr) {
  tick();
  if (!blocks_.erase(addr)) throw std::runtime_error(fmt::format("FakeDevice: free of unknown address 0x{:x}", addr));
}

FakeDevice::Block& FakeDevice::block_at(std::uint64_t addr, std::size_t len) {
  auto it = blocks_.upper_bound(addr);
  if (it == blocks_.begin()) throw std::out_of_range(fmt::format("FakeDevice: address 0x{:x} not allocated", addr));
  --it;
  Block& b = it->second;
  if (addr + len > b.addr + b.bytes.size())
    throw std::out_of_range(fmt::format("FakeDevice: access [0x{:x}, +{}) beyond allocation 0x{:x}+{}", addr, len, b.addr, b.bytes.size()));
  return b;
}

void FakeDevice::dma_write(std::uint64_t addr, std::span<const std::byte> src) {
  tick();
  if (src.empty()) return;
  Block& b = block_at(addr, src.size());
  std::memcpy(b.bytes.data() + (addr - b.addr), src.data(), src.size());
}

void FakeDevice::dma_read(std::uint64_t addr, std::span<std::byte> dst) {
  tick();
  if (dst.empty()) return;
  Block& b = block_at(addr, dst.size());
  std::memcpy(dst.data(), b.bytes.data() + (addr - b.addr), dst.size());
}

spec::TensorRef FakeDevice::place(const graph::Tensor& t) {
  TensorRef r;
  r.addr = alloc(std::max<std::size_t>(t.nbytes(), 1));
  dma_write(r.addr, t.bytes());
  r.dtype = static_cast<std::uint8_t>(t.desc().dtype);
  r.format = static_cast<std::uint8_t>(t.desc().format);
  r.rank = static_cast<std::uint8_t>(t.shape().size());
  for (std::size_t i = 0; i < t.shape().size() && i < kMaxDims; ++i) r.dims[i] = t.shape()[i];
  return r;
}

graph::Tensor FakeDevice::read_tensor(const TensorRef& ref) {
  graph::TensorDesc d;
  d.dtype = static_cast<graph::DType>(ref.dtype);
  d.format = static_cast<graph::Format>(ref.format);
  for (int i = 0; i < ref.rank; ++i) d.shape.push_back(ref.dims[i]);
  graph::Tensor t = graph::Tensor::for_overwrite(d);
  dma_read(ref.addr, t.bytes());
  return graph::to_logical(std::move(t));
}

// ---- interrupts --------------------------------------------------------------------------------

void FakeDevice::raise_irq(std::uint32_t lines) {
  raw_irq_ |= lines;
  deliver();
}

void FakeDevice::deliver() {
  if (in_handler_) {
    redeliver_ = true;
    return;
  }
  if (!handler_) return;
  do {
    redeliver_ = false;
    std::uint32_t pending = raw_irq_ & ~reg(kRegIrqMask);
    if (!pending) return;
    in_handler_ = true;
    handler_(pending);
    in_handler_ = false;
  } while (redeliver_);
}

// ---- exception latch ---------------------------------------------------------------------------

void FakeDevice::latch_exception(const Exception& e) {
  static constexpr std::uint32_t fs[kExcKindCount] = {kFsOverflow, kFsUnderflow, kFsInvalid, kFsNanInput, kFsInfInput};
  if (e.kind >= kExcKindCount) throw std::invalid_argument(fmt::format("FakeDevice: exception kind {}", e.kind));
  ExcReport r;
  r.status = fs[e.kind];
  r.op_id = e.op_id;
  r.task_id = e.task_id;
  r.core = e.core;
  r.stream = e.stream;
  r.step = e.step ? *e.step : reg(kRegStep);
  ExcHit& h = r.kinds[e.kind];
  h.hit = true;
  h.element = e.element;
  h.count = e.count;
  h.cycle = e.cycle ? e.cycle : cycle_;
  const bool nan_kind = e.kind == kExcInvalid || e.kind == kExcNanInput;
  const float v = e.value ? *e.value : (nan_kind ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity());
  h.value_bits = std::bit_cast<std::uint32_t>(v);
  h.detail = e.detail;
  h.slot = static_cast<std::uint16_t>(e.output);
  // input kinds, and an operand that saturated when a quantized op quantized it
  h.is_input = e.kind == kExcNanInput || e.kind == kExcInfInput || (e.detail & kExcDetailQuantize);
  h.dtype = e.dtype;
  if (exc_.enable_mask() & (1u << e.kind)) exc_ops_.insert(e.op_id);
  if (exc_.report(r)) raise_irq(kIrqException);
}

// ---- capture unit ------------------------------------------------------------------------------

bool FakeDevice::cap_handover() {
  if (active_ >= 0) {
    ready_ |= 1u << active_;
    ready_bytes_[active_] = fill_;
    fill_ = 0;
    active_ = -1;
    raise_irq(kIrqCaptureFull);  // the handler may drain and release synchronously
  }
  if (active_ >= 0) return true;
  int n = (reg(kRegCapCtrl) & kCapPingPong) ? 2 : 1;
  for (int i = 0; i < n; ++i)
    if (!(ready_ & (1u << i))) {
      active_ = i;
      fill_ = 0;
      return true;
    }
  return false;
}

void FakeDevice::cap_append(std::span<const std::byte> rec) {
  std::uint32_t ctrl = reg(kRegCapCtrl);
  ++produced_;
  std::uint32_t size = reg(kRegCapBufSize);
  if (!(ctrl & kCapEnable) || rec.size() > size) {
    if (ctrl & kCapEnable) {
      ++oversize_;
      oversize_max_ = std::max<std::uint64_t>(oversize_max_, rec.size());
    }
    ++dropped_;
    return;
  }
  if (active_ < 0 || fill_ + rec.size() > size) {
    if (!cap_handover()) {
      if (!(ctrl & kCapDropOnFull)) {
        stall_cycles_ += 1000;
        raise_irq(kIrqCaptureFull);  // stalled producer: the host gets another chance to drain
        if (active_ < 0) cap_handover();
      }
      if (active_ < 0) {
        ++dropped_;
        if (!(ctrl & kCapDropOnFull)) ++stall_drops_;
        return;
      }
    }
  }
  std::uint64_t base = active_ == 0 ? (std::uint64_t{reg(kRegCapBuf0Hi)} << 32 | reg(kRegCapBuf0Lo))
                                    : (std::uint64_t{reg(kRegCapBuf1Hi)} << 32 | reg(kRegCapBuf1Lo));
  Block& b = block_at(base + fill_, rec.size());
  std::memcpy(b.bytes.data() + (base + fill_ - b.addr), rec.data(), rec.size());
  fill_ += static_cast<std::uint32_t>(rec.size());
  cap_bytes_ += rec.size();
}

void FakeDevice::emit_record(CaptureRecordHeader h, std::span<const std::byte> payload) {
  h.seq = seq_++;
  if (!h.cycle) h.cycle = cycle_;
  auto rec = encode_record(h, payload);
  cap_append(rec);
}

void FakeDevice::emit_raw(std::span<const std::byte> bytes) {
  ++seq_;
  cap_append(bytes);
}

// ---- streams -----------------------------------------------------------------------------------

void FakeDevice::halt_stream(std::uint32_t stream, std::uint32_t task_id) {
  halted_task_[stream] = task_id;
  raise_irq(kIrqBreakpoint);
}

void FakeDevice::submit(std::uint32_t stream, const TaskDescriptor& t) {
  tick();
  submitted_.emplace_back(stream, t);
  queue_[stream].push_back(t);
  run_queue(stream);
}

void FakeDevice::run_queue(std::uint32_t stream) {
  auto& q = queue_[stream];
  while (!q.empty() && !halted(stream)) {
    TaskDescriptor t = q.front();
    q.pop_front();
    switch (t.kind) {
      case TaskKind::Capture: run_capture(t); break;
      case TaskKind::Breakpoint: run_breakpoint(stream, t); break;
      case TaskKind::Kernel: run_kernel(stream, t); break;
      case TaskKind::FloatStatusGet: {
        const FloatStatusBuffer b = exc_.status_buffer(cycle_);
        Block& blk = block_at(t.args_addr, sizeof b);
        std::memcpy(blk.bytes.data() + (t.args_addr - blk.addr), &b, sizeof b);
        break;
      }
      case TaskKind::FloatStatusReset: exc_.clear_status(0xFFFFFFFFu, cycle_, stream); break;
      default: break;
    }
    if (t.flags & kTaskFlagStatusRecord) {
      const StepStatus st = exc_.take_step_status();
      CaptureRecordHeader h;
      h.op_id = t.op_id;
      h.task_id = t.task_id;
      h.step = t.step;
      h.rank = rank_;
      h.payload = CapturePayload::StepStatus;
      emit_record(h, std::as_bytes(std::span(&st, 1)));
    }
    regs_[stream_reg(stream, kStreamCompleted)]++;
    if (t.flags & kTaskFlagNotify) raise_irq(kIrqStreamDone);
  }
}

bool FakeDevice::synchronize(std::uint32_t stream) {
  tick();
  run_queue(stream);
  return !halted(stream);
}

void FakeDevice::run_kernel(std::uint32_t stream, const TaskDescriptor& t) {
  if (!t.stats_inputs && !t.stats_outputs && !t.dump_outputs) {
    if (on_kernel) on_kernel(stream, t);
    return;
  }
  std::vector<std::byte> block(t.args_size);
  dma_read(t.args_addr, block);
  const spec::OpArgs args = spec::decode_op_args(block);
  auto each = [&](std::uint16_t mask, const std::vector<TensorRef>& refs, bool is_input, bool full = false) {
    for_each_bit(mask, [&](std::uint16_t i) {
      if (i >= refs.size() || refs[i].dtype == kAbsentTensor)
        throw std::logic_error(fmt::format("FakeDevice: task {} asks a capture of {} {}, which the op does not have",
                                           t.task_id, is_input ? "input" : "output", i));
      if (full) emit_record(tensor_header(t, refs[i], CapturePayload::FullTensor, i, is_input), read_tensor(refs[i]).bytes());
      else emit_stats(t, refs[i], i, is_input);
    });
  };
  each(t.stats_inputs, args.inputs, true);
  if (on_kernel) on_kernel(stream, t);
  each(t.stats_outputs, args.outputs, false);
  each(t.dump_outputs, args.outputs, false, true);
}

CaptureRecordHeader FakeDevice::tensor_header(const TaskDescriptor& t, const TensorRef& ref, CapturePayload payload,
                                              std::uint16_t index, bool is_input) const {
  CaptureRecordHeader h;
  h.op_id = t.op_id;
  h.task_id = t.task_id;
  h.step = t.step;
  h.rank = rank_;
  h.output_index = index;
  h.is_input = is_input ? 1 : 0;
  h.payload = payload;
  h.dtype = ref.dtype;
  h.format = static_cast<std::uint8_t>(ref.rank == 4 ? graph::Format::NCHW : graph::Format::ND);
  h.rank_dims = ref.rank;
  for (int i = 0; i < ref.rank; ++i) h.dims[i] = ref.dims[i];
  return h;
}

void FakeDevice::emit_stats(const TaskDescriptor& t, const TensorRef& ref, std::uint16_t index, bool is_input) {
  const CaptureStats s = compute_stats(read_tensor(ref));
  emit_record(tensor_header(t, ref, CapturePayload::Statistics, index, is_input), std::as_bytes(std::span(&s, 1)));
}

void FakeDevice::run_capture(const TaskDescriptor& t) {
  CaptureArgs a;
  std::vector<std::byte> raw(sizeof a);
  dma_read(t.args_addr, raw);
  std::memcpy(&a, raw.data(), sizeof a);
  graph::Tensor x = read_tensor(a.tensor);
  const CaptureRecordHeader h =
      tensor_header(t, a.tensor, static_cast<CapturePayload>(a.payload), a.output_index, a.is_input != 0);
  std::vector<std::byte> payload;
  switch (h.payload) {
    case CapturePayload::Statistics: {
      CaptureStats s = compute_stats(x);
      payload.resize(sizeof s);
      std::memcpy(payload.data(), &s, sizeof s);
      break;
    }
    case CapturePayload::Hash: {
      std::uint64_t d = xxh64(x.bytes());
      payload.resize(8);
      std::memcpy(payload.data(), &d, 8);
      break;
    }
    case CapturePayload::FullTensor:
    default: payload.assign(x.bytes().begin(), x.bytes().end()); break;
  }
  emit_record(h, payload);
}

void FakeDevice::run_breakpoint(std::uint32_t stream, const TaskDescriptor& t) {
  BreakpointArgs a;
  std::vector<std::byte> raw(sizeof a);
  dma_read(t.args_addr, raw);
  std::memcpy(&a, raw.data(), sizeof a);
  bool halt = false;
  if (a.num_clauses > 0) {
    CaptureStats s = compute_stats(read_tensor(a.tensor));
    halt = predicate_holds(std::span(a.clauses, std::min<std::uint32_t>(a.num_clauses, kMaxClauses)), a.any != 0, s);
  }
  if (a.halt_on_exception && exc_ops_.count(t.op_id)) halt = true;
  if (halt) halt_stream(stream, t.task_id);
}

}  // namespace probelab::probes
