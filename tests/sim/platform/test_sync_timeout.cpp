// A job whose chips wait for each other forever ends with SyncTimeout naming the rank, the stream
// and what the collectives wait for, instead of polling without end: rank 0 runs an all-reduce
// that rank 1 never joins.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "chip_model/chip_config.h"
#include "chip_model/spec/collective_args.h"
#include "sim/platform/core_factory.h"
#include "sim/platform/platform.h"

namespace probelab::sim {
namespace {

TEST(SyncTimeout, ACollectiveNoPeerJoinsEndsTheRunNamingWhatItWaitsFor) {
  chip::Trace trace(false);
  PlatformOptions po;
  po.chip = chip::chip_preset("ascend910b");
  po.ranks = 2;
  po.make_cores = ai_core_factory(std::make_shared<AiCoreSet>());
  po.trace = &trace;
  po.host.sync_timeout_ns = 2'000'000;  // 2 ms of simulated time
  Platform platform("platform", po);
  bool returned = false;
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
  try {
    platform.run();
    FAIL() << "the run ended without an error";
  } catch (const SyncTimeout& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("r0 stream 0: no task completed for 2 ms of simulated time"), std::string::npos) << m;
    EXPECT_NE(m.find("r0 waits for r1"), std::string::npos) << m;
  }
  EXPECT_FALSE(returned);
  EXPECT_GE(sc_core::sc_time_stamp(), sc_core::sc_time(2, sc_core::SC_MS));
  EXPECT_LT(sc_core::sc_time_stamp(), sc_core::sc_time(3, sc_core::SC_MS));  // not much later either
}

}  // namespace
}  // namespace probelab::sim
