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

spec::ExcHit hit(std::uint64_t elem, std::uint64_t cycle, std::uint64_t count = 1, std::uint16_t slot = 1) {
  spec::ExcHit h;
  h.hit = true;
  h.element = elem;
  h.cycle = cycle;
  h.count = count;
  h.slot = slot;
  return h;
}

std::uint32_t status_of(spec::ExcKindBit kind) {
  return kind == spec::kExcOverflow   ? spec::kFsOverflow
         : kind == spec::kExcNanInput ? spec::kFsNanInput
         : kind == spec::kExcInfInput ? spec::kFsInfInput
         : kind == spec::kExcInvalid  ? spec::kFsInvalid
                                      : spec::kFsUnderflow;
}

pc::DetectionEvent event(spec::ExcKindBit kind, std::uint64_t elem, std::uint32_t op, std::uint64_t cycle,
                         std::uint64_t count = 1, std::uint32_t step = 9) {
  pc::DetectionEvent ev;
  ev.kinds[kind] = hit(elem, cycle, count);
  ev.op_id = op;
  ev.task_id = op + 1000;
  ev.core = 1;
  ev.stream = 2;
  ev.step = step;
  ev.status = status_of(kind);
  return ev;
}

std::uint32_t bank(const pc::DetectionCircuit& d, spec::ExcKindBit k, std::uint32_t reg) {
  return d.read_reg(spec::exc_latch_reg(k, reg));
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
    EXPECT_EQ(f.det.read_reg(spec::kRegExcPending), 1u << spec::kExcNanInput);
    EXPECT_EQ(bank(f.det, spec::kExcNanInput, spec::kExcLatchOpId), 2u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcCountBase + 4 * spec::kExcOverflow), 0u);
  });
  sc_core::sc_start();
}

TEST(DetectionCircuit, EachKindLatchesItsOwnFirstElement) {
  Fixture f;
  spawn([&] {
    f.det.write_reg(spec::kRegExcEnable, 0x1F);
    // One backward op's output: an FP16 underflow at element 7 and a NaN at element 70.
    pc::DetectionEvent ev = event(spec::kExcUnderflow, 7, 42, 100);
    ev.kinds[spec::kExcInvalid] = hit(70, 130, 3);
    ev.kinds[spec::kExcInvalid].value_bits = 0x7FC00000u;
    ev.kinds[spec::kExcInvalid].detail = spec::kExcDetailCompute;
    ev.kinds[spec::kExcInvalid].dtype = 1;
    ev.status |= spec::kFsInvalid;
    f.det.report(ev);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcPending), (1u << spec::kExcUnderflow) | (1u << spec::kExcInvalid));
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchElemLo), 70u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchCycleLo), 130u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchCount), 3u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchValue), 0x7FC00000u);
    const std::uint32_t st = bank(f.det, spec::kExcInvalid, spec::kExcLatchStatus);
    EXPECT_EQ(st & 1u, 1u);
    EXPECT_EQ((st >> 8) & 0xFFu, spec::kExcDetailCompute);
    EXPECT_EQ((st >> 16) & 0xFFu, 1u);
    EXPECT_EQ(bank(f.det, spec::kExcUnderflow, spec::kExcLatchElemLo), 7u);
    EXPECT_EQ(bank(f.det, spec::kExcUnderflow, spec::kExcLatchOpId), 42u);
    EXPECT_EQ(bank(f.det, spec::kExcUnderflow, spec::kExcLatchSlot), 1u);
    // Acknowledging one kind leaves the other latched.
    f.det.write_reg(spec::kRegExcAck, 1u << spec::kExcUnderflow);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcPending), 1u << spec::kExcInvalid);
    EXPECT_EQ(bank(f.det, spec::kExcUnderflow, spec::kExcLatchElemLo), 0u);
  });
  sc_core::sc_start();
  EXPECT_EQ(f.deliveries.size(), 2u) << "one interrupt per latch filled";
}

TEST(DetectionCircuit, LatchHoldsFirstEventWithMoreBitUntilAck) {
  Fixture f;
  spawn([&] {
    EXPECT_EQ(f.det.read_reg(spec::kRegExcPending), 0u);
    f.det.report(event(spec::kExcInvalid, (3ull << 32) | 77, 42, (1ull << 33) + 5));
    f.det.report(event(spec::kExcInvalid, 1, 43, 100));
    f.det.report(event(spec::kExcInvalid, 2, 44, 110));
    EXPECT_NE(f.det.read_reg(spec::kRegExcPending) & (1u << (8 + spec::kExcInvalid)), 0u);
    // Still the first one, with the reports it held back counted.
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchOpId), 42u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchTaskId), 1042u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchCore), 1u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchStream), 2u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchElemLo), 77u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchElemHi), 3u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchCycleLo), 5u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchCycleHi), 2u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchStep), 9u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchSuppressed), 2u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcSuppressedBase + 4 * spec::kExcInvalid), 2u);
    f.det.write_reg(spec::kRegExcAck, 1u << spec::kExcInvalid);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcPending), 0u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchOpId), 0u);
    // Re-armed: the next anomaly of the same step latches afresh.
    f.det.report(event(spec::kExcInvalid, 8, 45, 200));
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchOpId), 45u);
    EXPECT_EQ(bank(f.det, spec::kExcInvalid, spec::kExcLatchStatus) & 2u, 0u);
    const spec::StepStatus st = f.det.take_step_status();
    EXPECT_EQ(st.suppressed_kinds, 1u << spec::kExcInvalid);
    EXPECT_EQ(st.suppressed[spec::kExcInvalid], 2u);
    EXPECT_EQ(f.det.take_step_status().suppressed_kinds, 0u);
  });
  sc_core::sc_start();
  EXPECT_TRUE(f.det.anomaly_seen(43, 9));
  EXPECT_FALSE(f.det.anomaly_seen(43, 10));
}

TEST(DetectionCircuit, RearmingIsBoundedPerKindAndStep) {
  Fixture f;
  spawn([&] {
    EXPECT_EQ(f.det.read_reg(spec::kRegExcLimit), spec::kExcLimitReset);
    f.det.write_reg(spec::kRegExcLimit, 2);
    for (std::uint32_t op = 0; op < 5; ++op) {
      f.det.report(event(spec::kExcNanInput, op, op, 10 + op, 1, 3));
      f.det.write_reg(spec::kRegExcAck, 1u << spec::kExcNanInput);
    }
    // Two latched, three suppressed, the kind disarmed for step 3.
    EXPECT_EQ(f.det.read_reg(spec::kRegExcSuppressedBase + 4 * spec::kExcNanInput), 3u);
    EXPECT_NE(f.det.read_reg(spec::kRegExcPending) & (1u << (16 + spec::kExcNanInput)), 0u);
    // Another kind still latches.
    f.det.report(event(spec::kExcInvalid, 1, 9, 20, 1, 3));
    EXPECT_NE(f.det.read_reg(spec::kRegExcPending) & (1u << spec::kExcInvalid), 0u);
    // A report of the next step re-opens the budget.
    f.det.report(event(spec::kExcNanInput, 4, 7, 30, 1, 4));
    EXPECT_NE(f.det.read_reg(spec::kRegExcPending) & (1u << spec::kExcNanInput), 0u);
    EXPECT_EQ(bank(f.det, spec::kExcNanInput, spec::kExcLatchStep), 4u);
  });
  sc_core::sc_start();
  EXPECT_EQ(f.deliveries.size(), 4u);
}

TEST(DetectionCircuit, CountersSaturateAndCountDisabledKinds) {
  Fixture f;
  spawn([&] {
    f.det.write_reg(spec::kRegExcEnable, pc::exc_bit(spec::kExcNanInput));
    EXPECT_EQ(f.det.read_reg(spec::kRegExcEnable), pc::exc_bit(spec::kExcNanInput));
    f.det.report(event(spec::kExcOverflow, 0, 1, 1, 5));
    f.det.report(event(spec::kExcOverflow, 0, 1, 1, 0));  // a hit with no count counts 1
    EXPECT_EQ(f.det.read_reg(spec::kRegExcCountBase + 4 * spec::kExcOverflow), 6u);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcPending), 0u) << "overflow is not enabled: no latch";
    EXPECT_EQ(f.det.read_reg(spec::kRegExcSuppressedBase + 4 * spec::kExcOverflow), 0u) << "not enabled: not suppressed";
    f.det.report(event(spec::kExcUnderflow, 0, 1, 1, 0xFFFFFFF0ull));
    f.det.report(event(spec::kExcUnderflow, 0, 1, 1, 0x100));
    EXPECT_EQ(f.det.read_reg(spec::kRegExcCountBase + 4 * spec::kExcUnderflow), 0xFFFFFFFFu);
    // A report with two kinds latches the enabled one only.
    auto ev = event(spec::kExcOverflow, 3, 7, 1);
    ev.kinds[spec::kExcNanInput] = hit(4, 1);
    f.det.report(ev);
    EXPECT_EQ(f.det.read_reg(spec::kRegExcPending), 1u << spec::kExcNanInput);
    EXPECT_EQ(bank(f.det, spec::kExcNanInput, spec::kExcLatchElemLo), 4u);
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
