#include <gtest/gtest.h>

#include "chip_model/detection_circuit.h"
#include "chip_model/interrupt_controller.h"
#include "chip_model/spec/irq.h"
#include "tests/chip_model/chip_test_util.h"

namespace pc = probelab::chip;
namespace spec = probelab::spec;
using namespace probelab::chip::testing;

namespace {

pc::ChipConfig cfg() {
  auto c = pc::chip_preset("tiny");
  c.clock_mhz = 1000;  // 1 cycle = 1 ns
  c.irq_latency_ns = 700;
  return c;
}

pc::DetectionEvent event(spec::ExcKindBit kind, std::uint64_t elem, std::uint32_t op, std::uint64_t cycle,
                         std::uint64_t count = 1) {
  pc::DetectionEvent ev;
  ev.kind_mask = pc::exc_bit(kind);
  ev.kind_counts[kind] = count;
  ev.first_kind = kind;
  ev.first_elem = elem;
  ev.kind_first[kind] = elem;
  ev.op_id = op;
  ev.task_id = op + 1000;
  ev.core = 1;
  ev.stream = 2;
  ev.output_index = 1;
  ev.step = 9;
  ev.cycle = cycle;
  ev.status = kind == spec::kExcOverflow ? spec::kFsOverflow
              : kind == spec::kExcNanInput ? spec::kFsNanInput
              : kind == spec::kExcInvalid  ? spec::kFsInvalid
                                           : spec::kFsUnderflow;
  return ev;
}

struct Fixture {
  pc::ChipConfig c = cfg();
  pc::InterruptController irq{"irq", c};
  pc::DetectionCircuit det{"det", c, irq};
  std::vector<std::uint64_t> deliveries;
  Fixture() { irq.set_host_callback([this](std::uint32_t) { deliveries.push_back(ps_of(sc_core::sc_time_stamp())); }); }
};

}  // namespace

TEST(DetectionCircuit, FloatStatusIsStickyAndW1C) {
  Fixture f;
  spawn([&] {
    auto ev = event(spec::kExcOverflow, 5, 1, 10);
    ev.armed = false;  // status still records unarmed results
    ev.status |= spec::kFsDenormal;
    f.det.report(ev);
    f.det.report(event(spec::kExcNanInput, 0, 2, 20));
    EXPECT_EQ(f.det.read_reg(spec::kRegFloatStatus), spec::kFsOverflow | spec::kFsDenormal | spec::kFsNanInput);
    f.det.write_reg(spec::kRegFloatStatusClear, spec::kFsOverflow);
    EXPECT_EQ(f.det.read_reg(spec::kRegFloatStatus), spec::kFsDenormal | spec::kFsNanInput);
    f.det.write_reg(spec::kRegFloatStatusClear, 0xFFFFFFFF);
    EXPECT_EQ(f.det.read_reg(spec::kRegFloatStatus), 0u);
    // The unarmed report neither latched nor counted.
    EXPECT_EQ(f.det.read_reg(spec::kRegExcOpId), 2u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcCountBase + 4 * spec::kExcOverflow), 0u);
  });
  sc_core::sc_start();
}

TEST(DetectionCircuit, LatchHoldsFirstAnomalyWithMoreBitUntilAck) {
  Fixture f;
  spawn([&] {
    EXPECT_EQ(f.det.read_reg(spec::kRegExcStatus), 0u);
    f.det.report(event(spec::kExcInvalid, (3ull << 32) | 77, 42, (1ull << 33) + 5));
    const std::uint32_t st = f.det.read_reg(spec::kRegExcStatus);
    EXPECT_EQ(st & 1u, 1u);
    EXPECT_EQ((st >> 8) & 0xFF, static_cast<std::uint32_t>(spec::kExcInvalid));
    EXPECT_EQ(st & (1u << 16), 0u);
    f.det.report(event(spec::kExcOverflow, 1, 43, 100));
    EXPECT_NE(f.det.read_reg(spec::kRegExcStatus) & (1u << 16), 0u);
    // Still the first one.
    EXPECT_EQ(f.det.read_reg(spec::kRegExcOpId), 42u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcTaskId), 1042u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcCore), 1u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcStream), 2u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcElemLo), 77u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcElemHi), 3u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcCycleLo), 5u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcCycleHi), 2u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcStep), 9u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcOutput), 1u);
    f.det.write_reg(spec::kRegExcAck, 1);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcStatus), 0u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcOpId), 0u);
    // Re-armed: the next anomaly latches afresh.
    f.det.report(event(spec::kExcOverflow, 8, 44, 200));
    EXPECT_EQ(f.det.read_reg(spec::kRegExcOpId), 44u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcStatus) & (1u << 16), 0u);
  });
  sc_core::sc_start();
  EXPECT_TRUE(f.det.anomaly_seen(43, 9));
  EXPECT_FALSE(f.det.anomaly_seen(43, 10));
}

TEST(DetectionCircuit, ADisabledFirstKindLatchesTheEnabledKindAtItsOwnElement) {
  Fixture f;
  spawn([&] {
    f.det.write_reg(spec::kRegExcEnable, pc::exc_bit(spec::kExcOverflow) | pc::exc_bit(spec::kExcInvalid));
    // A block whose first offending element (85) is an underflow, with an overflow at 40000 and
    // a NaN produced at 50000: the latch names the overflow and its element, not element 85.
    auto ev = event(spec::kExcUnderflow, 85, 7, 10);
    ev.kind_mask |= pc::exc_bit(spec::kExcOverflow) | pc::exc_bit(spec::kExcInvalid);
    ev.kind_first[spec::kExcOverflow] = 40000;
    ev.kind_first[spec::kExcInvalid] = 50000;
    ev.status |= spec::kFsOverflow | spec::kFsInvalid;
    f.det.report(ev);
    EXPECT_EQ((f.det.read_reg(spec::kRegExcStatus) >> 8) & 0xFF, static_cast<std::uint32_t>(spec::kExcOverflow));
    EXPECT_EQ(f.det.read_reg(spec::kRegExcElemLo), 40000u);
  });
  sc_core::sc_start();
}

TEST(DetectionCircuit, CountersSaturateAndCountDisabledKinds) {
  Fixture f;
  spawn([&] {
    f.det.write_reg(spec::kRegExcEnable, pc::exc_bit(spec::kExcNanInput));
    EXPECT_EQ(f.det.read_reg(spec::kRegExcEnable), pc::exc_bit(spec::kExcNanInput));
    f.det.report(event(spec::kExcOverflow, 0, 1, 1, 5));
    f.det.report(event(spec::kExcOverflow, 0, 1, 1, 0));  // a kind bit with no count counts 1
    EXPECT_EQ(f.det.read_reg(spec::kRegExcCountBase + 4 * spec::kExcOverflow), 6u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcStatus), 0u) << "overflow is not enabled: no latch";
    f.det.report(event(spec::kExcUnderflow, 0, 1, 1, 0xFFFFFFF0ull));
    f.det.report(event(spec::kExcUnderflow, 0, 1, 1, 0x100));
    EXPECT_EQ(f.det.read_reg(spec::kRegExcCountBase + 4 * spec::kExcUnderflow), 0xFFFFFFFFu);
    // An event with two kinds whose first element's kind is disabled latches the enabled kind.
    auto ev = event(spec::kExcOverflow, 3, 7, 1);
    ev.kind_mask |= pc::exc_bit(spec::kExcNanInput);
    f.det.report(ev);
    EXPECT_EQ((f.det.read_reg(spec::kRegExcStatus) >> 8) & 0xFF, static_cast<std::uint32_t>(spec::kExcNanInput));
    f.det.write_reg(spec::kRegExcCountClear, 1);
    for (std::uint32_t k = 0; k < spec::kExcKindCount; ++k)
      EXPECT_EQ(f.det.read_reg(spec::kRegExcCountBase + 4 * k), 0u);
  });
  sc_core::sc_start();
  EXPECT_EQ(f.deliveries.size(), 1u);
}

TEST(DetectionCircuit, ExceptionInterruptReachesHostAfterLatency) {
  Fixture f;
  spawn([&] {
    sc_core::wait(ns(50));
    // The offending tile completed at cycle 300 (a core running ahead in decoupled time).
    f.det.report(event(spec::kExcNanInput, 17, 3, 300));
    f.det.report(event(spec::kExcNanInput, 18, 3, 400));  // only sets "more"
  });
  sc_core::sc_start();
  ASSERT_EQ(f.deliveries.size(), 1u);
  EXPECT_EQ(f.deliveries[0], 300'000u + 700'000u);
  EXPECT_EQ(f.irq.raw(), spec::kIrqException);
}
