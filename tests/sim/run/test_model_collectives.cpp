// A model's own collectives (graph ops AllReduce, ReduceScatter, AllGather, Broadcast) as users
// write them: a Broadcast in training passes its gradient to what feeds it (a Reduce to the root,
// made of a Pad and a ReduceScatter), and a zero-element tensor through each collective runs.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;

nlohmann::json run_report(const TempDir& dir, const std::string& scenario) {
  const test::CmdResult r = test::probelab("run " + scenario + ".yaml --out out_" + scenario + " --no-trace", dir);
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  return nlohmann::json::parse(test::slurp(dir.path() / ("out_" + scenario) / scenario / "report.json"));
}

// x -> fc1 -> [Broadcast from rank 1] -> relu -> fc2 -> MSE against ones, on 2 ranks whose data are
// the same (all ones). Then the Broadcast is the identity on both ranks, and its gradient (the sum
// of both ranks' dY on the root, 2 dY, none on the other rank) averaged over the ranks by the
// weight gradient all-reduce is dY: fc1 trains exactly as without the Broadcast, bit for bit.
std::string model(bool broadcast) {
  std::string m = R"(name: m
inputs:
  - {name: x, shape: [4, 8]}
  - {name: target, shape: [4, 4]}
ops:
  - {name: fc1, type: MatMul, inputs: [x], weights: {weight: [8, 8]}}
)";
  if (broadcast) m += "  - {name: bc, type: Broadcast, attrs: {root: 1, ranks: 2, algorithm: direct}}\n";
  m += R"(  - {name: act, type: Relu}
  - {name: fc2, type: MatMul, weights: {weight: [8, 4]}}
  - {name: loss, type: MSELoss, inputs: [fc2, target]}
outputs: [loss]
)";
  return m;
}

std::string training(const std::string& name, const std::string& model_file) {
  return "name: " + name + "\nmodel: " + model_file +
         "\nchip: tiny\nmode: training\nranks: 2\nsteps: 4\nseed: 6\ndata: {generator: ones}\n"
         "training:\n  loss: model\n  optimizer: {type: sgd, lr: 0.05}\n  allreduce: {algorithm: ring, accumulation: fp32}\n";
}

TEST(ModelCollectives, ABroadcastPassesItsGradientToWhatFeedsIt) {
  TempDir dir;
  dir.write("with.yaml", training("with", "m_with.yaml"));
  dir.write("m_with.yaml", model(true));
  dir.write("without.yaml", training("without", "m_without.yaml"));
  dir.write("m_without.yaml", model(false));
  const nlohmann::json a = run_report(dir, "with"), b = run_report(dir, "without");
  ASSERT_EQ(a["losses"].size(), 2u) << a["losses"].dump();
  EXPECT_EQ(a["losses"], b["losses"]);
  // Training moved the loss (fc1 and fc2 both learn; with fc1 left untrained the losses differ).
  EXPECT_NE(a["losses"][0][0], a["losses"][0][3]) << a["losses"].dump();
  // The gradient's collectives ran: the Broadcast's, as a ReduceScatter.
  bool reduce_to_root = false;
  for (const auto& op : a["ops"])
    reduce_to_root = reduce_to_root || (op["type"] == "ReduceScatter" && op["tasks"].get<int>() == 4);
  EXPECT_TRUE(reduce_to_root) << a["ops"].dump();
}

TEST(ModelCollectives, ZeroElementTensorsGoThroughEveryCollective) {
  TempDir dir;
  dir.write("m.yaml", R"(name: m
inputs:
  - {name: x, shape: [0, 3]}
ops:
  - {name: xin, type: Relu, inputs: [x]}
  - {name: ar, type: AllReduce, inputs: [xin], attrs: {reduction: sum}}
  - {name: rs, type: ReduceScatter, inputs: [ar], attrs: {ranks: 4}}
  - {name: ag, type: AllGather, inputs: [rs], attrs: {ranks: 4}}
  - {name: bc, type: Broadcast, inputs: [ag], attrs: {root: 2}}
outputs: [bc]
)");
  dir.write("zero.yaml", "name: zero\nmodel: m.yaml\nchip: tiny\nmode: inference\nranks: 4\nsteps: 2\nseed: 1\n");
  const nlohmann::json r = run_report(dir, "zero");
  EXPECT_EQ(r["status"], "ok") << r.dump();
  EXPECT_EQ(r["tasks"]["collective"], 4 /*ops*/ * 4 /*ranks*/ * 2 /*steps*/) << r["tasks"].dump();
}

}  // namespace
}  // namespace probelab::sim
