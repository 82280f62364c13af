#include <gtest/gtest.h>

#include <tlm_utils/simple_initiator_socket.h>

#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chip_model/hbm.h"
#include "chip_model/l2_cache.h"
#include "chip_model/trace.h"
#include "tests/chip_model/chip_test_util.h"

namespace pc = probelab::chip;
using namespace probelab::chip::testing;

namespace {

// tiny preset: 4 channels x 50 GB/s, 512 B interleave, 120 ns latency.
pc::ChipConfig cfg() { return pc::chip_preset("tiny"); }
constexpr std::uint64_t kLatPs = 120'000;

std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + seed) & 0xFF);
  return v;
}

}  // namespace

TEST(Hbm, BytesRoundTripAcrossPagesAndUnwrittenReadsZero) {
  pc::Hbm hbm("hbm", cfg());
  const auto src = pattern(200'000, 1);
  const std::uint64_t addr = 65536 - 100;  // crosses page boundaries
  hbm.debug_write(addr, src);
  std::vector<std::byte> back(src.size());
  hbm.debug_read(addr, back);
  EXPECT_EQ(back, src);
  std::vector<std::byte> z(1000, std::byte{0xAA});
  hbm.debug_read(500'000'000, z);
  EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](std::byte b) { return b == std::byte{0}; }));
  // Timed access moves the same bytes.
  std::vector<std::byte> t(src.size());
  hbm.read(addr, t, sc_core::SC_ZERO_TIME, pc::HbmClient::Core);
  EXPECT_EQ(t, src);
  EXPECT_EQ(hbm.stats(pc::HbmClient::Core).bytes_read, src.size());
  EXPECT_THROW(hbm.debug_read(hbm.size() - 4, std::span(z).first(8)), std::out_of_range);
  EXPECT_THROW(hbm.write(hbm.size(), std::span(src).first(1), sc_core::SC_ZERO_TIME, pc::HbmClient::Core),
               std::out_of_range);
}

TEST(Hbm, TwoContendingInitiatorsTakeTwiceAsLong) {
  pc::Hbm hbm("hbm", cfg());
  // 64 KiB over 4 channels: 16 KiB per channel at 50 GB/s = 327.68 ns.
  const std::uint64_t bytes = 64 * 1024;
  const auto one = ps_of(hbm.transfer(0, bytes, sc_core::SC_ZERO_TIME, pc::HbmClient::Core, false));
  EXPECT_EQ(one, 327'680 + kLatPs);
  // A second initiator asking at the same time for other addresses on the same channels.
  const auto two = ps_of(hbm.transfer(1 << 20, bytes, sc_core::SC_ZERO_TIME, pc::HbmClient::Capture, true));
  EXPECT_EQ(two - kLatPs, 2 * (one - kLatPs));
  // Once the channels are idle again, a transfer takes the single time.
  const auto later = ps_of(hbm.transfer(0, bytes, ns(10'000), pc::HbmClient::Core, false));
  EXPECT_EQ(later - 10'000'000, one);
  EXPECT_EQ(hbm.channel_busy_ps(), 3 * 4 * 327'680u);
}

TEST(Hbm, DisjointChannelsDoNotContendAndPartialGranulesCount) {
  pc::Hbm hbm("hbm", cfg());
  // 512 B each on channel 0 and channel 1: 10.24 ns each, in parallel.
  const auto a = ps_of(hbm.transfer(0, 512, sc_core::SC_ZERO_TIME, pc::HbmClient::Core, false));
  const auto b = ps_of(hbm.transfer(512, 512, sc_core::SC_ZERO_TIME, pc::HbmClient::Core, false));
  EXPECT_EQ(a, 10'240 + kLatPs);
  EXPECT_EQ(b, a);
  // Bytes 1000..1099 straddle channel 1 (24 B) and channel 2 (76 B): the larger share decides.
  pc::Hbm h2("hbm2", cfg());
  const auto c = ps_of(h2.transfer(1000, 100, sc_core::SC_ZERO_TIME, pc::HbmClient::Core, false));
  EXPECT_EQ(c, 1'520 + kLatPs);  // 76 B at 50 GB/s
}

TEST(Hbm, FewGranulesChargeTheirOwnChannelsAcrossTheWrap) {
  // Fewer granules than channels: each granule on its own channel, wrapping from the last channel
  // to channel 0, the same shares and times as a pass over every channel gives.
  pc::Hbm hbm("hbm", cfg());
  // Bytes 1500..2099: channel 2 (36 B), channel 3 (512 B), channel 0 (52 B, the next round).
  const auto t = hbm.transfer_at_ps(1500, 600, 1'000, pc::HbmClient::Collective, false);
  EXPECT_EQ(t, 1'000 + 10'240 + kLatPs);  // the 512 B share decides
  const auto& ch = hbm.channel_stats();
  EXPECT_EQ(ch[0].bytes, 52u);
  EXPECT_EQ(ch[1].bytes, 0u);
  EXPECT_EQ(ch[2].bytes, 36u);
  EXPECT_EQ(ch[3].bytes, 512u);
  // Channel 0 is busy until 1'000 + 1'040 ps: a granule there waits for it, channel 1 does not.
  EXPECT_EQ(hbm.transfer_at_ps(0, 512, 1'000, pc::HbmClient::Core, false), 1'000 + 1'040 + 10'240 + kLatPs);
  EXPECT_EQ(hbm.transfer_at_ps(512, 512, 1'000, pc::HbmClient::Core, false), 1'000 + 10'240 + kLatPs);
  // As many granules as channels or more: the pass over every channel, the same accounting.
  pc::Hbm h2("hbm2", cfg());
  // Bytes 1500..3547: 36 + 476 B on channel 2, 512 B on each of the others.
  EXPECT_EQ(h2.transfer_at_ps(1500, 4 * 512, 0, pc::HbmClient::Core, false), 10'240 + kLatPs);
  std::uint64_t total = 0;
  for (const auto& c : h2.channel_stats()) total += c.bytes;
  EXPECT_EQ(total, 4u * 512u);
  EXPECT_EQ(h2.channel_stats()[2].bytes, 36u + 476u);
}

TEST(Hbm, PortRateCapsOneInitiator) {
  pc::Hbm hbm("hbm", cfg());
  // 64 KiB through a 10 GB/s port: 6553.6 ns, slower than the 327.68 ns of the channels.
  const auto t = ps_of(hbm.transfer(0, 64 * 1024, sc_core::SC_ZERO_TIME, pc::HbmClient::Core, false, 10.0));
  EXPECT_EQ(t, 6'553'600 + kLatPs);
}

namespace {
struct Initiator : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<Initiator> socket{"socket"};
  explicit Initiator(sc_core::sc_module_name n) : sc_module(n) {}
};
}  // namespace

TEST(Hbm, BusTransportChargesTheModelledTime) {
  pc::Hbm hbm("hbm", cfg());
  Initiator init("init");
  init.socket.bind(hbm.socket);
  bool ran = false;
  spawn([&] {
    auto data = pattern(4096, 9);
    tlm::tlm_generic_payload tr;
    sc_core::sc_time delay = ns(5);
    tr.set_command(tlm::TLM_WRITE_COMMAND);
    tr.set_address(8192);
    tr.set_data_ptr(reinterpret_cast<unsigned char*>(data.data()));
    tr.set_data_length(data.size());
    tr.set_streaming_width(data.size());
    init.socket->b_transport(tr, delay);
    EXPECT_EQ(tr.get_response_status(), tlm::TLM_OK_RESPONSE);
    // 4096 B = 8 granules, 2 per channel = 1024 B at 50 GB/s = 20.48 ns, started at 5 ns.
    EXPECT_EQ(ps_of(delay), 5'000 + 20'480 + kLatPs);
    std::vector<std::byte> back(4096);
    hbm.debug_read(8192, back);
    EXPECT_EQ(back, data);
    tr.set_address(hbm.size() - 10);
    tr.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    init.socket->b_transport(tr, delay);
    EXPECT_EQ(tr.get_response_status(), tlm::TLM_ADDRESS_ERROR_RESPONSE);
    ran = true;
  });
  sc_core::sc_start();
  EXPECT_TRUE(ran);
}

// A transfer within one granule and one L2 line takes a shorter path when the timeline is off
// (hbm.h: single()); it must have exactly the effects of the general one, which a traced HBM
// takes: same completion times, client, channel and L2 statistics, and L2 contents, for reads
// that hit and miss, writes over clean and dirty lines (partial: write-back first; whole), port
// caps, every client, capture records allocating in the L2, and transfers that are not single.
TEST(Hbm, SingleGranuleTransfersMatchTheGeneralModel) {
  // 4 channels (a power of two: the channel is a mask of the granule) and 3 (a remainder).
  for (const std::uint32_t channels : {4u, 3u})
  for (bool with_l2 : {false, true}) {
    pc::ChipConfig conf = cfg();
    conf.hbm_channels = channels;
    const std::string tag = fmt::format("{}{}", with_l2 ? "_l2_" : "_", channels);
    pc::Trace traced(true);
    pc::Hbm fast(("fast" + tag).c_str(), conf), general(("general" + tag).c_str(), conf, 0, &traced);
    pc::L2Cache fast_l2(1 << 20), general_l2(1 << 20);
    if (with_l2) {
      fast.attach_l2(&fast_l2, 400.0, 300.0, true);
      general.attach_l2(&general_l2, 400.0, 300.0, true);
      for (pc::L2Cache* l2 : {&fast_l2, &general_l2}) {
        l2->read(0, 4096);        // lines 0..7 clean
        l2->write(8192, 4096);    // lines 16..23 dirty
      }
    }
    struct Op {
      std::uint64_t addr, bytes, start;
      pc::HbmClient who;
      bool write;
      double port;
    };
    const std::vector<Op> ops = {
        {8, 4, 0, pc::HbmClient::Collective, false, 0},          // hit (L2) or one channel
        {8200, 8, 0, pc::HbmClient::Collective, false, 0},       // dirty line: hit
        {20000, 16, 100, pc::HbmClient::Collective, false, 0},   // miss
        {20000, 16, 100, pc::HbmClient::Collective, false, 0},   // again: queued behind it
        {8704, 12, 50, pc::HbmClient::Collective, true, 0},      // partial write of a dirty line
        {9216, 512, 60, pc::HbmClient::Collective, true, 0},     // whole dirty line
        {1024, 2, 70, pc::HbmClient::HostDma, true, 0},          // clean line dropped
        {1030, 2, 70, pc::HbmClient::Core, false, 5.0},          // port cap, now a miss
        {40000, 64, 0, pc::HbmClient::Capture, true, 0},         // capture allocates
        {40000, 64, 10, pc::HbmClient::Stream, false, 0},        // then hits
        {500, 24, 0, pc::HbmClient::Collective, false, 0},       // spans two granules
        {3000, 2000, 0, pc::HbmClient::Collective, true, 0},     // many
        {64, 0, 0, pc::HbmClient::Collective, true, 0},          // nothing
        {30000, 6, 1'000'000, pc::HbmClient::Collective, true, 0},
    };
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      EXPECT_EQ(fast.transfer_at_ps(o.addr, o.bytes, o.start, o.who, o.write, o.port, false),
                general.transfer_at_ps(o.addr, o.bytes, o.start, o.who, o.write, o.port, false))
          << "op " << i << (with_l2 ? " with L2" : "") << ", " << channels << " channels";
    }
    for (int c = 0; c < pc::kHbmClientCount; ++c) {
      const auto who = static_cast<pc::HbmClient>(c);
      EXPECT_EQ(fast.stats(who).transfers, general.stats(who).transfers);
      EXPECT_EQ(fast.stats(who).bytes_read, general.stats(who).bytes_read);
      EXPECT_EQ(fast.stats(who).bytes_written, general.stats(who).bytes_written);
      const auto &a = fast.l2_stats(who), &b = general.l2_stats(who);
      EXPECT_EQ(a.hit_bytes, b.hit_bytes) << c;
      EXPECT_EQ(a.miss_bytes, b.miss_bytes) << c;
      EXPECT_EQ(a.invalidated_bytes, b.invalidated_bytes) << c;
      EXPECT_EQ(a.writeback_bytes, b.writeback_bytes) << c;
      EXPECT_EQ(a.allocated_bytes, b.allocated_bytes) << c;
    }
    EXPECT_EQ(fast.channel_busy_ps(), general.channel_busy_ps());
    ASSERT_EQ(fast.channel_stats().size(), general.channel_stats().size());
    for (std::size_t c = 0; c < fast.channel_stats().size(); ++c) {
      EXPECT_EQ(fast.channel_stats()[c].bytes, general.channel_stats()[c].bytes);
      EXPECT_EQ(fast.channel_stats()[c].busy_ps, general.channel_stats()[c].busy_ps);
    }
    for (std::uint64_t a = 0; a < 65536; a += pc::L2Cache::kLineBytes) {
      EXPECT_EQ(fast_l2.resident(a), general_l2.resident(a)) << a;
      EXPECT_EQ(fast_l2.dirty(a), general_l2.dirty(a)) << a;
    }
    if (with_l2) {
      EXPECT_GT(fast.l2_stats(pc::HbmClient::Collective).hit_bytes, 0u);
      EXPECT_GT(fast.l2_stats(pc::HbmClient::Collective).writeback_bytes, 0u);
    }
  }
}
