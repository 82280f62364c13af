// Capture unit under a fake producer (records at a fixed rate) and a fake host drain process
// (interrupt -> wait the drain time -> parse and check the records -> release).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "chip_model/capture_unit.h"
#include "chip_model/hbm.h"
#include "chip_model/interrupt_controller.h"
#include "chip_model/spec/irq.h"
#include "tests/chip_model/chip_test_util.h"

namespace pc = probelab::chip;
namespace spec = probelab::spec;
using namespace probelab::chip::testing;

namespace {

constexpr std::uint32_t kPayload = 152;  // + 104-byte header = 256-byte records
constexpr std::uint32_t kRecordBytes = 256;
constexpr std::uint32_t kBufBytes = 16 * kRecordBytes;
constexpr std::uint64_t kBuf0 = 0x10000, kBuf1 = 0x20000;

struct Traffic {
  std::uint32_t records = 200;
  double interval_ns = 100;  // producer: one record per interval
  double drain_ns = 800;     // host: time to drain one buffer
  std::uint32_t ctrl = spec::kCapEnable | spec::kCapPingPong;
};

struct Result {
  pc::CaptureUnit::Counters c;
  std::uint64_t drained_parsed = 0;  // records the host parsed, CRC-checked
  std::uint64_t producer_end_ps = 0;
  std::uint32_t reg_records = 0, reg_dropped = 0;
  std::uint64_t reg_bytes = 0, reg_stall = 0;
  std::vector<std::uint32_t> seqs;
  bool bad_record = false;
};

Result simulate(const Traffic& run) {
  static_assert(sizeof(spec::CaptureRecordHeader) + kPayload == kRecordBytes);
  auto cfg = pc::chip_preset("tiny");
  cfg.irq_latency_ns = 200;
  cfg.clock_mhz = 1000;
  pc::Hbm hbm("hbm", cfg);
  pc::InterruptController irq("irq", cfg);
  pc::CaptureUnit cap("cap", cfg, hbm, irq);
  Result r;
  auto now = [] { return sc_core::sc_time_stamp(); };
  cap.write_reg(spec::kRegCapBuf0Lo, kBuf0, now());
  cap.write_reg(spec::kRegCapBuf1Lo, kBuf1, now());
  cap.write_reg(spec::kRegCapBufSize, kBufBytes, now());
  cap.write_reg(spec::kRegCapCtrl, run.ctrl, now());
  bool producer_done = false;

  spawn([&] {  // producer
    tlm_utils::tlm_quantumkeeper qk;
    qk.reset();
    std::vector<std::byte> payload(kPayload);
    for (std::uint32_t i = 0; i < run.records; ++i) {
      qk.inc(ns(run.interval_ns));
      for (std::uint32_t j = 0; j < kPayload; ++j) payload[j] = static_cast<std::byte>(i + j);
      spec::CaptureRecordHeader h;
      h.op_id = i;
      cap.produce(h, payload, qk, pc::FaultSite{});
      if (qk.need_sync()) qk.sync();
    }
    qk.sync();
    r.producer_end_ps = ps_of(now());
    producer_done = true;
    cap.write_reg(spec::kRegCapFlush, 1, now());
  }, "producer");

  spawn([&] {  // host drain
    const bool pp = run.ctrl & spec::kCapPingPong;
    std::uint32_t next = 0;
    for (;;) {
      const std::uint32_t ready = cap.read_reg(spec::kRegCapReady);
      if ((ready & (1u << next)) == 0) {
        if (producer_done && ready == 0 && cap.counters().buffered == 0) return;
        sc_core::wait(irq.host_event());
        irq.write_reg(spec::kRegIrqAck, spec::kIrqCaptureFull, now());
        continue;
      }
      sc_core::wait(ns(run.drain_ns));
      const std::uint32_t bytes = cap.read_reg(next ? spec::kRegCapReadyBytes1 : spec::kRegCapReadyBytes0);
      std::vector<std::byte> buf(bytes);
      hbm.debug_read(next ? kBuf1 : kBuf0, buf);
      for (std::uint32_t off = 0; off < bytes;) {
        spec::CaptureRecordHeader h;
        std::memcpy(&h, buf.data() + off, sizeof h);
        const auto payload = std::span(buf).subspan(off + sizeof h, h.payload_bytes);
        if (h.magic != spec::kCaptureMagic || h.record_bytes != kRecordBytes || h.payload_bytes != kPayload ||
            h.checksum != pc::crc32(payload) || payload[0] != static_cast<std::byte>(h.op_id))
          r.bad_record = true;
        r.seqs.push_back(h.seq);
        ++r.drained_parsed;
        off += h.record_bytes;
      }
      cap.write_reg(spec::kRegCapRelease, next, now());
      if (pp) next ^= 1u;
    }
  }, "drain");

  sc_core::sc_start();
  r.c = cap.counters();
  r.reg_records = cap.read_reg(spec::kRegCapRecords);
  r.reg_dropped = cap.read_reg(spec::kRegCapDropped);
  r.reg_bytes = cap.read_reg(spec::kRegCapBytesLo) | (std::uint64_t{cap.read_reg(spec::kRegCapBytesHi)} << 32);
  r.reg_stall = cap.read_reg(spec::kRegCapStallLo) | (std::uint64_t{cap.read_reg(spec::kRegCapStallHi)} << 32);
  return r;
}

void expect_exact(const Result& r, std::uint32_t records) {
  EXPECT_FALSE(r.bad_record);
  EXPECT_EQ(r.c.produced, records);
  EXPECT_EQ(r.c.produced, r.c.drained + r.c.dropped + r.c.buffered);
  EXPECT_EQ(r.c.drained, r.drained_parsed);
  EXPECT_EQ(r.c.buffered, 0u) << "everything was flushed and drained";
  EXPECT_EQ(r.c.written, r.c.drained);
  EXPECT_EQ(r.c.bytes, r.c.written * kRecordBytes);
  EXPECT_EQ(r.reg_records, r.c.produced);
  EXPECT_EQ(r.reg_dropped, r.c.dropped);
  EXPECT_EQ(r.reg_bytes, r.c.bytes);
  EXPECT_EQ(r.reg_stall, r.c.stall_cycles);
  // Sequence numbers increase and stay below the records produced; gaps are exactly the drops.
  for (std::size_t i = 1; i < r.seqs.size(); ++i) EXPECT_LT(r.seqs[i - 1], r.seqs[i]);
  if (!r.seqs.empty()) {
    EXPECT_LT(r.seqs.back(), records);
  }
  EXPECT_EQ(r.seqs.size() + r.c.dropped, records);
}

}  // namespace

TEST(CaptureUnit, StallPolicyUnderSlowDrainLosesNothing) {
  Traffic run;
  run.drain_ns = 5000;  // much slower than the 1.6 us it takes to fill a buffer
  const Result r = simulate(run);
  expect_exact(r, run.records);
  EXPECT_EQ(r.c.dropped, 0u);
  EXPECT_EQ(r.drained_parsed, run.records);
  EXPECT_GT(r.c.stall_cycles, 0u);
  // Stalls are added to the producer's timeline (1 cycle = 1 ns here).
  EXPECT_GE(r.producer_end_ps, 200ull * 100'000 + r.c.stall_cycles * 1000);
}

TEST(CaptureUnit, DropPolicyUnderSlowDrainCountsEveryDrop) {
  Traffic run;
  run.drain_ns = 5000;
  run.ctrl |= spec::kCapDropOnFull;
  const Result r = simulate(run);
  expect_exact(r, run.records);
  EXPECT_GT(r.c.dropped, 0u);
  EXPECT_EQ(r.c.stall_cycles, 0u);
  EXPECT_EQ(r.drained_parsed + r.c.dropped, run.records);
  // The producer never waited: 200 records at 100 ns each (plus the last HBM write).
  EXPECT_LT(r.producer_end_ps, 200ull * 100'000 + 1'000'000);
}

TEST(CaptureUnit, SingleBufferStallsWherePingPongDoesNot) {
  // One buffer (in a child process, before this process elaborates anything): the device must
  // wait while the host drains.
  const int status = run_in_child([] {
    Traffic single;
    single.ctrl = spec::kCapEnable;
    const Result b = simulate(single);
    expect_exact(b, single.records);
    EXPECT_EQ(b.c.dropped, 0u);
    // Each of the 12 full buffers stalls the producer for ~ HBM + IRQ latency + drain (> 1 us).
    EXPECT_GE(b.c.stall_cycles, 12u * 1000u);
    EXPECT_GE(b.producer_end_ps, 200ull * 100'000 + b.c.stall_cycles * 1000);
    if (::testing::Test::HasFailure()) throw 1;
  });
  EXPECT_EQ(status, 0);

  // Same traffic, ping-pong: draining (200 ns IRQ + 800 ns) is faster than filling the other
  // buffer (1.6 us), so the producer never waits.
  Traffic pp;
  const Result a = simulate(pp);
  expect_exact(a, pp.records);
  EXPECT_EQ(a.c.stall_cycles, 0u);
  EXPECT_EQ(a.c.dropped, 0u);
  EXPECT_LT(a.producer_end_ps, 200ull * 100'000 + 1'000'000);
}

TEST(CaptureUnit, OversizedAndDisabledRecordsAreDropped) {
  auto cfg = pc::chip_preset("tiny");
  pc::Hbm hbm("hbm", cfg);
  pc::InterruptController irq("irq", cfg);
  pc::CaptureUnit cap("cap", cfg, hbm, irq);
  spawn([&] {
    tlm_utils::tlm_quantumkeeper qk;
    qk.reset();
    std::vector<std::byte> small(8), big(5000);
    EXPECT_FALSE(cap.produce({}, small, qk, {}));  // disabled
    cap.write_reg(spec::kRegCapBufSize, 4096, sc_core::SC_ZERO_TIME);
    cap.write_reg(spec::kRegCapCtrl, spec::kCapEnable, sc_core::SC_ZERO_TIME);
    EXPECT_FALSE(cap.produce({}, big, qk, {}));  // larger than a buffer
    EXPECT_TRUE(cap.produce({}, small, qk, {}));
    EXPECT_EQ(cap.read_reg(spec::kRegCapFill), 112u);  // 104 + 8
    EXPECT_EQ(cap.read_reg(spec::kRegCapRecords), 3u);
    EXPECT_EQ(cap.read_reg(spec::kRegCapDropped), 2u);
    // Flush hands the partial buffer to the host.
    cap.write_reg(spec::kRegCapFlush, 1, sc_core::sc_time_stamp());
    EXPECT_EQ(cap.read_reg(spec::kRegCapReady), 1u);
    EXPECT_EQ(cap.read_reg(spec::kRegCapReadyBytes0), 112u);
    EXPECT_EQ(cap.read_reg(spec::kRegCapFill), 0u);
    spec::CaptureRecordHeader h;
    hbm.debug_read(0, std::as_writable_bytes(std::span(&h, 1)));
    EXPECT_EQ(h.seq, 2u);  // seq counts the two dropped records
  });
  sc_core::sc_start();
  EXPECT_EQ(cap.counters().buffered, 1u);
  EXPECT_EQ(irq.raw(), spec::kIrqCaptureFull);
}

TEST(CaptureUnit, PingPongFillsWhicheverBufferTheHostReturnsFirst) {
  auto cfg = pc::chip_preset("tiny");
  pc::Hbm hbm("hbm", cfg);
  pc::InterruptController irq("irq", cfg);
  pc::CaptureUnit cap("cap", cfg, hbm, irq);
  spawn([&] {
    tlm_utils::tlm_quantumkeeper qk;
    qk.reset();
    const auto t0 = sc_core::SC_ZERO_TIME;
    cap.write_reg(spec::kRegCapBuf0Lo, kBuf0, t0);
    cap.write_reg(spec::kRegCapBuf1Lo, kBuf1, t0);
    cap.write_reg(spec::kRegCapBufSize, 2 * kRecordBytes, t0);
    cap.write_reg(spec::kRegCapCtrl, spec::kCapEnable | spec::kCapPingPong | spec::kCapDropOnFull, t0);
    std::vector<std::byte> payload(kPayload);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(cap.produce({}, payload, qk, {}));
    EXPECT_EQ(cap.read_reg(spec::kRegCapActive), 1u);
    EXPECT_FALSE(cap.produce({}, payload, qk, {}));  // closes buffer 1; none free: dropped
    EXPECT_EQ(cap.read_reg(spec::kRegCapReady), 3u);
    EXPECT_EQ(cap.read_reg(spec::kRegCapReadyBytes1), 2 * kRecordBytes);
    cap.write_reg(spec::kRegCapRelease, 1, sc_core::sc_time_stamp());
    EXPECT_EQ(cap.read_reg(spec::kRegCapActive), 1u);
    EXPECT_TRUE(cap.produce({}, payload, qk, {}));
    spec::CaptureRecordHeader h;
    hbm.debug_read(kBuf1, std::as_writable_bytes(std::span(&h, 1)));
    EXPECT_EQ(h.seq, 5u);
    EXPECT_EQ(cap.counters().drained, 2u);
    EXPECT_EQ(cap.counters().buffered, 3u);
    EXPECT_EQ(cap.counters().dropped, 1u);
  });
  sc_core::sc_start();
}
