// The PMU profiler against the in-memory FakeDevice: it reads the whole counter bank in one
// burst, assembles 64-bit counters from their low and high words, and keeps per-step deltas.
#include <gtest/gtest.h>

#include "probes/fake_device.h"
#include "probes/perf_profiler.h"

namespace pp = probelab::probes;
namespace ps = probelab::spec;

namespace {

void set_counter(pp::FakeDevice& dev, ps::PmuCounter c, std::uint64_t v) {
  dev.write_reg(ps::pmu_reg(c), static_cast<std::uint32_t>(v));
  dev.write_reg(ps::pmu_reg(c) + 4, static_cast<std::uint32_t>(v >> 32));
}

}  // namespace

TEST(PerfProfiler, StepDeltasOf64BitCounters) {
  pp::FakeDevice dev;
  set_counter(dev, ps::kPmuCubeFlops, 0xFFFF'FFF0ull);  // about to carry into the high word
  set_counter(dev, ps::kPmuHbmReadBytes, 1000);
  pp::PerfProfiler prof(dev);
  prof.step_begin(4);
  set_counter(dev, ps::kPmuCubeFlops, 0x1'0000'0010ull);
  set_counter(dev, ps::kPmuHbmReadBytes, 5096);
  prof.step_end(4);
  ASSERT_EQ(prof.steps().size(), 1u);
  const auto& s = prof.steps()[0];
  EXPECT_EQ(s.step, 4u);
  EXPECT_EQ(s.delta[ps::kPmuCubeFlops], 0x20u);
  EXPECT_EQ(s.delta[ps::kPmuHbmReadBytes], 4096u);
  EXPECT_EQ(s.delta[ps::kPmuKernelOps], 0u);
  const auto j = pp::pmu_json(s.delta);
  EXPECT_EQ(j["cube_flops"], 0x20u);
  EXPECT_EQ(j.size(), static_cast<std::size_t>(ps::kPmuCounters));
}

TEST(PerfProfiler, StepsMustBeBegunBeforeTheyEnd) {
  pp::FakeDevice dev;
  pp::PerfProfiler prof(dev);
  EXPECT_THROW(prof.step_end(0), std::logic_error);
  prof.step_begin(0);
  EXPECT_THROW(prof.step_begin(1), std::logic_error);
  EXPECT_THROW(prof.step_end(1), std::logic_error);
}
