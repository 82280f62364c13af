// `probelab compare`: msprobe's compare table (printed, CSV, JSON) with configurable tolerances,
// between two probelab runs and between an msprobe dump (as from real hardware) and a simulated
// run; NaN/Inf on one side only in statistics captures; only a run's own dumps are read; foreign
// manifests are named errors (exit 2).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/npy.h"
#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

using test::run;

std::string scenario(const std::string& name, const std::string& extra) {
  return "name: " + name + "\nmodel: tinynet.yaml\nchip: tiny\nseed: 3\nsteps: 2\nprobes:\n  mode: full\n" +
         "  watch_points: [\"*\"]\n" + extra;
}

const json* row(const json& table, const std::string& npu_name, int step) {
  for (const auto& r : table["rows"])
    if (r["NPU Name"] == npu_name && r["step"] == step) return &r;
  return nullptr;
}

TEST(CompareTable, RunsPerTensorWithMsprobeColumnsAndTolerances) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("a.yaml", scenario("a", ""));
  dir.write("b.yaml", scenario("b", "injections:\n  - {kind: nan, op: relu, element: 5, step: 1}\n"));
  ASSERT_EQ(run("run a.yaml b.yaml --out out --no-trace --no-baseline", dir).code, 0);
  test::CmdResult r = run("compare out/a out/a", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Accuracy Reached or Not"), std::string::npos) << r.out;
  r = run("compare out/a out/b --output tbl", dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("first divergent op: relu (step 1"), std::string::npos) << r.out;
  const std::string csv = test::slurp(dir.path() / "tbl/compare_result.csv");
  EXPECT_EQ(csv.rfind("rank,step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Cosine,"
                      "EucDist,MaxAbsErr,MaxRelativeErr,One Thousandth Err Ratio,Five Thousandths Err Ratio",
                      0),
            0u);
  const json t = json::parse(test::slurp(dir.path() / "tbl/compare_result.json"));
  const json* clean = row(t, "relu out0", 0);
  ASSERT_NE(clean, nullptr);
  EXPECT_EQ((*clean)["Accuracy Reached or Not"], "Yes");
  EXPECT_EQ((*clean)["Cosine"], 1.0);
  EXPECT_EQ((*clean)["EucDist"], 0.0);
  const json* bad = row(t, "relu out0", 1);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ((*bad)["Accuracy Reached or Not"], "No");
  EXPECT_NE((*bad)["Err_message"].get<std::string>().find("NaN/Inf on one side only"), std::string::npos);
  EXPECT_EQ(t["not_reached"].get<int>() + t["reached"].get<int>(), static_cast<int>(t["rows"].size()));

  // Tolerances: a run on another seed differs everywhere; loose bounds accept it, tight ones do not.
  dir.write("c.yaml", scenario("c", "").replace(scenario("c", "").find("seed: 3"), 7, "seed: 4"));
  ASSERT_EQ(run("run c.yaml --out out --no-trace --no-baseline", dir).code, 0);
  EXPECT_EQ(run("compare out/a out/c --output t1", dir).code, 1);
  EXPECT_EQ(run("compare out/a out/c --output t2 --cosine -1 --cosine-hard -1 --max-abs-err-hard 1e9", dir).code, 0);
}

// Statistics-mode runs (the default probe mode) carry no tensors: a NaN or Inf on one side only is
// "No" from the captures' NaN and Inf counts, as for tensors, and the runs differ (exit 1).
TEST(CompareTable, StatisticsCapturesWithNanOrInfOnOneSideOnlyAreNotReached) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  const auto stats = [](const std::string& name, const std::string& extra) {
    std::string s = scenario(name, extra);
    return s.replace(s.find("mode: full"), 10, "mode: statistics");
  };
  dir.write("a.yaml", stats("a", ""));
  dir.write("b.yaml", stats("b", "injections:\n  - {kind: nan, op: relu, element: 5, step: 1}\n"));
  dir.write("c.yaml", stats("c", "injections:\n  - {kind: inf, op: fc1_bias, element: 2, step: 0}\n"));
  ASSERT_EQ(run("run a.yaml b.yaml c.yaml --out out --no-trace --no-baseline", dir).code, 0);
  test::CmdResult r = run("compare out/a out/b --output tb", dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("first divergent op: relu (step 1"), std::string::npos) << r.out;
  json t = json::parse(test::slurp(dir.path() / "tb/compare_result.json"));
  const json* bad = row(t, "relu out0", 1);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ((*bad)["Accuracy Reached or Not"], "No") << bad->dump();
  EXPECT_NE((*bad)["Err_message"].get<std::string>().find("NaN/Inf on one side only (NaN count 0 vs 1"), std::string::npos)
      << bad->dump();
  const json* clean = row(t, "relu out0", 0);
  ASSERT_NE(clean, nullptr);
  EXPECT_EQ((*clean)["Accuracy Reached or Not"], "Yes");
  EXPECT_NE((*clean)["Err_message"].get<std::string>().find("largest relative statistics difference 0 ("), std::string::npos)
      << clean->dump();
  // An Inf on one side, at another op and step.
  r = run("compare out/c out/a --output tc", dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  t = json::parse(test::slurp(dir.path() / "tc/compare_result.json"));
  const json* inf = row(t, "fc1_bias out0", 0);
  ASSERT_NE(inf, nullptr);
  EXPECT_EQ((*inf)["Accuracy Reached or Not"], "No") << inf->dump();
  EXPECT_NE((*inf)["Err_message"].get<std::string>().find("Inf count 1 vs 0"), std::string::npos) << inf->dump();
  // The same NaN on both sides agrees.
  r = run("compare out/b out/b --output tbb", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

// Only a run's own dumps are compared: not a replay's written into it, nor `dump decode`'s
// default output beside its manifests.
TEST(CompareTable, OnlyTheRunsOwnDumpsAreCompared) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("a.yaml", scenario("a", "checkpoints: {every: 1}\n"));
  ASSERT_EQ(run("run a.yaml --out x --no-trace --no-baseline", dir).code, 0);
  ASSERT_EQ(run("run a.yaml --out y --no-trace --no-baseline", dir).code, 0);
  // "N tensors compared: R reached, ... only in B"
  const auto counts = [](const std::string& out) {
    const auto at = out.rfind('\n', out.find(" tensors compared"));
    return out.substr(at + 1, out.find("; table in") - at - 1);
  };
  const std::string clean = counts(run("compare x/a y/a --output c0", dir).out);
  EXPECT_NE(clean.find("0 only in A, 0 only in B"), std::string::npos) << clean;
  run("replay y/a --from-step 1 --set 'injections=[{kind: nan, op: relu, element: 3, step: 1}]'", dir);
  ASSERT_TRUE(fs::exists(dir.path() / "y/a/replay.step1/a/dump/rank0/dump.json"));
  ASSERT_EQ(run("dump decode y/a", dir).code, 0);
  ASSERT_TRUE(fs::exists(dir.path() / "y/a/dump/rank0/decoded/dump.json"));
  const test::CmdResult r = run("compare x/a y/a --output c1", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(counts(r.out), clean);
  EXPECT_EQ(counts(run("compare y/a x/a --output c2", dir).out), clean);
}

TEST(CompareTable, MsprobeDumpAgainstASimulatedRun) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("sim.yaml", scenario("sim", ""));
  ASSERT_EQ(run("run sim.yaml --out out --no-trace --no-baseline", dir).code, 0);
  // An msprobe dump (task tensor, file_format npy) of the same network: the first MatMul as the
  // device computed it, a ReLU off by 0.5 in one element, a .pt tensor (statistics only).
  const fs::path rank0 = dir.path() / "hw/step0/rank0", data = rank0 / "dump_tensor_data";
  fs::create_directories(data);
  const fs::path sim0 = dir.path() / "out/sim/dump/rank0/step0";
  const graph::Tensor mm = graph::read_npy((sim0 / "fc1.out0.npy").string());
  graph::write_npy((data / "Functional.matmul.0.forward.output.0.npy").string(), mm);
  graph::Tensor relu = graph::read_npy((sim0 / "relu.out0.npy").string());
  auto v = relu.to_f64();
  v[3] += 0.5;
  graph::write_npy((data / "Functional.relu.0.forward.output.0.npy").string(),
                   graph::Tensor::from_f64(relu.shape(), v, relu.dtype()));
  json stats_only = {{"type", "torch.Tensor"}, {"dtype", "torch.float16"}, {"shape", {4, 4}}, {"Max", 1.0}, {"Min", 0.0},
                     {"Mean", 0.5}, {"Norm", 2.0}, {"data_name", "Tensor.matmul.1.forward.output.0.pt"}};
  auto entry = [](const std::string& name, const graph::Tensor& t) {
    return json{{"type", "torch.Tensor"}, {"dtype", "torch.float16"}, {"shape", t.shape()}, {"data_name", name}};
  };
  json dump = {{"task", "tensor"}, {"level", "L1"}, {"framework", "pytorch"}, {"dump_data_dir", data.string()},
               {"data",
                {{"Functional.matmul.0.forward",
                  {{"input_args", json::array()}, {"input_kwargs", json::object()},
                   {"output", {entry("Functional.matmul.0.forward.output.0.npy", mm)}}}},
                 {"Functional.relu.0.forward",
                  {{"input_args", json::array()}, {"output", {entry("Functional.relu.0.forward.output.0.npy", relu)}}}},
                 {"Tensor.matmul.1.forward", {{"input_args", json::array()}, {"output", {stats_only}}}}}}};
  std::ofstream(rank0 / "dump.json") << dump.dump(1);

  const test::CmdResult r = run("compare hw out/sim --json --output tbl", dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const json t = json::parse(r.out)["table"];
  ASSERT_EQ(t["rows"].size(), 3u) << t.dump(1);
  const json* m = row(t, "Functional.matmul.0.forward.output.0", 0);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ((*m)["Bench Name"], "fc1 out0");
  EXPECT_EQ((*m)["Accuracy Reached or Not"], "Yes");
  const json* rl = row(t, "Functional.relu.0.forward.output.0", 0);
  ASSERT_NE(rl, nullptr);
  EXPECT_EQ((*rl)["Bench Name"], "relu out0");
  EXPECT_NEAR((*rl)["MaxAbsErr"].get<double>(), 0.5, 1e-3);
  EXPECT_NEAR((*rl)["EucDist"].get<double>(), 0.5, 1e-3);
  EXPECT_LT((*rl)["One Thousandth Err Ratio"].get<double>(), 1.0);
  const json* pt = row(t, "Tensor.matmul.1.forward.output.0", 0);
  ASSERT_NE(pt, nullptr);
  EXPECT_EQ((*pt)["Bench Name"], "fc2 out0");
  EXPECT_TRUE((*pt)["Cosine"].is_null());
  EXPECT_NE((*pt)["Err_message"].get<std::string>().find("needs torch"), std::string::npos);
}

TEST(CompareTable, ForeignOrCorruptManifestsAreNamedErrors) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("a.yaml", scenario("a", ""));
  ASSERT_EQ(run("run a.yaml --out out --no-trace --no-baseline", dir).code, 0);
  fs::create_directories(dir.path() / "empty_manifest");
  dir.write("empty_manifest/dump.json", "{}");
  test::CmdResult r = run("compare out/a empty_manifest", dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("empty_manifest/dump.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("foreign manifest"), std::string::npos) << r.err;
  fs::create_directories(dir.path() / "broken");
  dir.write("broken/dump.json", "{\"format_version\": 1, \"entries\": [");
  r = run("compare out/a broken", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("broken/dump.json"), std::string::npos) << r.err;
  EXPECT_EQ(run("compare out/a nowhere", dir).code, 2);
}

}  // namespace
}  // namespace probelab::sim
