// The float status read the way a CANN integration reads it (probes/float_status.h) on the fake
// device: reset task, work, status task into a 64-byte device buffer, DMA back; a reset by
// another client between the overflow and the read hides the overflow unless the client guards
// against it; the loss scaler's decisions follow the status.
#include <gtest/gtest.h>

#include "chip_model/spec/float_status.h"
#include "probes/fake_device.h"
#include "probes/float_status.h"
#include "probes/loss_scaler.h"

namespace pp = probelab::probes;
namespace ps = probelab::spec;

namespace {

struct Rig {
  pp::FakeDevice dev;
  std::uint32_t next_id = 1;
  bool overflow_in_kernel = false, foreign_reset_after = false;
  Rig() {
    dev.on_kernel = [this](std::uint32_t, const ps::TaskDescriptor& t) {
      if (overflow_in_kernel && t.op_id == 7) {
        pp::FakeDevice::Exception e;
        e.kind = ps::kExcOverflow;
        e.op_id = 7;
        dev.latch_exception(e);
      }
      if (foreign_reset_after && t.op_id == 8) dev.other_client_reset();
    };
  }
  pp::FloatStatusClient client(bool guard) {
    return pp::FloatStatusClient(dev, {0, guard, false}, [this] { return next_id++; });
  }
  void kernels() {
    for (std::uint32_t op : {7u, 8u}) {
      ps::TaskDescriptor t;
      t.task_id = next_id++;
      t.op_id = op;
      dev.submit(0, t);
    }
  }
};

}  // namespace

TEST(FloatStatus, ResetTaskThenStatusTaskReadsTheOverflowThroughTheDeviceBuffer) {
  Rig r;
  r.overflow_in_kernel = true;
  auto c = r.client(false);
  c.reset(0);
  r.kernels();
  const pp::FloatStatusRead got = c.get(0);
  EXPECT_EQ(got.local.overflow, 1u);
  EXPECT_NE(got.local.status & ps::kFsOverflow, 0u);
  EXPECT_TRUE(got.found_inf);
  EXPECT_FALSE(got.recovered);
  // The tasks the client submitted: a reset, the two kernels, a status task pointing at 64 bytes.
  const auto& sub = r.dev.submitted();
  ASSERT_EQ(sub.size(), 4u);
  EXPECT_EQ(sub[0].second.kind, ps::TaskKind::FloatStatusReset);
  EXPECT_EQ(sub[3].second.kind, ps::TaskKind::FloatStatusGet);
  EXPECT_EQ(sub[3].second.args_size, 64u);
}

TEST(FloatStatus, AStatusResetByAnotherClientHidesTheOverflowFromAnUnguardedRead) {
  Rig r;
  r.overflow_in_kernel = r.foreign_reset_after = true;
  auto c = r.client(false);
  c.reset(0);
  r.kernels();
  const pp::FloatStatusRead got = c.get(0);
  EXPECT_EQ(got.local.overflow, 0u);  // the pitfall: the overflow is gone
  EXPECT_FALSE(got.found_inf);
  EXPECT_EQ(got.local.last_reset_by, ps::kResetByOther);
}

TEST(FloatStatus, TheGuardSeesTheForeignResetAndRecoversTheOverflowFromTheEventCounter) {
  Rig r;
  r.overflow_in_kernel = r.foreign_reset_after = true;
  auto c = r.client(true);
  c.reset(0);
  r.kernels();
  const pp::FloatStatusRead got = c.get(0);
  EXPECT_EQ(got.local.overflow, 0u);
  EXPECT_EQ(got.foreign_resets, 1u);
  EXPECT_EQ(got.events, 1u);
  EXPECT_TRUE(got.recovered);
  EXPECT_TRUE(got.found_inf);
}

TEST(FloatStatus, TheGuardDoesNotInventAnOverflowAfterAForeignResetOfAQuietStep) {
  Rig r;
  r.foreign_reset_after = true;
  auto c = r.client(true);
  c.reset(0);
  r.kernels();
  const pp::FloatStatusRead got = c.get(0);
  EXPECT_EQ(got.foreign_resets, 1u);
  EXPECT_EQ(got.events, 0u);
  EXPECT_FALSE(got.found_inf);
  // The next step: no foreign reset, the counters move on from the client's own reset.
  r.foreign_reset_after = false;
  r.overflow_in_kernel = true;
  c.reset(1);
  r.kernels();
  const pp::FloatStatusRead next = c.get(1);
  EXPECT_EQ(next.foreign_resets, 0u);
  EXPECT_TRUE(next.found_inf);
  EXPECT_FALSE(next.recovered);  // the status itself shows it
}

TEST(LossScaler, SkipsAndBacksOffOnOverflowGrowsAfterTheInterval) {
  pp::LossScaler s({1024.0, 0.5, 2.0, 2, 1.0});
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 2048.0);  // two good steps in a row
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 1024.0);  // the interval restarts after an overflow
  pp::LossScaler floor({2.0, 0.5, 2.0, 100, 1.0});
  floor.update(true);
  floor.update(true);
  EXPECT_EQ(floor.scale(), 1.0);  // never below min_scale
}
