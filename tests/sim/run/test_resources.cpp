// The resource estimate a run is checked against before it starts (sim/run/resources.h): a
// resumed run's checkpoint values count towards the host memory of its simulation, not the HBM.
#include <gtest/gtest.h>

#include "sim/run/resources.h"
#include "sim/scenario/prepared_run.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

TEST(ResourceEstimate, AResumedRunsCheckpointValuesCountTowardsHostMemory) {
  test::TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  LoadOptions o;
  o.source_root = test::source_root();
  PreparedRun run = prepare_run(
      load_scenario(dir.write("s.yaml", "name: s\nmodel: tinynet.yaml\nchip: tiny\nmode: training\nranks: 2\n"), o));
  const ResourceEstimate fresh = estimate_resources(run);

  // Two ranks' values: 256 KiB and 64 KiB + 4 KiB of FP32.
  const graph::TensorDesc big{graph::DType::F32, {256, 256}}, small{graph::DType::F32, {128, 128}},
      tiny{graph::DType::F32, {1024}};
  run.resume_values[0]["fc1/weight"] = graph::Tensor(big);
  run.resume_values[1]["fc1/weight"] = graph::Tensor(small);
  run.resume_values[1]["fc1_bias/b"] = graph::Tensor(tiny);
  const ResourceEstimate resumed = estimate_resources(run);

  EXPECT_EQ(resumed.hbm_bytes_per_rank, fresh.hbm_bytes_per_rank);
  EXPECT_EQ(resumed.host_bytes - fresh.host_bytes, 262144u + 65536u + 4096u);
}

}  // namespace
}  // namespace probelab::sim
