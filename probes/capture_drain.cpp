#include "probes/capture_drain.h"

#include <array>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"
#include "graph/dtype.h"
#include "probes/log.h"

namespace probelab::probes {

namespace {
constexpr std::size_t kHeader = sizeof(spec::CaptureRecordHeader);
constexpr std::size_t kMaxErrors = 16;

std::uint64_t u64(std::uint32_t lo, std::uint32_t hi) { return (std::uint64_t{hi} << 32) | lo; }
}  // namespace

std::vector<std::byte> encode_record(spec::CaptureRecordHeader h, std::span<const std::byte> payload) {
  std::size_t total = (kHeader + payload.size() + 7) & ~std::size_t{7};
  h.magic = spec::kCaptureMagic;
  h.record_bytes = static_cast<std::uint32_t>(total);
  h.payload_bytes = static_cast<std::uint32_t>(payload.size());
  h.checksum = crc32(payload);
  std::vector<std::byte> out(total, std::byte{0});
  std::memcpy(out.data(), &h, kHeader);
  if (!payload.empty()) std::memcpy(out.data() + kHeader, payload.data(), payload.size());
  return out;
}

namespace {

/// Why a header cannot be trusted to find the next record, or "" when it can.
std::string header_problem(const spec::CaptureRecordHeader& h, std::size_t remaining) {
  if (h.magic != spec::kCaptureMagic) return fmt::format("bad magic 0x{:08x}", h.magic);
  if (h.record_bytes < kHeader || h.record_bytes % 8 != 0)
    return fmt::format("record_bytes {} not a multiple of 8 >= {}", h.record_bytes, kHeader);
  if (h.record_bytes > remaining) return fmt::format("record_bytes {} exceeds the {} bytes left", h.record_bytes, remaining);
  if (h.payload_bytes > h.record_bytes - kHeader)
    return fmt::format("payload_bytes {} exceeds record_bytes {}", h.payload_bytes, h.record_bytes);
  return {};
}

/// Problems of a record whose framing is fine (it is skipped whole).
std::string payload_problem(const spec::CaptureRecordHeader& h, std::span<const std::byte> payload) {
  if (crc32(payload) != h.checksum) return fmt::format("CRC-32 mismatch (0x{:08x} != 0x{:08x})", crc32(payload), h.checksum);
  switch (h.payload) {
    case spec::CapturePayload::Statistics:
      if (h.payload_bytes != sizeof(spec::CaptureStats)) return fmt::format("statistics payload of {} bytes", h.payload_bytes);
      break;
    case spec::CapturePayload::StepStatus:
      if (h.payload_bytes != sizeof(spec::StepStatus)) return fmt::format("step status payload of {} bytes", h.payload_bytes);
      return {};
    case spec::CapturePayload::Hash:
      if (h.payload_bytes != 8) return fmt::format("hash payload of {} bytes", h.payload_bytes);
      break;
    case spec::CapturePayload::FullTensor: {
      if (h.dtype >= graph::kNumDTypes) return fmt::format("unknown dtype {}", h.dtype);
      if (h.rank_dims > 6) return fmt::format("rank {} > 6", h.rank_dims);
      std::int64_t n = 1;
      for (int i = 0; i < h.rank_dims; ++i) {
        if (h.dims[i] < 0) return "negative dimension";
        n *= h.dims[i];
      }
      auto want = static_cast<std::uint64_t>(n) * graph::dtype_size(static_cast<graph::DType>(h.dtype));
      if (want != h.payload_bytes) return fmt::format("full payload of {} bytes, shape needs {}", h.payload_bytes, want);
      break;
    }
    default: return fmt::format("unknown payload kind {}", static_cast<unsigned>(h.payload));
  }
  return {};
}

}  // namespace

ParseResult parse_capture_buffer(std::span<const std::byte> buf) {
  ParseResult r;
  std::size_t off = 0;
  auto note = [&](std::string msg) {
    if (r.errors.size() < kMaxErrors) r.errors.push_back(std::move(msg));
  };
  while (off + kHeader <= buf.size()) {
    spec::CaptureRecordHeader h;
    std::memcpy(&h, buf.data() + off, kHeader);
    if (h.magic == 0 && h.record_bytes == 0) {  // zero padding after the last record
      bool rest_zero = std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(off), buf.end(),
                                   [](std::byte b) { return b == std::byte{0}; });
      if (rest_zero) return r;
    }
    if (auto why = header_problem(h, buf.size() - off); !why.empty()) {
      ++r.corrupt;
      note(fmt::format("offset {}: {}", off, why));
      // resynchronise: next 8-byte aligned offset holding the magic
      std::size_t next = off + 8;
      while (next + kHeader <= buf.size()) {
        std::uint32_t m;
        std::memcpy(&m, buf.data() + next, 4);
        if (m == spec::kCaptureMagic) break;
        next += 8;
      }
      if (next + kHeader > buf.size()) next = buf.size();
      r.bytes_skipped += next - off;
      off = next;
      continue;
    }
    auto payload = buf.subspan(off + kHeader, h.payload_bytes);
    if (auto why = payload_problem(h, payload); !why.empty()) {
      ++r.corrupt;
      note(fmt::format("offset {} (seq {}, op {}): {}", off, h.seq, h.op_id, why));
    } else {
      r.records.push_back({h, std::vector<std::byte>(payload.begin(), payload.end())});
    }
    off += h.record_bytes;
  }
  if (off < buf.size()) {
    ++r.corrupt;
    r.bytes_skipped += buf.size() - off;
    note(fmt::format("offset {}: {} trailing bytes, shorter than a record header", off, buf.size() - off));
  }
  return r;
}

std::int64_t CaptureAccounting::unaccounted() const {
  return static_cast<std::int64_t>(produced) - static_cast<std::int64_t>(drained + corrupt + dropped);
}

nlohmann::json to_json(const CaptureAccounting& a) {
  return {{"produced", a.produced},         {"dropped", a.dropped},
          {"drained", a.drained},           {"corrupt", a.corrupt},
          {"seq_gaps", a.seq_gaps},         {"seq_reorders", a.seq_reorders},
          {"buffers", a.buffers},           {"bytes", a.bytes},
          {"device_bytes", a.device_bytes}, {"stall_cycles", a.stall_cycles},
          {"bytes_skipped", a.bytes_skipped}, {"unaccounted", a.unaccounted()},
          {"oversize", a.oversize}, {"oversize_max_bytes", a.oversize_max_bytes},
          {"lost_in_corrupt_regions", a.lost_in_corrupt_regions},
          {"balanced", a.balanced()},       {"errors", a.errors}};
}

CaptureDrain::CaptureDrain(Device& dev, CaptureUnitOptions opts, Sink sink)
    : dev_(dev), opts_(opts), sink_(std::move(sink)) {}

CaptureDrain::~CaptureDrain() {
  for (auto a : buf_)
    if (a) dev_.free(a);
}

void CaptureDrain::program() {
  int n = opts_.ping_pong ? 2 : 1;
  for (int i = 0; i < n; ++i) buf_[i] = dev_.alloc(opts_.buffer_bytes, 64);
  dev_.write_reg(spec::kRegCapCtrl, 0);
  dev_.write_reg(spec::kRegCapBuf0Lo, static_cast<std::uint32_t>(buf_[0]));
  dev_.write_reg(spec::kRegCapBuf0Hi, static_cast<std::uint32_t>(buf_[0] >> 32));
  dev_.write_reg(spec::kRegCapBuf1Lo, static_cast<std::uint32_t>(buf_[1]));
  dev_.write_reg(spec::kRegCapBuf1Hi, static_cast<std::uint32_t>(buf_[1] >> 32));
  dev_.write_reg(spec::kRegCapBufSize, opts_.buffer_bytes);
  std::uint32_t ctrl = spec::kCapEnable;
  if (opts_.ping_pong) ctrl |= spec::kCapPingPong;
  if (opts_.drop_on_full) ctrl |= spec::kCapDropOnFull;
  dev_.write_reg(spec::kRegCapCtrl, ctrl);
  programmed_ = true;
  log::debug("drain", "capture unit: {} x {} bytes at 0x{:x}/0x{:x}, overrun {}", n, opts_.buffer_bytes, buf_[0], buf_[1],
             opts_.drop_on_full ? "drop" : "stall");
}

void CaptureDrain::drain_buffer(std::uint32_t i, std::uint32_t bytes) {
  if (bytes > opts_.buffer_bytes) {
    acc_.errors.push_back(fmt::format("buffer {} reports {} ready bytes > size {}", i, bytes, opts_.buffer_bytes));
    bytes = opts_.buffer_bytes;
  }
  std::vector<std::byte> data(bytes);
  if (bytes) dev_.dma_read(buf_[i], data);
  dev_.write_reg(spec::kRegCapRelease, i);  // the device may refill it while we parse
  ++acc_.buffers;
  acc_.bytes += bytes;
  ParseResult pr = parse_capture_buffer(data);
  acc_.corrupt += pr.corrupt;
  acc_.bytes_skipped += pr.bytes_skipped;
  for (auto& e : pr.errors)
    if (acc_.errors.size() < 64) acc_.errors.push_back(fmt::format("buffer {}: {}", i, e));
  if (pr.corrupt) log::warn("drain", "buffer {}: {} corrupt record(s): {}", i, pr.corrupt, pr.errors.empty() ? "" : pr.errors[0]);
  for (auto& rec : pr.records) {
    std::uint32_t seq = rec.header.seq;
    if (have_seq_) {
      if (seq > last_seq_ + 1) acc_.seq_gaps += seq - last_seq_ - 1;
      else if (seq <= last_seq_) ++acc_.seq_reorders;
    } else if (seq > 0) {
      acc_.seq_gaps += seq;  // records before the first one we saw
    }
    if (!have_seq_ || seq > last_seq_) last_seq_ = seq;
    have_seq_ = true;
    ++acc_.drained;
    sink_(std::move(rec));
  }
}

void CaptureDrain::take_counters(std::span<const std::uint32_t> block) {
  auto at = [&block](std::uint32_t reg) { return block[(reg - spec::kRegCapReady) / 4]; };
  acc_.produced = at(spec::kRegCapRecords);
  acc_.dropped = at(spec::kRegCapDropped);
  acc_.device_bytes = u64(at(spec::kRegCapBytesLo), at(spec::kRegCapBytesHi));
  acc_.stall_cycles = u64(at(spec::kRegCapStallLo), at(spec::kRegCapStallHi));
  acc_.oversize = at(spec::kRegCapOversize);
  acc_.oversize_max_bytes = at(spec::kRegCapOversizeMax);
}

void CaptureDrain::settle() {
  const std::int64_t missing = acc_.unaccounted();
  if (missing <= 0 || acc_.bytes_skipped == 0) return;
  acc_.lost_in_corrupt_regions += static_cast<std::uint64_t>(missing);
  acc_.corrupt += static_cast<std::uint64_t>(missing);
}

void CaptureDrain::drain(bool device_idle) {
  if (!programmed_) return;
  if (draining_) {
    pending_ = true;
    return;
  }
  draining_ = true;
  do {
    pending_ = false;
    // Ready bits, both ready byte counts and the counters (kRegCapReady..kRegCapOversizeMax) in one
    // burst; the counters are final when nothing is ready or the device is idle.
    std::array<std::uint32_t, (spec::kRegCapOversizeMax - spec::kRegCapReady) / 4 + 1> st{};
    dev_.read_regs(spec::kRegCapReady, st);
    take_counters(st);
    const std::uint32_t ready = st[0] & (opts_.ping_pong ? 3u : 1u);
    const std::uint32_t ready_bytes[2] = {st[1], st[2]};
    if (ready == 3) {
      // Both full: drain the one the device filled first. The active index names the buffer it
      // switched to last, so the other one is older... unless it has none left: peek seq numbers.
      spec::CaptureRecordHeader h0{}, h1{};
      std::vector<std::byte> tmp(sizeof(spec::CaptureRecordHeader));
      dev_.dma_read(buf_[0], tmp);
      std::memcpy(&h0, tmp.data(), tmp.size());
      dev_.dma_read(buf_[1], tmp);
      std::memcpy(&h1, tmp.data(), tmp.size());
      bool first0 = h0.magic != spec::kCaptureMagic || h1.magic != spec::kCaptureMagic || h0.seq <= h1.seq;
      drain_buffer(first0 ? 0 : 1, ready_bytes[first0 ? 0 : 1]);
      drain_buffer(first0 ? 1 : 0, ready_bytes[first0 ? 1 : 0]);
      pending_ = pending_ || !device_idle;  // releasing may have let the producer fill another
    } else if (ready) {
      drain_buffer(ready == 1 ? 0 : 1, ready_bytes[ready == 1 ? 0 : 1]);
      pending_ = pending_ || !device_idle;
    }
    if (!ready) break;
  } while (pending_);
  draining_ = false;
}

void CaptureDrain::flush(bool device_idle) {
  if (!programmed_) return;
  dev_.write_reg(spec::kRegCapFlush, 1);
  drain(device_idle);
}

void CaptureDrain::read_counters() {
  std::array<std::uint32_t, (spec::kRegCapOversizeMax - spec::kRegCapReady) / 4 + 1> st{};
  dev_.read_regs(spec::kRegCapReady, st);
  take_counters(st);
}

}  // namespace probelab::probes
