#include <cstring>

#include <gtest/gtest.h>

#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"
#include "probes/capture_drain.h"
#include "probes/fake_device.h"
#include "probes/tensor_stats.h"

using namespace probelab;
using probes::CaptureDrain;
using probes::CaptureRecord;
using probes::FakeDevice;

namespace {

spec::CaptureRecordHeader header(std::uint32_t op, spec::CapturePayload kind) {
  spec::CaptureRecordHeader h;
  h.op_id = op;
  h.task_id = 100 + op;
  h.step = 3;
  h.rank = 0;
  h.payload = kind;
  return h;
}

std::vector<std::byte> stats_payload(double mean) {
  spec::CaptureStats s;
  s.mean = mean;
  s.count = 10;
  std::vector<std::byte> b(sizeof s);
  std::memcpy(b.data(), &s, sizeof s);
  return b;
}

std::vector<std::byte> full_payload(spec::CaptureRecordHeader& h, int n) {
  h.dtype = static_cast<std::uint8_t>(graph::DType::F32);
  h.rank_dims = 1;
  h.dims[0] = n;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i) * 0.5f;
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<std::byte> concat(std::initializer_list<std::vector<std::byte>> parts) {
  std::vector<std::byte> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

struct Rig {
  explicit Rig(probes::CaptureUnitOptions o) : opts(o), drain(dev, o, [this](CaptureRecord&& r) { got.push_back(std::move(r)); }) {
    drain.program();
    dev.write_reg(spec::kRegIrqMask, ~spec::kIrqCaptureFull);
    dev.set_irq_handler([this](std::uint32_t lines) {
      if (lines & spec::kIrqCaptureFull) {
        dev.write_reg(spec::kRegIrqAck, spec::kIrqCaptureFull);
        ++irqs;
        if (handler_drains) drain.drain();
      }
    });
  }
  void emit_stats(int n) {
    for (int i = 0; i < n; ++i) dev.emit_record(header(static_cast<std::uint32_t>(i), spec::CapturePayload::Statistics), stats_payload(i));
  }
  FakeDevice dev;
  probes::CaptureUnitOptions opts;
  std::vector<CaptureRecord> got;
  CaptureDrain drain;
  int irqs = 0;
  bool handler_drains = true;
};

}  // namespace

TEST(RecordParser, ValidRecordsRoundTrip) {
  auto h1 = header(1, spec::CapturePayload::Statistics);
  auto h2 = header(2, spec::CapturePayload::Hash);
  auto h3 = header(3, spec::CapturePayload::FullTensor);
  std::uint64_t digest = 0x0123456789ABCDEFull;
  std::vector<std::byte> hp(8);
  std::memcpy(hp.data(), &digest, 8);
  auto fp = full_payload(h3, 5);  // 20 bytes -> padded
  auto buf = concat({probes::encode_record(h1, stats_payload(1.5)), probes::encode_record(h2, hp), probes::encode_record(h3, fp)});
  EXPECT_EQ(buf.size() % 8, 0u);
  auto r = probes::parse_capture_buffer(buf);
  EXPECT_EQ(r.corrupt, 0u);
  ASSERT_EQ(r.records.size(), 3u);
  spec::CaptureStats s;
  std::memcpy(&s, r.records[0].payload.data(), sizeof s);
  EXPECT_EQ(s.mean, 1.5);
  EXPECT_EQ(r.records[1].header.op_id, 2u);
  EXPECT_EQ(r.records[2].payload, fp);
  EXPECT_EQ(r.records[2].header.record_bytes % 8, 0u);
  EXPECT_EQ(r.records[2].header.checksum, probes::crc32(fp));
  EXPECT_EQ(probes::crc32(std::as_bytes(std::span("123456789", 9))), 0xCBF43926u);  // CRC-32 check value
}

TEST(RecordParser, CorruptRecordsAreCountedNeverFatal) {
  auto a = probes::encode_record(header(1, spec::CapturePayload::Statistics), stats_payload(1));
  auto b = probes::encode_record(header(2, spec::CapturePayload::Statistics), stats_payload(2));
  auto c = probes::encode_record(header(3, spec::CapturePayload::Statistics), stats_payload(3));
  // 1) a flipped payload bit: CRC mismatch, the record is skipped whole, neighbours survive
  auto bad_crc = b;
  bad_crc[sizeof(spec::CaptureRecordHeader) + 3] ^= std::byte{0x10};
  auto r = probes::parse_capture_buffer(concat({a, bad_crc, c}));
  EXPECT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.corrupt, 1u);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_NE(r.errors[0].find("CRC-32 mismatch"), std::string::npos) << r.errors[0];
  // 2) a destroyed header (magic and size): resynchronise on the next magic
  auto bad_hdr = b;
  std::memset(bad_hdr.data(), 0xAB, 16);
  r = probes::parse_capture_buffer(concat({a, bad_hdr, c}));
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[1].header.op_id, 3u);
  EXPECT_EQ(r.corrupt, 1u);
  EXPECT_EQ(r.bytes_skipped, b.size());
  // 3) a record claiming more bytes than the buffer holds, and a truncated tail
  auto too_long = b;
  std::uint32_t huge = 1u << 20;
  std::memcpy(too_long.data() + 4, &huge, 4);
  r = probes::parse_capture_buffer(concat({a, too_long}));
  EXPECT_EQ(r.records.size(), 1u);
  EXPECT_GE(r.corrupt, 1u);
  auto truncated = concat({a, c});
  truncated.resize(truncated.size() - 40);
  r = probes::parse_capture_buffer(truncated);
  EXPECT_EQ(r.records.size(), 1u);
  EXPECT_GE(r.corrupt, 1u);
  // 4) a full-tensor record whose shape does not match its payload size
  auto h = header(4, spec::CapturePayload::FullTensor);
  auto p = full_payload(h, 4);
  h.dims[0] = 5;
  r = probes::parse_capture_buffer(probes::encode_record(h, p));
  EXPECT_EQ(r.records.size(), 0u);
  EXPECT_EQ(r.corrupt, 1u);
  // trailing zero padding is not corruption
  auto padded = a;
  padded.resize(a.size() + 256);
  r = probes::parse_capture_buffer(padded);
  EXPECT_EQ(r.records.size(), 1u);
  EXPECT_EQ(r.corrupt, 0u);
}

TEST(Drain, PingPongDrainsOnInterruptsAndFlush) {
  Rig rig({4096, true, false});
  rig.emit_stats(100);  // ~160 B each: many buffer swaps
  rig.drain.flush();
  const auto& acc = rig.drain.accounting();
  EXPECT_GT(rig.irqs, 3);
  EXPECT_EQ(rig.got.size(), 100u);
  EXPECT_EQ(acc.produced, 100u);
  EXPECT_EQ(acc.drained, 100u);
  EXPECT_EQ(acc.dropped, 0u);
  EXPECT_EQ(acc.seq_gaps, 0u);
  EXPECT_EQ(acc.seq_reorders, 0u);
  EXPECT_TRUE(acc.balanced());
  EXPECT_EQ(acc.bytes, acc.device_bytes);
  for (std::size_t i = 0; i < rig.got.size(); ++i) EXPECT_EQ(rig.got[i].header.seq, i);
  EXPECT_EQ(rig.dev.reg(spec::kRegCapReady), 0u);  // every buffer released
}

TEST(Drain, OverrunWithDropPolicyIsFullyAccounted) {
  Rig rig({4096, true, true});
  rig.handler_drains = false;  // a host that does not keep up
  rig.emit_stats(100);
  EXPECT_EQ(rig.got.size(), 0u);
  rig.drain.flush();  // now the host catches up
  rig.emit_stats(10);
  rig.drain.flush();
  const auto& acc = rig.drain.accounting();
  EXPECT_EQ(acc.produced, 110u);
  EXPECT_GT(acc.dropped, 0u);
  EXPECT_EQ(acc.drained + acc.dropped, acc.produced);
  EXPECT_EQ(acc.seq_gaps, acc.dropped);  // every drop shows as a sequence gap
  EXPECT_TRUE(acc.balanced());
  EXPECT_EQ(acc.unaccounted(), 0);
  EXPECT_EQ(rig.got.size(), acc.drained);
}

TEST(Drain, SingleBufferWithStallPolicyLosesNothing) {
  Rig rig({4096, false, false});
  rig.emit_stats(60);
  rig.drain.flush();
  const auto& acc = rig.drain.accounting();
  EXPECT_EQ(acc.produced, 60u);
  EXPECT_EQ(acc.drained, 60u);
  EXPECT_EQ(acc.dropped, 0u);
  EXPECT_TRUE(acc.balanced());
  EXPECT_EQ(rig.dev.stall_fallback_drops(), 0u);
}

TEST(Drain, CorruptRecordsFromTheDeviceAreReported) {
  Rig rig({4096, true, false});
  rig.emit_stats(3);
  std::vector<std::byte> garbage(64, std::byte{0x5A});
  rig.dev.emit_raw(garbage);
  auto rec = probes::encode_record(header(9, spec::CapturePayload::Statistics), stats_payload(9));
  rec[sizeof(spec::CaptureRecordHeader)] ^= std::byte{1};  // CRC mismatch
  rig.dev.emit_raw(rec);
  rig.emit_stats(2);
  rig.drain.flush();
  const auto& acc = rig.drain.accounting();
  EXPECT_EQ(acc.produced, 7u);
  EXPECT_EQ(acc.drained, 5u);
  EXPECT_EQ(acc.corrupt, 2u);
  EXPECT_TRUE(acc.balanced());
  EXPECT_EQ(acc.seq_gaps, 2u);
  EXPECT_FALSE(acc.errors.empty());
}

// A full-tensor record of every dtype the graph has (int8 / uint8 of quantized models included)
// parses; a dtype value past them is corruption.
TEST(RecordParser, FullRecordsOfEveryDtypeParse) {
  for (std::uint8_t t = 0; t < graph::kNumDTypes; ++t) {
    auto h = header(10 + t, spec::CapturePayload::FullTensor);
    h.dtype = t;
    h.rank_dims = 1;
    h.dims[0] = 6;
    const std::vector<std::byte> p(6 * graph::dtype_size(static_cast<graph::DType>(t)), std::byte{0x5a});
    const auto r = probes::parse_capture_buffer(probes::encode_record(h, p));
    EXPECT_EQ(r.corrupt, 0u) << graph::dtype_name(static_cast<graph::DType>(t)) << ": " << (r.errors.empty() ? "" : r.errors[0]);
    ASSERT_EQ(r.records.size(), 1u);
    EXPECT_EQ(r.records[0].payload, p);
  }
  auto h = header(99, spec::CapturePayload::FullTensor);
  h.dtype = graph::kNumDTypes;
  h.rank_dims = 1;
  h.dims[0] = 4;
  const auto r = probes::parse_capture_buffer(probes::encode_record(h, std::vector<std::byte>(4)));
  EXPECT_EQ(r.records.size(), 0u);
  EXPECT_EQ(r.corrupt, 1u);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_NE(r.errors[0].find("unknown dtype 9"), std::string::npos) << r.errors[0];
}
