// A job whose chips wait for each other forever ends at the host's synchronize timeout instead of
// polling without end, as a job hang (job_hang.h) naming the rank, the stream and what the
// collective waits for: rank 0 runs an all-reduce that rank 1 never joins (its program returned);
// a stalled stream is polled less and less often until that deadline.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "chip_model/chip_config.h"
#include "chip_model/spec/collective_args.h"
#include "sim/platform/core_factory.h"
#include "sim/platform/platform.h"

namespace probelab::sim {
namespace {

// Rank 0 all-reduces 64 floats and synchronizes; sets `returned` if synchronize returns.
void all_reduce_alone(Platform& platform, bool& returned) {
  platform.host(0).set_program([&] {
    probes::Device& dev = platform.host(0).device();
    const std::vector<float> x(64, 1.0f);
    const std::uint64_t in = dev.alloc(x.size() * 4), out = dev.alloc(x.size() * 4);
    dev.dma_write(in, std::as_bytes(std::span<const float>(x)));
    spec::CollectiveArgs a;
    a.input.addr = in;
    a.output.addr = out;
    a.input.dtype = a.output.dtype = static_cast<std::uint8_t>(graph::DType::F32);
    a.acc_dtype = static_cast<std::uint8_t>(graph::DType::F32);
    a.count = x.size();
    std::vector<std::byte> block(sizeof a);
    std::memcpy(block.data(), &a, sizeof a);
    const std::uint64_t args = dev.alloc(block.size());
    dev.dma_write(args, block);
    spec::TaskDescriptor t;
    t.task_id = 1;
    t.kind = spec::TaskKind::Collective;
    t.args_addr = args;
    t.args_size = sizeof a;
    dev.submit(0, t);
    dev.synchronize(0);
    returned = true;
  });
  platform.host(1).set_program([] {});  // never joins
}

PlatformOptions two_ranks(chip::Trace& trace) {
  PlatformOptions po;
  po.chip = chip::chip_preset("ascend910b");
  po.ranks = 2;
  po.make_cores = ai_core_factory(std::make_shared<AiCoreSet>());
  po.trace = &trace;
  return po;
}

TEST(SyncTimeout, ACollectiveNoPeerJoinsEndsTheRunAsAHang) {
  chip::Trace trace(false);
  PlatformOptions po = two_ranks(trace);
  po.host.sync_timeout_ns = 2'000'000;  // 2 ms of simulated time
  Platform platform("platform", po);
  bool returned = false;
  all_reduce_alone(platform, returned);
  platform.run();
  ASSERT_TRUE(platform.hang().has_value());
  const JobHang& h = *platform.hang();
  EXPECT_NE(h.noticed_by.find("r0 stream 0: no task completed for 2 ms of simulated time"), std::string::npos)
      << h.noticed_by;
  EXPECT_EQ(h.waiting, std::vector<std::uint32_t>{0});  // r1 returned
  ASSERT_EQ(h.blocked.size(), 1u);
  EXPECT_EQ(h.blocked[0].rank, 0u);
  EXPECT_EQ(h.blocked[0].waits_for, 1u);
  EXPECT_EQ(h.blocked[0].task_id, 1u);
  EXPECT_TRUE(h.blocked[0].collective.starts_with("allreduce")) << h.blocked[0].collective;
  EXPECT_TRUE(h.blocked[0].conflict.empty());
  EXPECT_EQ(h.time_ps, chip::ChipClock::to_ps(platform.end_time()));
  EXPECT_EQ(platform.finish_ps(0), h.time_ps);  // it waited until the hang was noticed
  EXPECT_FALSE(returned);
  EXPECT_GE(sc_core::sc_time_stamp(), sc_core::sc_time(2, sc_core::SC_MS));
  EXPECT_LT(sc_core::sc_time_stamp(), sc_core::sc_time(3, sc_core::SC_MS));  // not much later either
}

// A stalled stream is polled less and less often: the driver's default second of waiting costs
// tens of register reads, not ten thousand, and the hang is noticed just after the deadline.
TEST(SyncTimeout, AStalledStreamIsPolledLessOftenUntilTheDeadline) {
  chip::Trace trace(false);
  PlatformOptions po = two_ranks(trace);
  po.host.sync_timeout_ns = 1'000'000'000;
  Platform platform("platform", po);
  bool returned = false;
  all_reduce_alone(platform, returned);
  platform.run();
  ASSERT_TRUE(platform.hang().has_value());
  EXPECT_FALSE(returned);
  const std::uint64_t reads = platform.host(0).device().stats().mmio_reads;
  EXPECT_LT(reads, 2 * (po.host.poll_backoff_after + 40)) << "two reads a poll: the first polls at the period, then doublings";
  EXPECT_GT(reads, 2u * po.host.poll_backoff_after);
  const sc_core::sc_time t = sc_core::sc_time_stamp();
  EXPECT_GE(t, sc_core::sc_time(1, sc_core::SC_SEC));
  EXPECT_LT(t, sc_core::sc_time(1, sc_core::SC_SEC) + sc_core::sc_time(50, sc_core::SC_US));
}

}  // namespace
}  // namespace probelab::sim
