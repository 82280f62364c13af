#include "chip_model/hbm.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/clock.h"
#include "chip_model/l2_cache.h"
#include "chip_model/trace.h"

namespace probelab::chip {

std::pair<std::uint64_t, std::uint64_t> Hbm::Channel::serve(std::uint64_t share, std::uint64_t start_ps) {
  const std::uint64_t begin = std::max(start_ps, busy_until_ps), dur = transfer_ps(share, rate);
  busy_until_ps = begin + dur;
  stats.bytes += share;
  stats.busy_ps += dur;
  return {begin, dur};
}

std::string_view hbm_client_name(HbmClient c) {
  switch (c) {
    case HbmClient::Core: return "core";
    case HbmClient::Capture: return "capture";
    case HbmClient::Stream: return "stream";
    case HbmClient::HostDma: return "host_dma";
    case HbmClient::Collective: return "collective";
  }
  return "?";
}

Hbm::Hbm(sc_core::sc_module_name name, const ChipConfig& cfg, std::uint32_t rank, Trace* trace)
    : sc_module(name),
      socket("socket"),
      size_(cfg.hbm_bytes),
      channels_(cfg.hbm_channels),
      interleave_(cfg.hbm_interleave_bytes),
      channel_gbps_(cfg.hbm_bandwidth_gbps / cfg.hbm_channels),
      latency_ps_(static_cast<std::uint64_t>(cfg.hbm_latency_ns) * 1000),
      rank_(rank),
      trace_(trace),
      channel_(cfg.hbm_channels, Channel{0, cfg.hbm_bandwidth_gbps / cfg.hbm_channels, {}}),
      share_(cfg.hbm_channels, 0) {
  if (std::has_single_bit(interleave_)) granule_shift_ = std::countr_zero(interleave_);
  if (std::has_single_bit(channels_)) channel_mask_ = channels_ - 1;
  socket.register_b_transport(this, &Hbm::b_transport);
  socket.register_transport_dbg(this, &Hbm::transport_dbg);
}

void Hbm::set_channel_fraction(std::uint32_t c, double fraction) {
  if (c >= channels_)
    throw std::out_of_range(fmt::format("{}: HBM channel {} does not exist ({} channels)", name(), c, channels_));
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw std::invalid_argument(fmt::format("{}: channel bandwidth fraction must be in (0, 1], got {}", name(), fraction));
  channel_[c].rate = channel_gbps_ * fraction;
}

std::vector<Hbm::ChannelStats> Hbm::channel_stats() const {
  std::vector<ChannelStats> out;
  out.reserve(channel_.size());
  for (const Channel& ch : channel_) out.push_back(ch.stats);
  return out;
}

void Hbm::check_range(std::uint64_t addr, std::uint64_t len, const char* what) const {
  if (addr > size_ || len > size_ - addr)
    throw std::out_of_range(fmt::format("{}: HBM {} of {} bytes at 0x{:x} is outside the {} bytes of HBM", name(),
                                        what, len, addr, size_));
}

void Hbm::copy_out(std::uint64_t addr, std::span<std::byte> dst) const {
  std::size_t done = 0;
  while (done < dst.size()) {
    const std::uint64_t a = addr + done;
    const std::uint64_t page = a / kPageBytes, off = a % kPageBytes;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kPageBytes - off, dst.size() - done));
    const auto it = pages_.find(page);
    if (it == pages_.end())
      std::memset(dst.data() + done, 0, n);
    else
      std::memcpy(dst.data() + done, it->second.get() + off, n);
    done += n;
  }
}

void Hbm::copy_in(std::uint64_t addr, std::span<const std::byte> src) {
  scans_.forget(addr, src.size());
  std::size_t done = 0;
  while (done < src.size()) {
    const std::uint64_t a = addr + done;
    const std::uint64_t page = a / kPageBytes, off = a % kPageBytes;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kPageBytes - off, src.size() - done));
    auto& p = pages_[page];
    if (!p) {
      p = std::make_unique<std::byte[]>(kPageBytes);  // value-initialised: zero bytes
    }
    std::memcpy(p.get() + off, src.data() + done, n);
    done += n;
  }
}

void Hbm::attach_l2(L2Cache* l2, double l2_read_gbps, double l2_write_gbps, bool capture_allocates) {
  l2_ = l2;
  l2_read_gbps_ = l2_read_gbps;
  l2_write_gbps_ = l2_write_gbps;
  capture_allocates_ = capture_allocates;
}

std::uint64_t Hbm::model(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, HbmClient who,
                         bool is_write, double port_gbps, bool traced, bool l2_managed) {
  auto& st = stats_[static_cast<int>(who)];
  ++st.transfers;
  (is_write ? st.bytes_written : st.bytes_read) += bytes;
  if (bytes == 0) return start_ps;
  if (l2_ && !l2_managed) return coherent(addr, bytes, start_ps, who, is_write, port_gbps, traced);
  return channels(addr, bytes, start_ps, who, is_write, port_gbps, traced);
}

std::uint64_t Hbm::coherent(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, HbmClient who,
                            bool is_write, double port_gbps, bool traced) {
  L2Stats& ls = l2_stats_[static_cast<int>(who)];
  auto rate = [port_gbps](double l2_gbps) { return port_gbps > 0 ? std::min(port_gbps, l2_gbps) : l2_gbps; };
  if (!is_write) {
    const L2Cache::Access a = l2_->lookup(addr, bytes);
    ls.hit_bytes += a.hit_bytes;
    ls.miss_bytes += a.miss_bytes;
    std::uint64_t end = start_ps + transfer_ps(a.hit_bytes, rate(l2_read_gbps_));
    // The missing bytes from the channels (their spread over the channels approximated by the range's start).
    if (a.miss_bytes > 0) end = std::max(end, channels(addr, a.miss_bytes, start_ps, who, false, port_gbps, traced));
    return end;
  }
  const bool allocate = who == HbmClient::Capture && capture_allocates_;
  const L2Cache::Access a = allocate ? l2_->write(addr, bytes) : l2_->invalidate(addr, bytes);
  ls.invalidated_bytes += a.invalidated_bytes;
  std::uint64_t end = start_ps;
  for (std::uint64_t line : a.writebacks) {
    // Partly overwritten dirty lines reach HBM before the write (ordered); evictions are posted.
    const std::uint64_t wb = channels(line, L2Cache::kLineBytes, start_ps, who, true, 0, traced);
    if (!allocate) end = std::max(end, wb);
    ls.writeback_bytes += L2Cache::kLineBytes;
  }
  if (allocate) {
    ls.allocated_bytes += bytes;
    return std::max(end, start_ps + transfer_ps(bytes, rate(l2_write_gbps_)));
  }
  // The write queues behind the write-backs on their channels (the channel model serves in order).
  return std::max(end, channels(addr, bytes, start_ps, who, true, port_gbps, traced));
}

std::uint64_t Hbm::channels(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, HbmClient who,
                            bool is_write, double port_gbps, bool traced) {

  const bool tracing = trace_ && trace_->enabled();
  std::uint64_t end = start_ps;
  // Channel c serves its share of the transfer after what it already queued; channels in
  // ascending order (the order of the trace's slices).
  auto serve = [&](std::uint32_t c, std::uint64_t share) {
    const auto [begin, dur] = channel_[c].serve(share, start_ps);
    busy_ps_total_ += dur;
    end = std::max(end, begin + dur);
    if (tracing && traced) {
      // One track per channel: a channel serves one share at a time, so its slices never overlap.
      trace_->complete(rank_, fmt::format("hbm.ch{:02}", c),
                       fmt::format("{} {}", hbm_client_name(who), is_write ? "write" : "read"), "hbm", begin, dur,
                       {{"bytes", share}, {"addr", addr}, {"queued_ps", begin - start_ps}});
    }
    if (tracing) {
      // Untraced traffic (a collective's chunks) still counts in the bandwidth counter.
      trace_->rate(rank_, "hbm bandwidth", "GB/s", begin, dur, share);
    }
  };
  // Granules [g0, g1] of the transfer, first and last possibly partial.
  const std::uint64_t g0 = addr / interleave_, g1 = (addr + bytes - 1) / interleave_;
  const std::uint64_t granules = g1 - g0 + 1;
  auto granule_share = [&](std::uint64_t g) {
    if (g0 == g1) return bytes;
    if (g == g0) return interleave_ - addr % interleave_;
    if (g == g1) return (addr + bytes - 1) % interleave_ + 1;
    return interleave_;
  };
  if (granules < channels_) {
    // Each granule on its own channel (a small transfer: no pass over every channel). Granules
    // whose channel index wrapped past the last channel come first in channel order.
    const std::uint64_t c0 = g0 % channels_, wrap = channels_ - c0;
    for (std::uint64_t i = wrap; i < granules; ++i) serve(static_cast<std::uint32_t>(c0 + i - channels_), granule_share(g0 + i));
    for (std::uint64_t i = 0; i < std::min(granules, wrap); ++i) serve(static_cast<std::uint32_t>(c0 + i), granule_share(g0 + i));
  } else {
    // Bytes per channel.
    std::fill(share_.begin(), share_.end(), 0);
    share_[g0 % channels_] += granule_share(g0);
    if (g1 != g0) share_[g1 % channels_] += granule_share(g1);
    const std::uint64_t full = g1 == g0 ? 0 : g1 - g0 - 1;  // whole granules between the ends
    if (full > 0) {
      const std::uint64_t rounds = full / channels_, rest = full % channels_;
      for (std::uint32_t i = 0; i < channels_; ++i) share_[i] += rounds * interleave_;
      for (std::uint64_t i = 0; i < rest; ++i) share_[(g0 + 1 + i) % channels_] += interleave_;
    }
    for (std::uint32_t c = 0; c < channels_; ++c)
      if (share_[c] != 0) serve(c, share_[c]);
  }
  if (port_gbps > 0) end = std::max(end, start_ps + transfer_ps(bytes, port_gbps));
  end += latency_ps_;
  return end;
}

sc_core::sc_time Hbm::transfer(std::uint64_t addr, std::uint64_t bytes, const sc_core::sc_time& start, HbmClient who,
                               bool is_write, double port_gbps, bool traced, bool l2_managed) {
  check_range(addr, bytes, is_write ? "write" : "read");
  return ChipClock::from_ps(model(addr, bytes, ChipClock::to_ps(start), who, is_write, port_gbps, traced, l2_managed));
}

std::uint64_t Hbm::transfer_at_ps(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, HbmClient who,
                               bool is_write, double port_gbps, bool traced) {
  if (addr > size_ || bytes > size_ - addr) check_range(addr, bytes, is_write ? "write" : "read");
  if (is_single(addr, bytes, who, is_write)) return single(addr, bytes, start_ps, who, is_write, port_gbps);
  return model(addr, bytes, start_ps, who, is_write, port_gbps, traced);
}

// Inlined into transfer_at_ps(), like single(): a collective calls it for every message.
[[gnu::always_inline]] inline bool Hbm::is_single(std::uint64_t addr, std::uint64_t bytes, HbmClient who,
                                                bool is_write) const {
  if (bytes == 0 || (trace_ && trace_->enabled())) return false;
  const std::uint64_t last = addr + bytes - 1;
  if (granule_of(addr) != granule_of(last)) return false;
  if (!l2_) return true;
  return addr / L2Cache::kLineBytes == last / L2Cache::kLineBytes &&
         !(is_write && who == HbmClient::Capture && capture_allocates_);
}

// model() -> coherent() -> channels() for one granule of one channel and one L2 line.
[[gnu::always_inline]] inline std::uint64_t Hbm::single(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps,
                                                       HbmClient who, bool is_write, double port_gbps) {
  auto& st = stats_[static_cast<int>(who)];
  ++st.transfers;
  (is_write ? st.bytes_written : st.bytes_read) += bytes;
  std::uint64_t end = start_ps;
  if (l2_) {
    L2Stats& ls = l2_stats_[static_cast<int>(who)];
    if (!is_write) {
      if (l2_->resident(addr)) {
        ls.hit_bytes += bytes;
        return start_ps + transfer_ps(bytes, port_gbps > 0 ? std::min(port_gbps, l2_read_gbps_) : l2_read_gbps_);
      }
      ls.miss_bytes += bytes;
    } else if (l2_->resident(addr)) {  // the line of a single transfer: nothing to drop otherwise
      const L2Cache::Access a = l2_->invalidate(addr, bytes);
      ls.invalidated_bytes += a.invalidated_bytes;
      for (std::uint64_t line : a.writebacks) {
        end = std::max(end, channels(line, L2Cache::kLineBytes, start_ps, who, true, 0, false));
        ls.writeback_bytes += L2Cache::kLineBytes;
      }
    }
  }
  const auto c = channel_of(granule_of(addr));
  const auto [begin, dur] = channel_[c].serve(bytes, start_ps);
  busy_ps_total_ += dur;
  std::uint64_t done = std::max(start_ps, begin + dur);
  if (port_gbps > 0) done = std::max(done, start_ps + transfer_ps(bytes, port_gbps));
  return std::max(end, done + latency_ps_);
}

sc_core::sc_time Hbm::read(std::uint64_t addr, std::span<std::byte> dst, const sc_core::sc_time& start, HbmClient who,
                           double port_gbps) {
  check_range(addr, dst.size(), "read");
  copy_out(addr, dst);
  return ChipClock::from_ps(model(addr, dst.size(), ChipClock::to_ps(start), who, false, port_gbps));
}

sc_core::sc_time Hbm::write(std::uint64_t addr, std::span<const std::byte> src, const sc_core::sc_time& start,
                            HbmClient who, double port_gbps) {
  check_range(addr, src.size(), "write");
  copy_in(addr, src);
  return ChipClock::from_ps(model(addr, src.size(), ChipClock::to_ps(start), who, true, port_gbps));
}

void Hbm::read(std::uint64_t addr, std::span<std::byte> dst, tlm_utils::tlm_quantumkeeper& qk, HbmClient who,
               double port_gbps) {
  const auto end = read(addr, dst, qk.get_current_time(), who, port_gbps);
  qk.set(end - sc_core::sc_time_stamp());
}

void Hbm::write(std::uint64_t addr, std::span<const std::byte> src, tlm_utils::tlm_quantumkeeper& qk, HbmClient who,
                double port_gbps) {
  const auto end = write(addr, src, qk.get_current_time(), who, port_gbps);
  qk.set(end - sc_core::sc_time_stamp());
}

void Hbm::debug_read(std::uint64_t addr, std::span<std::byte> dst) const {
  check_range(addr, dst.size(), "debug read");
  copy_out(addr, dst);
}

void Hbm::debug_write(std::uint64_t addr, std::span<const std::byte> src) {
  check_range(addr, src.size(), "debug write");
  copy_in(addr, src);
}

void Hbm::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const std::uint64_t addr = trans.get_address();
  const std::uint64_t len = trans.get_data_length();
  if (trans.get_byte_enable_ptr() != nullptr) {
    trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return;
  }
  if (addr > size_ || len > size_ - addr) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  const auto start = sc_core::sc_time_stamp() + delay;
  std::span<std::byte> data(reinterpret_cast<std::byte*>(trans.get_data_ptr()), len);
  sc_core::sc_time end;
  if (trans.is_read()) {
    end = read(addr, data, start, HbmClient::HostDma);
  } else if (trans.is_write()) {
    end = write(addr, data, start, HbmClient::HostDma);
  } else {
    trans.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
    return;
  }
  delay = end - sc_core::sc_time_stamp();
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

unsigned int Hbm::transport_dbg(tlm::tlm_generic_payload& trans) {
  const std::uint64_t addr = trans.get_address();
  std::uint64_t len = trans.get_data_length();
  if (addr >= size_) return 0;
  len = std::min(len, size_ - addr);
  std::span<std::byte> data(reinterpret_cast<std::byte*>(trans.get_data_ptr()), len);
  if (trans.is_read())
    copy_out(addr, data);
  else if (trans.is_write())
    copy_in(addr, data);
  else
    return 0;
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  return static_cast<unsigned int>(len);
}

}  // namespace probelab::chip
