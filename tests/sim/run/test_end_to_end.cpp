// A model runs on the simulated chip through SimDevice and the host executor; its outputs match
// the FP32 CPU reference within FP16 tolerance. Each TEST elaborates its own SystemC design (one
// per process: CTest runs every TEST in its own process).
#include <cmath>

#include <gtest/gtest.h>

#include "graph/npy.h"
#include "graph/op_registry.h"
#include "sim/scenario/data_gen.h"
#include "sim/scenario/prepared_run.h"
#include "sim/run/simulation.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;


PreparedRun prepare(const TempDir& dir, const std::string& text) {
  LoadOptions o;
  o.source_root = test::source_root();
  return prepare_run(load_scenario(dir.write("s.yaml", text), o));
}

// FP32 reference feeds equal to what the device got (before its FP16 rounding).
std::map<std::string, graph::Tensor> reference_feeds(const PreparedRun& run, std::uint32_t step, std::uint32_t rank) {
  const DataGenerator gen(run.scenario.data);
  std::map<std::string, graph::Tensor> feeds;
  for (const auto& name : run.workload.data_inputs) {
    graph::TensorDesc d = run.workload.reference.tensor(name).desc;
    auto it = run.workload.input_inits.find(name);
    feeds.emplace(name, gen.make_input(name, d, step, rank, it == run.workload.input_inits.end() ? nullptr : &it->second));
  }
  return feeds;
}

TEST(EndToEnd, InferenceMatchesTheFp32Reference) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  const PreparedRun run = prepare(dir, "name: e2e\nmodel: tinynet.yaml\nchip: tiny\nseed: 11\n");
  SimRequest req;
  req.run = &run;
  req.probes = false;
  req.out_dir = dir.path() / "out";
  req.save_outputs = true;
  const auto res = simulate(req);
  ASSERT_EQ(res["status"], "ok") << res.dump(2);
  EXPECT_GT(res["cycles"]["total"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(res["tasks"]["kernel"].get<std::uint64_t>(), run.workload.snapshots.fused.ops().size());

  const graph::Tensor dev = graph::read_npy((req.out_dir / "outputs/rank0/fc2.npy").string());
  EXPECT_EQ(dev.dtype(), graph::DType::F16);
  const auto ref = graph::run_graph_reference(run.workload.reference, reference_feeds(run, 0, 0), graph::RefPrecision::F32);
  const auto want = ref.at("fc2").to_f64();
  const auto got = dev.to_f64();
  ASSERT_EQ(got.size(), want.size());
  double max_ref = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-2 + 1e-2 * std::abs(want[i])) << "element " << i;
    max_ref = std::max(max_ref, std::abs(want[i]));
  }
  EXPECT_GT(max_ref, 0.1) << "the comparison must not be vacuous";
  // Every compute op got device cycles.
  for (const auto& op : res["ops"]) EXPECT_GT(op["cycles"].get<std::uint64_t>(), 0u) << op.dump();
}

TEST(EndToEnd, TrainingLossMatchesTheReferenceAndWeightsUpdateOnDevice) {
  TempDir dir;
  const PreparedRun run = prepare(dir, R"(name: train
model: mlp
chip: tiny
mode: training
training: {optimizer: {type: sgd, lr: 0.1}}
steps: 3
seed: 4
)");
  SimRequest req;
  req.run = &run;
  req.probes = false;
  req.out_dir = dir.path() / "out";
  const auto res = simulate(req);
  ASSERT_EQ(res["status"], "ok") << res.dump(2);
  const auto& losses = res["losses"][0];
  ASSERT_EQ(losses.size(), 3u);
  const auto ref = graph::run_graph_reference(run.workload.reference, reference_feeds(run, 0, 0), graph::RefPrecision::F32);
  const double want = ref.at(run.workload.loss).to_f64().at(0);
  EXPECT_NEAR(losses[0].get<double>(), want, 2e-2 * std::max(1.0, std::abs(want)));
  // Later steps see other data and updated weights: the loss changes and stays finite.
  EXPECT_NE(losses[1].get<double>(), losses[0].get<double>());
  for (const auto& l : losses) EXPECT_TRUE(std::isfinite(l.get<double>()));
  EXPECT_GT(res["tasks"]["kernel"].get<std::uint64_t>(), 3 * run.workload.reference.ops().size());
}

TEST(EndToEnd, DataParallelRingAllReduceKeepsRanksConsistent) {
  TempDir dir;
  const PreparedRun run = prepare(dir, R"(name: dp
model: mlp
chip: tiny
ranks: 2
mode: training
training: {optimizer: {type: sgd, lr: 0.05}, allreduce: {algorithm: ring}}
steps: 2
seed: 8
probes:
  consistency: {enabled: true, mode: statistics}
)");
  SimRequest req;
  req.run = &run;
  req.probes = true;
  req.out_dir = dir.path() / "out";
  const auto res = simulate(req);
  ASSERT_EQ(res["status"], "ok") << res.dump(2);
  const std::size_t params = run.workload.collectives.size();
  ASSERT_GT(params, 0u);
  EXPECT_EQ(res["tasks"]["collective"].get<std::size_t>(), params * 2 /*steps*/ * 2 /*ranks*/);
  // Different shards, different losses; identical reduced gradients.
  EXPECT_NE(res["losses"][0][0], res["losses"][1][0]);
  EXPECT_TRUE(res["consistency"]["checked"].get<bool>()) << res["consistency"].dump(2);
  EXPECT_TRUE(res["consistency"]["consistent"].get<bool>()) << res["consistency"].dump(2);
}

}  // namespace
}  // namespace probelab::sim
