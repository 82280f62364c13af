#include <gtest/gtest.h>

#include <vector>

#include "chip_model/interrupt_controller.h"
#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"
#include "tests/chip_model/chip_test_util.h"

namespace pc = probelab::chip;
namespace spec = probelab::spec;
using namespace probelab::chip::testing;

namespace {

pc::ChipConfig cfg() {
  auto c = pc::chip_preset("tiny");
  c.irq_latency_ns = 1500;
  return c;
}

struct Delivery {
  std::uint64_t ps;
  std::uint32_t lines;
};

struct Fixture {
  pc::InterruptController irq{"irq", cfg()};
  std::vector<Delivery> got;
  Fixture() {
    irq.set_host_callback([this](std::uint32_t p) { got.push_back({ps_of(sc_core::sc_time_stamp()), p}); });
  }
};

class DropDelay : public pc::FaultHooks {
 public:
  std::uint32_t sites() const override { return pc::kFaultInterrupt; }
  pc::InterruptFault on_interrupt(const pc::FaultSite&, std::uint32_t line) override {
    seen.push_back(line);
    if (line == spec::kIrqCaptureFull) return {true, 0};
    if (line == spec::kIrqStreamDone) return {false, 250'000};
    return {};
  }
  std::vector<std::uint32_t> seen;
};

}  // namespace

TEST(InterruptController, DeliveredExactlyAfterTheLatency) {
  Fixture f;
  spawn([&] {
    sc_core::wait(ns(100));
    f.irq.raise(spec::kIrqException, ns(130));  // raised at a decoupled local time ahead of now
    EXPECT_EQ(f.irq.read_reg(spec::kRegIrqRaw), spec::kIrqException);
    EXPECT_EQ(f.irq.read_reg(spec::kRegIrqPending), spec::kIrqException);
  });
  sc_core::sc_start();
  ASSERT_EQ(f.got.size(), 1u);
  EXPECT_EQ(f.got[0].ps, 130'000u + 1'500'000u);
  EXPECT_EQ(f.got[0].lines, spec::kIrqException);
  EXPECT_EQ(f.irq.counters().delivered, 1u);
}

TEST(InterruptController, MaskPendingAckAndUnmask) {
  Fixture f;
  spawn([&] {
    f.irq.write_reg(spec::kRegIrqMask, spec::kIrqCaptureFull, sc_core::sc_time_stamp());
    f.irq.raise(spec::kIrqCaptureFull | spec::kIrqStreamDone, ns(10));
    EXPECT_EQ(f.irq.read_reg(spec::kRegIrqRaw), spec::kIrqCaptureFull | spec::kIrqStreamDone);
    EXPECT_EQ(f.irq.read_reg(spec::kRegIrqPending), spec::kIrqStreamDone);
    EXPECT_EQ(f.irq.read_reg(spec::kRegIrqMask), spec::kIrqCaptureFull);
    sc_core::wait(ns(5000));
    // The stream-done message arrived at 1510 ns with only the unmasked line pending.
    ASSERT_EQ(f.got.size(), 1u);
    EXPECT_EQ(f.got[0].ps, 1'510'000u);
    EXPECT_EQ(f.got[0].lines, spec::kIrqStreamDone);
    f.irq.write_reg(spec::kRegIrqAck, spec::kIrqStreamDone, sc_core::sc_time_stamp());
    EXPECT_EQ(f.irq.read_reg(spec::kRegIrqRaw), spec::kIrqCaptureFull);
    // Unmasking a raw line sends a message from the time of the write.
    f.irq.write_reg(spec::kRegIrqMask, 0, ns(5200));
  });
  sc_core::sc_start();
  ASSERT_EQ(f.got.size(), 2u);
  EXPECT_EQ(f.got[1].ps, 5'200'000u + 1'500'000u);
  EXPECT_EQ(f.got[1].lines, spec::kIrqCaptureFull);
}

TEST(InterruptController, AcknowledgedBeforeDeliveryIsSuppressed) {
  Fixture f;
  spawn([&] {
    f.irq.raise(spec::kIrqBreakpoint, sc_core::SC_ZERO_TIME);
    sc_core::wait(ns(100));
    f.irq.write_reg(spec::kRegIrqAck, spec::kIrqBreakpoint, sc_core::sc_time_stamp());
    EXPECT_EQ(f.irq.pending(), 0u);
  });
  sc_core::sc_start();
  EXPECT_TRUE(f.got.empty());
  EXPECT_EQ(f.irq.counters().suppressed, 1u);
}

TEST(InterruptController, FaultHookDropsAndDelays) {
  Fixture f;
  DropDelay hooks;
  f.irq.set_fault_hooks(&hooks);
  spawn([&] { f.irq.raise(spec::kIrqCaptureFull | spec::kIrqStreamDone | spec::kIrqException, ns(1)); });
  sc_core::sc_start();
  EXPECT_EQ(hooks.seen.size(), 3u);
  ASSERT_EQ(f.got.size(), 2u);
  // Exception on time; capture-full dropped (its raw bit still set); stream-done 250 ns late.
  EXPECT_EQ(f.got[0].ps, 1'000u + 1'500'000u);
  EXPECT_EQ(f.got[1].ps, 1'000u + 1'500'000u + 250'000u);
  EXPECT_EQ(f.irq.counters().dropped, 1u);
  EXPECT_NE(f.irq.raw() & spec::kIrqCaptureFull, 0u);
}
