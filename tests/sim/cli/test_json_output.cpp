// --json on the subcommands that print results: list and show give the same facts as their text.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

json run_json(const std::string& args, const TempDir& dir) {
  const test::CmdResult r = test::run(args, dir);
  EXPECT_EQ(r.code, 0) << args << ": " << r.err;
  return json::parse(r.out);
}

TEST(JsonOutput, ListGivesEveryRegistryAsData) {
  TempDir dir;
  const json all = run_json("list --json", dir);
  for (const char* k : {"chips", "ops", "injectors", "probe_options", "expectations"}) EXPECT_TRUE(all.contains(k)) << k;
  bool cores = false;
  for (const auto& p : all["chips"]["params"]) cores = cores || p["name"] == "num_cores";
  EXPECT_TRUE(cores);
  bool matmul = false;
  for (const auto& o : all["ops"]) matmul = matmul || o["type"] == "MatMul";
  EXPECT_TRUE(matmul);
  bool nan = false;
  for (const auto& i : all["injectors"]) nan = nan || i["name"] == "nan";
  EXPECT_TRUE(nan);
  const json only = run_json("list ops --json", dir);
  EXPECT_EQ(only.size(), 1u);
  EXPECT_EQ(only["ops"].size(), all["ops"].size());
}

TEST(JsonOutput, ShowGivesGraphsAndTheResolvedScenario) {
  TempDir dir;
  const json m = run_json("show mlp --json", dir);
  ASSERT_TRUE(m["snapshots"].contains("fused"));
  bool fused = false;
  for (const auto& op : m["snapshots"]["fused"]["ops"]) fused = fused || op["fused_from"].size() > 1;
  EXPECT_TRUE(fused) << "the fused snapshot carries provenance";
  const json s = run_json("show 03_nan_in_softmax --json --stage original", dir);
  EXPECT_EQ(s["scenario"], "nan_in_softmax");
  EXPECT_EQ(s["resolved"]["steps"], 3);
  EXPECT_EQ(s["snapshots"].size(), 1u);
  EXPECT_GT(s["probes"]["sites"].size(), 10u);
  EXPECT_EQ(s["probes"]["format"], "probelab");
}

}  // namespace
}  // namespace probelab::sim
