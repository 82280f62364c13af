// --json on the subcommands that print results: list and show give the same facts as their text.
#include <gtest/gtest.h>
#include <map>
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

TEST(JsonOutput, ListChipsGivesEveryPresetWithItsKeyParameters) {
  TempDir dir;
  const json chips = run_json("list chips --json", dir)["chips"];
  std::map<std::string, json> by_name;
  for (const auto& p : chips["presets"]) by_name[p["name"].get<std::string>()] = p;
  for (const char* n : {"ascend910", "ascend910b", "ascend910b1", "ascend910b2", "ascend910b4", "ascend910b_coupled", "tiny"}) {
    ASSERT_TRUE(by_name.count(n)) << n;
    EXPECT_FALSE(by_name[n]["summary"].get<std::string>().empty()) << n;
    EXPECT_TRUE(by_name[n]["key"].contains("vector_cores")) << n;
  }
  EXPECT_EQ(by_name["ascend910b1"]["key"]["num_cores"], "24");
  EXPECT_EQ(by_name["ascend910b1"]["key"]["vector_cores"], "48");
  EXPECT_EQ(by_name["ascend910b1"]["key"]["clock_mhz"], "1850");
  EXPECT_EQ(by_name["ascend910b1"]["key"]["l2_bytes"], "201326592");
  EXPECT_NEAR(by_name["ascend910b1"]["peak_cube_tflops"].get<double>(), 363.7248, 1e-6);
  EXPECT_EQ(by_name["ascend910b4"]["key"]["num_cores"], "20");
  EXPECT_EQ(by_name["ascend910"]["key"]["fp_mode"], "saturation");
  EXPECT_EQ(by_name["ascend910"]["key"]["supports_inf_nan"], "false");
  // The text form lists the same presets with the same figures.
  const test::CmdResult text = test::run("list chips", dir);
  EXPECT_NE(text.out.find("ascend910b1: Atlas A2 910B1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("peak Cube FP16 363.7 TFLOPS"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("vector_cores=40"), std::string::npos) << text.out;
  // The cluster parameters, in both forms.
  std::map<std::string, json> cluster;
  for (const auto& p : chips["cluster_params"]) cluster[p["name"].get<std::string>()] = p;
  for (const char* n : {"chips_per_server", "nic_bandwidth_gbps", "switch", "spines", "oversubscription"})
    EXPECT_TRUE(cluster.count(n)) << n;
  EXPECT_EQ(cluster["chips_per_server"]["default"], "8");
  EXPECT_NE(text.out.find("cluster parameters (scenario `cluster: {name: value}`"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("oversubscription"), std::string::npos) << text.out;
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
