// compare_runs on damaged manifests: every damaged file is listed, and the comparison can always
// be written as JSON, whatever bytes the damaged file held (found by fuzz_dump_manifest: a JSON
// parser's message quotes the ill-formed UTF-8 it read).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/tensor.h"
#include "probes/dump_writer.h"
#include "sim/run/run_compare.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

void write_dump(const std::filesystem::path& dir) {
  probes::DumpWriter w(dir, probes::OutputOptions{}, 0);
  probes::DumpEntry e;
  e.op = "fc1";
  e.tensor = "fc1";
  w.write_tensor(e, graph::Tensor::from_f32({2, 2}, std::vector<float>{1, 2, 3, 4}));
  w.write_manifest();
}

TEST(RunCompare, IllFormedUtf8InAManifestIsListedAndTheComparisonStillWritesAsJson) {
  test::TempDir dir;
  write_dump(dir.path() / "a");
  write_dump(dir.path() / "b");
  EXPECT_TRUE(compare_runs(dir.path() / "a", dir.path() / "b").damaged.empty());
  for (const std::string& bad : {std::string("{\"op\": \"fc\xff\xfe'\"}"), std::string("{\"op\": \"\xe2\x28\xa1\"}"),
                                std::string("\xc3")}) {
    dir.write("a/dump.json", bad);
    const RunComparison c = compare_runs(dir.path() / "a", dir.path() / "b");
    ASSERT_EQ(c.damaged.size(), 1u);
    EXPECT_EQ(c.damaged[0].file, (dir.path() / "a" / "dump.json").string());
    EXPECT_NE(c.damaged[0].problem.find("not a valid dump manifest"), std::string::npos) << c.damaged[0].problem;
    std::string text;
    ASSERT_NO_THROW(text = c.to_json().dump());
    EXPECT_EQ(nlohmann::json::parse(text).at("damaged").size(), 1u);
  }
}

}  // namespace
}  // namespace probelab::sim
