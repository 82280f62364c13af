#include "chip_model/capture_unit.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "chip_model/hbm.h"
#include "chip_model/interrupt_controller.h"
#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"
#include "chip_model/trace.h"
#include "graph/format.h"

namespace probelab::chip {

spec::CaptureRecordHeader tensor_record_header(const spec::TaskDescriptor& task, const spec::TensorRef& t,
                                               spec::CapturePayload payload, std::uint16_t index, bool is_input) {
  spec::CaptureRecordHeader h;
  h.op_id = task.op_id;
  h.task_id = task.task_id;
  h.step = task.step;
  h.output_index = index;
  h.payload = payload;
  h.dtype = t.dtype;
  const auto f = static_cast<graph::Format>(t.format);
  h.format = static_cast<std::uint8_t>(f == graph::Format::ND || f == graph::Format::FRACTAL_NZ ? graph::Format::ND
                                                                                                 : graph::Format::NCHW);
  h.rank_dims = static_cast<std::uint8_t>(std::min<std::uint32_t>(t.rank, spec::kMaxDims));
  h.is_input = is_input ? 1 : 0;
  for (int i = 0; i < h.rank_dims; ++i) h.dims[i] = t.dims[i];
  return h;
}

CaptureUnit::CaptureUnit(sc_core::sc_module_name name, const ChipConfig& cfg, Hbm& hbm, InterruptController& irq,
                         std::uint32_t rank, Trace* trace)
    : sc_module(name),
      cfg_(cfg),
      hbm_(hbm),
      irq_(irq),
      clock_(cfg.clock_mhz),
      rank_(rank),
      trace_(trace),
      buf_size_(static_cast<std::uint32_t>(cfg.capture_buffer_bytes)),
      hbm_latency_(ChipClock::from_ps(static_cast<std::uint64_t>(cfg.hbm_latency_ns) * 1000)) {
  // A method's immediate notification resumes its threads after those the kernel resumed first.
  sc_core::sc_spawn_options opts;
  opts.spawn_method();
  opts.set_sensitivity(&release_wake_);
  opts.dont_initialize();
  sc_core::sc_spawn([this] { relay_release(); }, sc_core::sc_gen_unique_name("release_relay"), &opts);
}

void CaptureUnit::close_active(const sc_core::sc_time& when) {
  Buffer& b = bufs_[active_];
  b.ready = true;
  b.ready_bytes = fill_;
  ++counters_.buffers_closed;
  if (trace_ && trace_->enabled()) {
    trace_->instant(rank_, "capture", fmt::format("buffer {} ready", active_), "capture", ChipClock::to_ps(when),
                    {{"bytes", std::uint64_t{fill_}}, {"records", b.records}});
    trace_fill(when, 0);
  }
  fill_ = 0;
  if (ping_pong()) active_ ^= 1u;
  irq_.raise(spec::kIrqCaptureFull, std::max(when, last_write_end_));
  ready_event_.notify(sc_core::SC_ZERO_TIME);
}

void CaptureUnit::trace_fill(const sc_core::sc_time& at, std::uint32_t fill) {
  // Samples in the order the unit changed its fill; a buffer closed at a producer's local time
  // earlier than the last record's start is shown at that start.
  fill_trace_ps_ = std::max(fill_trace_ps_, ChipClock::to_ps(at));
  trace_->counter(rank_, "capture buffer fill", "bytes", fill_trace_ps_, static_cast<double>(fill));
}

bool CaptureUnit::produce(spec::CaptureRecordHeader header, std::span<const std::byte> payload,
                          tlm_utils::tlm_quantumkeeper& qk, const FaultSite& site) {
  const std::uint64_t unpadded = sizeof(spec::CaptureRecordHeader) + payload.size();
  const std::uint64_t record_bytes = (unpadded + 7) & ~std::uint64_t{7};
  const auto seq = static_cast<std::uint32_t>(counters_.produced++);  // unique even if we stall
  const bool enabled = (ctrl_ & spec::kCapEnable) != 0;
  if (!enabled || record_bytes > buf_size_) {
    if (enabled) {  // no buffer can ever hold it: dropped whatever the policy, and counted as such
      ++counters_.oversize;
      counters_.oversize_max = std::max(counters_.oversize_max, record_bytes);
      if (trace_ && trace_->enabled())
        trace_->instant(rank_, "capture", "oversize drop", "capture", ChipClock::to_ps(qk.get_current_time()),
                        {{"op_id", std::uint64_t{header.op_id}}, {"bytes", record_bytes}});
    }
    ++counters_.dropped;
    return false;
  }
  // Find room: close the active buffer if the record does not fit, then wait or drop while no
  // buffer is writable.
  for (;;) {
    if (active_writable() && fill_ + record_bytes > buf_size_) close_active(qk.get_current_time());
    if (active_writable()) break;
    if (ctrl_ & spec::kCapDropOnFull) {
      ++counters_.dropped;
      if (trace_ && trace_->enabled())
        trace_->instant(rank_, "capture", "drop", "capture", ChipClock::to_ps(qk.get_current_time()),
                        {{"op_id", std::uint64_t{header.op_id}}});
      return false;
    }
    if (qk.get_local_time() != sc_core::SC_ZERO_TIME) {  // catch up, then re-check
      qk.sync();
      continue;
    }
    const sc_core::sc_time t0 = sc_core::sc_time_stamp();
    sc_core::wait(released_);
    const sc_core::sc_time t1 = sc_core::sc_time_stamp();
    counters_.stall_cycles += clock_.cycle_at(t1) - clock_.cycle_at(t0);
    if (trace_ && trace_->enabled()) {
      // Stalled producers all wake at the same release, so their stalls nest on one track.
      trace_->complete(rank_, "capture.stall", "stall", "capture", ChipClock::to_ps(t0), ChipClock::to_ps(t1 - t0),
                       {{"op_id", std::uint64_t{header.op_id}}});
      trace_->counter(rank_, "capture stall", "cycles", ChipClock::to_ps(t1),
                      static_cast<double>(counters_.stall_cycles));
    }
  }

  header.magic = spec::kCaptureMagic;
  header.record_bytes = static_cast<std::uint32_t>(record_bytes);
  header.seq = seq;
  header.rank = rank_;
  header.cycle = clock_.cycle_at(qk.get_current_time());
  header.payload_bytes = static_cast<std::uint32_t>(payload.size());
  header.checksum = crc32(payload);
  scratch_.assign(record_bytes, std::byte{0});
  std::memcpy(scratch_.data(), &header, sizeof header);
  if (!payload.empty()) std::memcpy(scratch_.data() + sizeof header, payload.data(), payload.size());
  if (fault_wanted(faults_, kFaultCaptureRecord)) {
    FaultSite s = site;
    s.cycle = header.cycle;
    faults_->on_capture_record(s, scratch_);
  }
  // Posted write: the producer hands the record over as soon as the capture engine is free (it
  // waits only for the previous record's data transfer), then continues; the bytes land in HBM
  // at `end` (the buffer-full interrupt is raised no earlier than that).
  Buffer& b = bufs_[active_];
  const sc_core::sc_time start = std::max(qk.get_current_time(), engine_free_);
  const sc_core::sc_time end = hbm_.write(b.addr + fill_, scratch_, start, HbmClient::Capture);
  engine_free_ = std::max(start, end - hbm_latency_);
  last_write_end_ = std::max(last_write_end_, end);
  if (start > qk.get_current_time()) qk.set(start - sc_core::sc_time_stamp());
  fill_ += static_cast<std::uint32_t>(record_bytes);
  ++b.records;
  ++counters_.written;
  ++counters_.buffered;
  counters_.bytes += record_bytes;
  if (trace_ && trace_->enabled()) {
    // The engine is busy from `start` until it may take the next record; the bytes land in HBM
    // a latency later (`lands_ps`), overlapping the next record, so that is an argument.
    trace_->complete(rank_, "capture", "record", "capture", ChipClock::to_ps(start),
                     ChipClock::to_ps(engine_free_ - start),
                     {{"op_id", std::uint64_t{header.op_id}},
                      {"bytes", record_bytes},
                      {"seq", std::uint64_t{header.seq}},
                      {"lands_ps", ChipClock::to_ps(end)}});
    trace_fill(start, fill_);
  }
  return true;
}

std::uint32_t CaptureUnit::read_reg(std::uint32_t offset) const {
  using namespace spec;
  switch (offset) {
    case kRegCapCtrl: return ctrl_;
    case kRegCapBuf0Lo: return static_cast<std::uint32_t>(bufs_[0].addr);
    case kRegCapBuf0Hi: return static_cast<std::uint32_t>(bufs_[0].addr >> 32);
    case kRegCapBuf1Lo: return static_cast<std::uint32_t>(bufs_[1].addr);
    case kRegCapBuf1Hi: return static_cast<std::uint32_t>(bufs_[1].addr >> 32);
    case kRegCapBufSize: return buf_size_;
    case kRegCapActive: return active_;
    case kRegCapFill: return fill_;
    case kRegCapReady: return (bufs_[0].ready ? 1u : 0u) | (bufs_[1].ready ? 2u : 0u);
    case kRegCapReadyBytes0: return bufs_[0].ready ? bufs_[0].ready_bytes : 0;
    case kRegCapReadyBytes1: return bufs_[1].ready ? bufs_[1].ready_bytes : 0;
    case kRegCapRecords: return static_cast<std::uint32_t>(counters_.produced);
    case kRegCapDropped: return static_cast<std::uint32_t>(counters_.dropped);
    case kRegCapBytesLo: return static_cast<std::uint32_t>(counters_.bytes);
    case kRegCapBytesHi: return static_cast<std::uint32_t>(counters_.bytes >> 32);
    case kRegCapStallLo: return static_cast<std::uint32_t>(counters_.stall_cycles);
    case kRegCapStallHi: return static_cast<std::uint32_t>(counters_.stall_cycles >> 32);
    case kRegCapOversize: return static_cast<std::uint32_t>(counters_.oversize);
    case kRegCapOversizeMax: return static_cast<std::uint32_t>(std::min<std::uint64_t>(counters_.oversize_max, UINT32_MAX));
    default: return 0;
  }
}

void CaptureUnit::write_reg(std::uint32_t offset, std::uint32_t value, const sc_core::sc_time& now) {
  using namespace spec;
  auto set_lo = [](std::uint64_t& a, std::uint32_t v) { a = (a & 0xFFFFFFFF00000000ull) | v; };
  auto set_hi = [](std::uint64_t& a, std::uint32_t v) { a = (a & 0xFFFFFFFFull) | (std::uint64_t{v} << 32); };
  switch (offset) {
    case kRegCapCtrl: {
      const bool was_pp = ping_pong();
      ctrl_ = value & (kCapEnable | kCapPingPong | kCapDropOnFull);
      if (was_pp && !ping_pong() && fill_ == 0 && bufs_[1].records == 0 && !bufs_[1].ready) active_ = 0;
      break;
    }
    case kRegCapBuf0Lo: set_lo(bufs_[0].addr, value); break;
    case kRegCapBuf0Hi: set_hi(bufs_[0].addr, value); break;
    case kRegCapBuf1Lo: set_lo(bufs_[1].addr, value); break;
    case kRegCapBuf1Hi: set_hi(bufs_[1].addr, value); break;
    case kRegCapBufSize: buf_size_ = value; break;
    case kRegCapRelease: {
      if (value > 1) break;
      Buffer& b = bufs_[value];
      if (!b.ready) break;
      counters_.drained += b.records;
      counters_.buffered -= b.records;
      b.records = 0;
      b.ready = false;
      b.ready_bytes = 0;
      // Ping-pong with both buffers full: fill whichever buffer the host returned first.
      if (ping_pong() && !active_writable()) active_ = value;
      if (trace_ && trace_->enabled())
        trace_->instant(rank_, "capture", fmt::format("buffer {} released", value), "capture", ChipClock::to_ps(now));
      release_wake_.notify(now > sc_core::sc_time_stamp() ? now - sc_core::sc_time_stamp() : sc_core::SC_ZERO_TIME);
      break;
    }
    case kRegCapFlush:
      if ((value & 1u) && active_writable() && fill_ > 0) close_active(now);
      break;
    default: break;
  }
}

}  // namespace probelab::chip
