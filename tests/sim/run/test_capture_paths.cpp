// The capture paths of the chip give the same data: statistics computed by the kernels vs by
// separate capture tasks, full tensors queued by the kernels on the capture DMA engine vs copied
// by capture tasks on a core, records drained at every step end vs when buffers fill. Runs the
// probelab executable (each run elaborates its own chip) on a training scenario, so in-place
// optimizer updates run after captures of the tensors they overwrite.
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

constexpr const char* kScenario = R"(name: paths
model: mlp
chip: tiny
mode: training
training: {optimizer: {type: sgd, lr: 0.1}}
steps: 3
seed: 4
probes:
  watch_points: ["*"]
)";

struct Outcome {
  json report;
  json manifest;
  fs::path dump;
};

Outcome run(const TempDir& dir, const std::string& name, const std::string& probes) {
  dir.write(name + ".yaml", std::string(kScenario) + probes);
  const test::CmdResult r = test::run("run " + name + ".yaml --out " + name +
                                            " --no-trace --no-baseline",
                                        dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  Outcome out;
  const fs::path root = dir.path() / name / "paths";
  out.report = json::parse(test::slurp(root / "report.json"));
  out.dump = root / "dump" / "rank0";
  out.manifest = json::parse(test::slurp(out.dump / "dump.json"));
  return out;
}

/// (op, tensor, step) -> entry
std::map<std::string, json> entries(const json& manifest) {
  std::map<std::string, json> m;
  for (const auto& e : manifest["entries"])
    m[e["op"].get<std::string>() + "|" + e["tensor"].get<std::string>() + "|" + std::to_string(e["step"].get<int>())] = e;
  return m;
}

TEST(CapturePaths, KernelStatisticsEqualCaptureTaskStatistics) {
  TempDir dir;
  const Outcome kernel = run(dir, "kernel", "  mode: statistics\n");
  const Outcome tasks = run(dir, "tasks", "  mode: statistics\n  capture: {in_kernel_statistics: false, drain: step}\n");
  EXPECT_GT(kernel.report["tasks"]["in_kernel_statistics"].get<int>(), 0);
  EXPECT_EQ(kernel.report["tasks"]["probe"].get<int>(), tasks.report["tasks"]["probe"].get<int>() -
                                                            kernel.report["tasks"]["in_kernel_statistics"].get<int>());
  EXPECT_EQ(tasks.report["tasks"]["in_kernel_statistics"].get<int>(), 0);
  const auto a = entries(kernel.manifest), b = entries(tasks.manifest);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, e] : a) {
    ASSERT_TRUE(b.count(key)) << key;
    EXPECT_EQ(e["statistics"], b.at(key)["statistics"]) << key;
  }
  EXPECT_EQ(kernel.report["capture"]["dropped"], 0);
  EXPECT_EQ(kernel.report["capture"]["unaccounted"], 0);
  EXPECT_EQ(kernel.report["losses"], tasks.report["losses"]);
}

TEST(CapturePaths, KernelQueuedDumpsEqualCaptureTaskDumps) {
  TempDir dir;
  const Outcome dma = run(dir, "dma", "  mode: full\n  data_mode: all\n  capture: {buffer_bytes: 8192}\n");
  const Outcome tasks = run(dir, "tasks", "  mode: full\n  data_mode: all\n  capture: {buffer_bytes: 8192, async_full: false}\n");
  EXPECT_GT(dma.report["tasks"]["in_kernel_dumps"].get<int>(), 0);
  EXPECT_EQ(tasks.report["tasks"]["in_kernel_dumps"].get<int>(), 0);
  const auto a = entries(dma.manifest), b = entries(tasks.manifest);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, e] : a) {
    ASSERT_TRUE(b.count(key)) << key;
    ASSERT_EQ(e["payload"], "full") << key;
    EXPECT_EQ(test::slurp(dma.dump / e["file"].get<std::string>()),
              test::slurp(tasks.dump / b.at(key)["file"].get<std::string>()))
        << key;
  }
  EXPECT_EQ(dma.report["capture"]["dropped"], 0);
  EXPECT_EQ(dma.report["capture"]["unaccounted"], 0);
  EXPECT_GT(dma.report["capture"]["buffers"].get<int>(), 1) << "the 8 KiB buffers filled and were drained";
  EXPECT_EQ(dma.report["losses"], tasks.report["losses"]);
}

}  // namespace
}  // namespace probelab::sim
