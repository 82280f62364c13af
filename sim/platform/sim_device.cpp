#include "sim/platform/sim_device.h"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "chip_model/chip.h"
#include "chip_model/clock.h"
#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"

namespace probelab::sim {

namespace {

sc_core::sc_time ns(double v) { return sc_core::sc_time(v, sc_core::SC_NS); }
std::uint64_t ps(const sc_core::sc_time& t) { return chip::ChipClock::to_ps(t); }

}  // namespace

SimDevice::SimDevice(std::uint32_t rank, const chip::ChipConfig& cfg, Bus bus, chip::Trace* trace,
                     HostCosts costs)
    : rank_(rank), cfg_(cfg), bus_(std::move(bus)), trace_(trace), costs_(costs), alloc_(4096, cfg.hbm_bytes),
      call_cost_(ns(costs.host_call_ns)), pcie_latency_(ns(cfg.pcie_latency_ns)) {}

SimDevice::~SimDevice() = default;

SimDevice::ThreadState& SimDevice::thread_state() {
  // The calling process (sc_get_current_process_handle().get_process_object(), without making a
  // handle); the host threads take turns, so the last one asking is remembered.
  const void* key = static_cast<const sc_core::sc_object*>(sc_core::sc_get_current_process_b());
  if (key == current_key_ && current_) return *current_;
  ThreadState& t = threads_[key];
  if (!t.qk) {
    t.qk = std::make_unique<tlm_utils::tlm_quantumkeeper>();
    tlm_utils::tlm_quantumkeeper::set_global_quantum(ns(cfg_.quantum_ns));
    t.qk->reset();
  }
  current_key_ = key;
  current_ = &t;
  return t;
}

tlm_utils::tlm_quantumkeeper& SimDevice::qk() { return *thread_state().qk; }

std::uint64_t& SimDevice::thread_last_posted() { return thread_state().last_posted; }

sc_core::sc_time SimDevice::local_now() { return qk().get_current_time(); }

void SimDevice::sync() { qk().sync(); }

void SimDevice::charge_call() { qk().inc(call_cost_); }

sc_core::sc_time SimDevice::hbm_issue_delay() {
  // The HBM model serves requests in simulation order, each no earlier than its start: a request
  // dated at the end of a PCIe transfer would hold its channels against every earlier-dated
  // request made after it. Host DMA is charged to HBM when issued (the link, at a thirtieth of
  // HBM bandwidth, is its bottleneck); the data's arrival time is the link's (pcie_transfer).
  return local_now() - sc_core::sc_time_stamp();
}

sc_core::sc_time SimDevice::pcie_transfer(const sc_core::sc_time& ready, std::uint64_t bytes, const char* what,
                                          LinkDir dir) {
  sc_core::sc_time& free_at = pcie_free_[static_cast<std::size_t>(dir)];
  const sc_core::sc_time start = std::max(ready, free_at);
  const sc_core::sc_time xfer = ns(static_cast<double>(bytes) / cfg_.pcie_bandwidth_gbps);
  free_at = start + xfer;
  stats_.pcie_busy_ps += ps(xfer);
  const sc_core::sc_time arrive = start + pcie_latency_ + xfer;
  if (trace_ && trace_->enabled()) {
    // One track per direction: the link serializes one transfer at a time each way; the data
    // arrives a latency after it left (`arrive_ps`), overlapping the next transfer.
    const bool h2d = dir == LinkDir::ToDevice;
    if (bytes > 64)
      trace_->complete(rank_, h2d ? "pcie.h2d" : "pcie.d2h", what, "pcie", ps(start), ps(xfer),
                       {{"bytes", std::uint64_t{bytes}}, {"arrive_ps", ps(arrive)}});
    trace_->rate(rank_, h2d ? "pcie h2d bandwidth" : "pcie d2h bandwidth", "GB/s", ps(start), ps(xfer), bytes);
  }
  return arrive;
}

void SimDevice::transport(tlm::tlm_command cmd, std::uint64_t bus_addr, std::byte* data, std::size_t len,
                          sc_core::sc_time& delay, const char* what) {
  // A payload's construction allocates its extension array: each is made once and reused.
  std::unique_ptr<tlm::tlm_generic_payload> owned;
  if (free_payloads_.empty()) {
    owned = std::make_unique<tlm::tlm_generic_payload>();
  } else {
    owned = std::move(free_payloads_.back());
    free_payloads_.pop_back();
  }
  struct Return {
    std::vector<std::unique_ptr<tlm::tlm_generic_payload>>& to;
    std::unique_ptr<tlm::tlm_generic_payload>& p;
    ~Return() { to.push_back(std::move(p)); }
  } give_back{free_payloads_, owned};
  tlm::tlm_generic_payload& t = *owned;
  t.set_command(cmd);
  t.set_address(bus_addr);
  t.set_data_ptr(reinterpret_cast<unsigned char*>(data));
  t.set_data_length(static_cast<unsigned int>(len));
  t.set_streaming_width(static_cast<unsigned int>(len));
  t.set_byte_enable_ptr(nullptr);
  t.set_dmi_allowed(false);
  t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  bus_(t, delay);
  if (t.is_response_error())
    throw std::runtime_error(fmt::format("rank {}: {} at bus address 0x{:x} ({} bytes) failed: {}", rank_, what,
                                         bus_addr, len, t.get_response_string()));
}

void SimDevice::read_regs_now(std::uint32_t offset, std::span<std::uint32_t> out) {
  if (out.empty()) return;
  if (out.size() * 4 > spec::kMmioMaxBurstBytes)
    throw std::invalid_argument(fmt::format("rank {}: MMIO burst of {} registers exceeds {} bytes", rank_, out.size(),
                                            spec::kMmioMaxBurstBytes));
  auto& q = qk();
  q.inc(pcie_latency_);  // request travels to the chip
  q.sync();
  // PCIe ordering: a read does not pass posted writes that reached the chip at the same time,
  // nor the calling thread's own earlier writes (which a later-dated write of another thread may
  // have queued behind).
  const std::uint64_t own = thread_last_posted();
  while ((!posted_.empty() && posted_.front().at <= sc_core::sc_time_stamp()) || posted_delivered_ < own)
    sc_core::wait(posted_drained_ev_);
  // nor a posted DMA write still on the link (its data lands before the read completes)
  if (dma_posted_at_ > sc_core::sc_time_stamp()) sc_core::wait(dma_posted_at_ - sc_core::sc_time_stamp());
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  transport(tlm::TLM_READ_COMMAND, offset, reinterpret_cast<std::byte*>(out.data()), out.size() * 4, delay, "MMIO read");
  // chip-side latency; the completion (with its payload) travels back
  q.set(delay + pcie_latency_ + ns(static_cast<double>(out.size() * 4) / cfg_.pcie_bandwidth_gbps));
  q.sync();
  ++stats_.mmio_reads;
}

std::uint32_t SimDevice::read_reg_now(std::uint32_t offset) {
  std::uint32_t v = 0;
  read_regs_now(offset, {&v, 1});
  return v;
}

void SimDevice::read_regs(std::uint32_t offset, std::span<std::uint32_t> out) {
  charge_call();
  read_regs_now(offset, out);
}

std::uint32_t SimDevice::read_reg(std::uint32_t offset) {
  charge_call();
  return read_reg_now(offset);
}

void SimDevice::write_reg(std::uint32_t offset, std::uint32_t value) {
  charge_call();
  const sc_core::sc_time at = std::max(local_now() + pcie_latency_, last_posted_at_);
  last_posted_at_ = at;
  posted_.push_back(Posted{at, offset, value, ++posted_issued_});
  thread_last_posted() = posted_issued_;
  posted_ev_.notify(sc_core::SC_ZERO_TIME);
  ++stats_.mmio_writes;
}

void SimDevice::posted_write_loop() {
  for (;;) {
    while (posted_.empty()) sc_core::wait(posted_ev_);
    const Posted p = posted_.front();
    if (p.at > sc_core::sc_time_stamp()) sc_core::wait(p.at - sc_core::sc_time_stamp());
    std::uint32_t v = p.value;
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    transport(tlm::TLM_WRITE_COMMAND, p.addr, reinterpret_cast<std::byte*>(&v), 4, delay, "MMIO write");
    posted_delivered_ = p.seq;
    posted_.pop_front();
    posted_drained_ev_.notify(sc_core::SC_ZERO_TIME);
  }
}

std::uint64_t SimDevice::alloc(std::size_t bytes, std::size_t align) {
  if (sc_core::sc_is_running()) charge_call();  // allocations planned before the simulation are free
  return alloc_.alloc(bytes, align);
}

void SimDevice::free(std::uint64_t addr) {
  charge_call();
  alloc_.free(addr);
}

void SimDevice::dma_write(std::uint64_t hbm_addr, std::span<const std::byte> src) {
  if (src.empty()) return;
  charge_call();
  auto& q = qk();
  // Host-to-device writes are posted: the CPU hands the data to the link and goes on; the link is
  // busy for the transfer (later transfers queue behind it, so a descriptor submitted after this
  // write still arrives after it) and later MMIO reads do not pass it.
  const sc_core::sc_time arrive = pcie_transfer(local_now(), src.size(), "dma_write");
  sc_core::sc_time delay = hbm_issue_delay();
  transport(tlm::TLM_WRITE_COMMAND, chip::Chip::kHbmBusBase + hbm_addr, const_cast<std::byte*>(src.data()),
            src.size(), delay, "DMA write");
  last_posted_at_ = std::max(last_posted_at_, arrive);
  dma_posted_at_ = std::max(dma_posted_at_, arrive);
  if (q.need_sync()) q.sync();
  ++stats_.dma_writes;
  stats_.dma_bytes_written += src.size();
}

void SimDevice::dma_read(std::uint64_t hbm_addr, std::span<std::byte> dst) {
  if (dst.empty()) return;
  charge_call();
  auto& q = qk();
  q.sync();  // read what the device holds now, not what it will hold
  const sc_core::sc_time arrive = pcie_transfer(local_now(), dst.size(), "dma_read", LinkDir::ToHost);
  sc_core::sc_time delay = hbm_issue_delay();
  transport(tlm::TLM_READ_COMMAND, chip::Chip::kHbmBusBase + hbm_addr, dst.data(), dst.size(), delay, "DMA read");
  q.set(std::max(delay, arrive - sc_core::sc_time_stamp()));
  q.sync();
  ++stats_.dma_reads;
  stats_.dma_bytes_read += dst.size();
}

void SimDevice::ensure_ring(std::uint32_t stream) {
  if (stream >= spec::kNumStreams)
    throw std::invalid_argument(fmt::format("rank {}: stream {} out of range (0..{})", rank_, stream,
                                            spec::kNumStreams - 1));
  if (rings_.count(stream)) return;
  Ring r;
  r.base = alloc_.alloc(std::size_t{costs_.ring_entries} * sizeof(spec::TaskDescriptor), 4096);
  rings_.emplace(stream, r);
  write_reg(spec::stream_reg(stream, spec::kStreamRingLo), static_cast<std::uint32_t>(r.base));
  write_reg(spec::stream_reg(stream, spec::kStreamRingHi), static_cast<std::uint32_t>(r.base >> 32));
  write_reg(spec::stream_reg(stream, spec::kStreamRingEntries), costs_.ring_entries);
}

void SimDevice::submit(std::uint32_t stream, const spec::TaskDescriptor& task) {
  charge_call();
  ensure_ring(stream);
  Ring& r = rings_.at(stream);
  const std::uint32_t n = costs_.ring_entries;
  while ((r.tail + n - r.known_head) % n == n - 1) {  // ring full: learn how far the device got
    const std::uint64_t seen = serviced_count_;
    r.known_head = read_reg_now(spec::stream_reg(stream, spec::kStreamHead));
    if ((r.tail + n - r.known_head) % n == n - 1) wait_for_interrupt(ns(costs_.poll_timeout_ns) / 10, seen);
  }
  // The descriptor is a posted write into the ring; the doorbell follows it (PCIe keeps order).
  spec::TaskDescriptor d = task;
  const sc_core::sc_time arrive = pcie_transfer(local_now(), sizeof d, "descriptor");
  sc_core::sc_time delay = hbm_issue_delay();
  transport(tlm::TLM_WRITE_COMMAND, chip::Chip::kHbmBusBase + r.base + std::uint64_t{r.tail} * sizeof d,
            reinterpret_cast<std::byte*>(&d), sizeof d, delay, "descriptor write");
  r.tail = (r.tail + 1) % n;
  ++r.submitted;
  r.last_is_barrier = task.kind == spec::TaskKind::Barrier && (task.flags & spec::kTaskFlagNotify);
  last_posted_at_ = std::max(last_posted_at_, arrive);
  write_reg(spec::stream_reg(stream, spec::kStreamTail), r.tail);
  ++stats_.submits;
}

bool SimDevice::synchronize(std::uint32_t stream) {
  charge_call();
  auto it = rings_.find(stream);
  if (it == rings_.end()) return true;
  if (!it->second.last_is_barrier) {
    spec::TaskDescriptor b;
    b.task_id = next_barrier_id_++;
    b.kind = spec::TaskKind::Barrier;
    b.flags = spec::kTaskFlagNotify;
    submit(stream, b);
  }
  const std::uint32_t target = it->second.submitted;
  const sc_core::sc_time t0 = local_now();
  std::uint32_t last_completed = 0;
  sc_core::sc_time progress_at = t0;  // when `completed` last moved
  for (bool first = true;; first = false) {
    const std::uint64_t seen = serviced_count_;  // an interrupt serviced during the reads below counts
    const std::uint32_t completed = read_reg_now(spec::stream_reg(stream, spec::kStreamCompleted));
    if (first || completed != last_completed) {
      last_completed = completed;
      progress_at = local_now();
    } else if (local_now() - progress_at > ns(costs_.sync_timeout_ns)) {
      throw SyncTimeout(fmt::format("r{} stream {}: no task completed for {} ms of simulated time (the driver's "
                                    "synchronize timeout; {} of {} tasks done)",
                                    rank_, stream, costs_.sync_timeout_ns / 1'000'000, completed, target));
    }
    bool done = completed == target;
    bool halted = false;
    if (!done) halted = (read_reg_now(spec::stream_reg(stream, spec::kStreamStatus)) & spec::kStreamHalted) != 0;
    if (done || halted) {
      if (trace_ && trace_->enabled())
        trace_->complete(chip::Trace::kHostPid + rank_, "main", halted ? "synchronize (halted)" : "synchronize",
                         "host", ps(t0), ps(local_now() - t0), {{"stream", std::uint64_t{stream}}});
      return done;
    }
    wait_for_interrupt(poll_interval(progress_at), seen);
  }
}

sc_core::sc_time SimDevice::poll_interval(const sc_core::sc_time& progress_at) {
  const sc_core::sc_time period = ns(costs_.poll_timeout_ns), now = local_now();
  const sc_core::sc_time stalled_from = period * static_cast<double>(costs_.poll_backoff_after);
  if (now - progress_at < stalled_from) return period;
  // Stalled: wait about as long again as the stream has been stalled, but wake just after the
  // deadline once.
  const sc_core::sc_time backoff = now - progress_at - stalled_from + period;
  const sc_core::sc_time deadline = progress_at + ns(costs_.sync_timeout_ns) + period / 1000;
  return deadline > now ? std::min(backoff, deadline - now) : period;
}

void SimDevice::wait_for_interrupt(const sc_core::sc_time& timeout, std::uint64_t seen) {
  auto& q = qk();
  q.sync();
  if (serviced_count_ == seen) sc_core::wait(timeout, serviced_ev_);
  q.reset();
}

std::uint64_t SimDevice::cycles() {
  charge_call();
  const std::uint32_t lo = read_reg_now(spec::kRegCycleLo);
  const std::uint32_t hi = read_reg_now(spec::kRegCycleHi);
  return (std::uint64_t{hi} << 32) | lo;
}

void SimDevice::service_interrupt(std::uint32_t lines) {
  auto& q = qk();
  q.reset();
  const sc_core::sc_time t0 = local_now();
  ++stats_.interrupts;
  charge_call();
  // Stream state changes (completion, breakpoint halt) wake a waiting synchronize(); other
  // interrupts (exceptions, capture buffers) do not, as a driver's completion event would not.
  const bool stream_event = (lines & (spec::kIrqStreamDone | spec::kIrqBreakpoint)) != 0;
  if (lines & spec::kIrqStreamDone) {
    write_reg(spec::kRegIrqAck, spec::kIrqStreamDone);
    lines &= ~static_cast<std::uint32_t>(spec::kIrqStreamDone);
  }
  if (lines && handler_) handler_(lines);
  q.sync();
  if (trace_ && trace_->enabled())
    // An ISR that serviced an exception shares the category of the latch and of the report entry
    // it is linked to by a flow (Chrome binds flows to slices of the flow's category).
    trace_->complete(chip::Trace::kHostPid + rank_, "isr", "isr", (lines & spec::kIrqException) ? "exception" : "host",
                     ps(t0), ps(sc_core::sc_time_stamp() - t0), {{"lines", std::uint64_t{lines}}});
  if (stream_event) {
    ++serviced_count_;
    serviced_ev_.notify(sc_core::SC_ZERO_TIME);
  }
}

void SimDevice::defer(std::function<void()> work) {
  deferred_.push_back(std::move(work));
  deferred_ev_.notify(sc_core::SC_ZERO_TIME);
}

void SimDevice::wait_deferred() {
  auto& q = qk();
  if (deferred_.empty() && !deferred_running_) return;
  q.sync();
  while (!deferred_.empty() || deferred_running_) sc_core::wait(deferred_done_ev_);
  q.reset();
  if (deferred_error_) std::rethrow_exception(std::exchange(deferred_error_, nullptr));
}

void SimDevice::deferred_loop() {
  for (;;) {
    while (deferred_.empty()) sc_core::wait(deferred_ev_);
    auto work = std::move(deferred_.front());
    deferred_.pop_front();
    deferred_running_ = true;
    auto& q = qk();
    q.reset();
    try {
      work();
    } catch (...) {
      if (!deferred_error_) deferred_error_ = std::current_exception();
    }
    q.sync();
    deferred_running_ = false;
    deferred_done_ev_.notify(sc_core::SC_ZERO_TIME);
  }
}

}  // namespace probelab::sim
