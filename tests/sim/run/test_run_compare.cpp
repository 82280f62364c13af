// compare_runs on damaged manifests: every damaged file is listed, and the comparison can always
// be written as JSON, whatever bytes the damaged file held (found by fuzz_dump_manifest: a JSON
// parser's message quotes the ill-formed UTF-8 it read); the first divergent op is the causally
// first across ranks.
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

// Two ranks of one program, ops `up` then `down`: rank 1's `up` and rank 0's `down` differ in b.
void write_two_ranks(const std::filesystem::path& run, bool faulted, std::uint32_t up_id, std::uint32_t down_id) {
  for (std::uint32_t rank : {0u, 1u}) {
    probes::DumpWriter w(run / "dump" / ("rank" + std::to_string(rank)), probes::OutputOptions{}, rank);
    for (const auto& [op, id] : {std::pair{"up", up_id}, std::pair{"down", down_id}}) {
      probes::DumpEntry e;
      e.op = e.tensor = op;
      e.op_id = id;
      e.step = 1;
      const bool differs = faulted && ((rank == 1 && std::string(op) == "up") || (rank == 0 && std::string(op) == "down"));
      w.write_tensor(e, graph::Tensor::from_f32({2}, std::vector<float>{1, differs ? 3.0f : 2.0f}));
    }
    w.write_manifest();
  }
}

// The first divergent op is the causally first one across ranks: rank 1's `up` runs before rank
// 0's `down`, whatever the ranks' numbers. The order is the run's executed order (report.json
// ops) when there is one, else the op_id the dump recorded.
TEST(RunCompare, FirstDivergentOpIsTheCausallyFirstAcrossRanks) {
  test::TempDir dir;
  write_two_ranks(dir.path() / "a", false, 0, 1);
  write_two_ranks(dir.path() / "b", true, 0, 1);
  RunComparison c = compare_runs(dir.path() / "a", dir.path() / "b");
  ASSERT_EQ(c.diffs.size(), 2u);
  EXPECT_EQ(c.first()->op, "up");
  EXPECT_EQ(c.first()->rank, 1u);
  // op_ids that disagree with the executed order: report.json decides.
  write_two_ranks(dir.path() / "c", false, 1, 0);
  write_two_ranks(dir.path() / "d", true, 1, 0);
  EXPECT_EQ(compare_runs(dir.path() / "c", dir.path() / "d").first()->op, "down") << "by op_id without a report";
  nlohmann::json ops = nlohmann::json::array();
  for (int rank : {0, 1})
    for (const char* op : {"up", "down"}) ops.push_back({{"op", op}, {"rank", rank}});
  dir.write("c/report.json", nlohmann::json{{"ops", ops}}.dump());
  c = compare_runs(dir.path() / "c", dir.path() / "d");
  EXPECT_EQ(c.first()->op, "up");
  EXPECT_EQ(c.first()->rank, 1u);
}

}  // namespace
}  // namespace probelab::sim
