// Coherence of the shared L2 with the initiators that are not the AI cores (hbm.h attach_l2):
// a host DMA write drops the L2's copy, so the next op reads the new bytes from HBM rather than
// hitting a stale line; host DMA and capture reads of data an op left dirty in the L2 are served
// by the L2 (the dirty line is the only current copy) and return the op's results; capture
// records bypass the L2 unless capture_l2 = allocate. One design per TEST.
#include <gtest/gtest.h>

#include "chip_model/l2_cache.h"
#include "chip_model/spec/kernel_args.h"
#include "tests/chip_model/ai_core_test_util.h"
#include "tests/chip_model/kernel_test_util.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace ps = probelab::spec;
using namespace probelab::chip::testing;

namespace {

const pg::Shape kShape{256, 512};  // 256 KiB of FP16
constexpr std::uint64_t kBytes = 2ull * 256 * 512;

pc::ChipConfig split_chip() {
  pc::ChipConfig cfg = pc::chip_preset("ascend910b1");
  cfg.num_cores = 2;
  cfg.vector_cores = 4;
  return cfg;
}

std::vector<std::byte> host_read(AiCoreChip& p, std::uint64_t addr, std::size_t n) {
  std::vector<std::byte> b(n);
  p.chip.hbm().read(addr, b, sc_core::sc_time_stamp(), pc::HbmClient::HostDma);
  return b;
}

}  // namespace

TEST(L2Coherence, HostWriteInvalidatesTheL2CopySoTheNextOpReadsHbm) {
  AiCoreChip p(split_chip());
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const auto x = hbm.put(random_f16(kShape, 1));
  const auto y1 = hbm.out(pg::DType::F16, kShape), y2 = hbm.out(pg::DType::F16, kShape);
  const auto t1 = hbm.kernel(1, op_args("Relu", {x}, {y1}));
  const auto t2 = hbm.kernel(2, op_args("Relu", {x}, {y2}));
  const pg::Tensor fresh = random_f16(kShape, 2, 0.5f, 1.0f);  // all positive: Relu keeps them
  spawn([&] {
    p.host.setup_stream(0);
    p.host.submit(0, t1);
    p.host.wait_stream(0);
    // x is resident in the L2 now; the host uploads new values over it.
    EXPECT_TRUE(p.chip.services().l2->resident(x.addr));
    sc_core::wait(p.chip.hbm().write(x.addr, fresh.bytes(), sc_core::sc_time_stamp(), pc::HbmClient::HostDma) -
                  sc_core::sc_time_stamp());
    EXPECT_FALSE(p.chip.services().l2->resident(x.addr));
    p.host.submit(0, t2);
    p.host.wait_stream(0);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const auto& rec = p.core->records();
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec[1].hbm_read_bytes, kBytes);  // no stale hit: the new bytes come from HBM
  EXPECT_EQ(rec[1].l2_read_bytes, 0u);
  EXPECT_EQ(p.chip.hbm().l2_stats(pc::HbmClient::HostDma).invalidated_bytes, kBytes);
  const pg::Tensor got = hbm.get(y2);
  EXPECT_TRUE(std::equal(got.bytes().begin(), got.bytes().end(), fresh.bytes().begin()));
}

TEST(L2Coherence, HostReadOfDirtyOutputsIsServedByTheL2WithTheOpsResults) {
  AiCoreChip p(split_chip());
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const pg::Tensor xv = random_f16(kShape, 3);
  const auto x = hbm.put(xv);
  const auto y = hbm.out(pg::DType::F16, kShape);
  const auto t1 = hbm.kernel(1, op_args("Relu", {x}, {y}));
  std::vector<std::byte> got;
  std::uint64_t channel_bytes_before = 0, channel_bytes_after = 0;
  spawn([&] {
    p.host.setup_stream(0);
    p.host.submit(0, t1);
    p.host.wait_stream(0);
    EXPECT_TRUE(p.chip.services().l2->dirty(y.addr));  // write-back L2: HBM has not seen y yet
    for (const auto& c : p.chip.hbm().channel_stats()) channel_bytes_before += c.bytes;
    got = host_read(p, y.addr, kBytes);
    for (const auto& c : p.chip.hbm().channel_stats()) channel_bytes_after += c.bytes;
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const auto& ls = p.chip.hbm().l2_stats(pc::HbmClient::HostDma);
  EXPECT_EQ(ls.hit_bytes, kBytes);
  EXPECT_EQ(ls.miss_bytes, 0u);
  EXPECT_EQ(channel_bytes_after, channel_bytes_before);  // nothing read from the channels
  ASSERT_EQ(got.size(), xv.nbytes());
  const auto* g = reinterpret_cast<const std::uint16_t*>(got.data());
  std::size_t wrong = 0, positive = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(xv.numel()); ++i) {
    const std::uint16_t in = bits_at(xv, i);
    const std::uint16_t want = (in & 0x8000) ? 0 : in;  // Relu of a (non-NaN) FP16 value
    positive += want != 0;
    wrong += (g[i] & 0x7FFF) != want;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(positive, static_cast<std::size_t>(xv.numel()) / 4);
}

namespace {

/// Relu, then an asynchronous full capture of its output on the capture DMA engine; returns the
/// capture client's L2 statistics.
pc::Hbm::L2Stats capture_after_relu(const pc::ChipConfig& cfg, std::uint64_t* capture_channel_bytes) {
  AiCoreChip p(cfg);
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const auto x = hbm.put(random_f16(kShape, 4));
  const auto y = hbm.out(pg::DType::F16, kShape);
  const auto t1 = hbm.kernel(1, op_args("Relu", {x}, {y}));
  ps::CaptureArgs ca;
  ca.tensor = y;
  ca.payload = static_cast<std::uint8_t>(ps::CapturePayload::FullTensor);
  const std::uint64_t ca_addr = hbm.alloc(sizeof ca);
  poke(p.chip.hbm(), ca_addr, ca);
  auto cap = task(ps::TaskKind::Capture, 2, ca_addr, sizeof ca);
  cap.flags |= ps::kTaskFlagAsync;
  const std::uint64_t buf0 = hbm.alloc(1 << 20), buf1 = hbm.alloc(1 << 20);
  spawn([&] {
    p.host.wr(ps::kRegCapBuf0Lo, static_cast<std::uint32_t>(buf0));
    p.host.wr(ps::kRegCapBuf1Lo, static_cast<std::uint32_t>(buf1));
    p.host.wr(ps::kRegCapBufSize, 1 << 20);
    p.host.wr(ps::kRegCapCtrl, ps::kCapEnable | ps::kCapPingPong);
    p.host.setup_stream(0);
    p.host.submit(0, t1);
    p.host.submit(0, cap);
    p.host.submit(0, task(ps::TaskKind::Barrier, 3));
    p.host.wait_stream(0);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  if (capture_channel_bytes)
    *capture_channel_bytes = p.chip.hbm().stats(pc::HbmClient::Capture).bytes_written;
  return p.chip.hbm().l2_stats(pc::HbmClient::Capture);
}

}  // namespace

TEST(L2Coherence, CaptureReadsTheDirtyTensorFromTheL2AndBypassesItWithTheRecord) {
  std::uint64_t written = 0;
  const pc::Hbm::L2Stats s = capture_after_relu(split_chip(), &written);
  EXPECT_EQ(s.hit_bytes, kBytes);  // the tensor the Relu just stored, from the L2
  EXPECT_EQ(s.miss_bytes, 0u);
  EXPECT_EQ(s.allocated_bytes, 0u);  // capture_l2 = bypass: the record goes to HBM
  EXPECT_GE(written, kBytes);
}

TEST(L2Coherence, CaptureRecordsAllocateInTheL2WhenAsked) {
  pc::ChipConfig cfg = split_chip();
  cfg.capture_l2 = "allocate";
  const pc::Hbm::L2Stats s = capture_after_relu(cfg, nullptr);
  EXPECT_EQ(s.hit_bytes, kBytes);
  EXPECT_GE(s.allocated_bytes, kBytes);  // record header + payload
}
