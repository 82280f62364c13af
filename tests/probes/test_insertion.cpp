#include <algorithm>

#include <gtest/gtest.h>

#include "graph/op_registry.h"
#include "tests/probes/probe_test_util.h"
#include "probes/insertion_pass.h"
#include "probes/sampling.h"

using namespace probe_test;
using probes::CaptureMode;
using probes::ProbeConfig;
using probes::ProbeKind;

namespace {

std::vector<std::string> probe_names(const probes::InsertionResult& r) {
  std::vector<std::string> v;
  for (const auto& p : r.probes) v.push_back(p.probe_op);
  return v;
}

}  // namespace

TEST(Insertion, CaptureProbesOnSelectedOutputEdges) {
  graph::Graph g = mlp();
  const auto n = g.ops().size();
  auto cfg = ProbeConfig::from_string("watch_points: [\"fc*\", \"relu1:0\"]\nmode: statistics\n");
  auto res = probes::insert_probes(g, cfg);
  EXPECT_EQ(probe_names(res), (std::vector<std::string>{"fc1/probe_capture:out0", "relu1/probe_capture:out0",
                                                        "fc2/probe_capture:out0"}));
  ASSERT_EQ(g.ops().size(), n + 3);
  // existing ids unchanged, probes appended, one input, no outputs
  EXPECT_EQ(g.op(0).name, "fc1");
  const graph::Op& p = g.op(static_cast<std::uint32_t>(n));
  EXPECT_EQ(p.type, "ProbeCapture");
  EXPECT_EQ(p.inputs, std::vector<std::string>{"fc1:0"});
  EXPECT_TRUE(p.outputs.empty());
  EXPECT_EQ(p.attr_str("target", ""), "fc1:0");
  EXPECT_EQ(p.attr_str("target_op", ""), "fc1");
  EXPECT_EQ(p.attr_str("mode", ""), "statistics");
  EXPECT_EQ(p.attr_int("output_index"), 0);
  EXPECT_EQ(p.attr_int("is_input"), 0);
  EXPECT_EQ(p.attr_str("source_format", ""), "ND");
  EXPECT_EQ(p.attr_str("watch_point", ""), "wp0");
  EXPECT_EQ(p.scope, "model/layer1/fc1");
  EXPECT_EQ(res.after(0), std::vector<std::uint32_t>{static_cast<std::uint32_t>(n)});
  EXPECT_TRUE(res.before(0).empty());
  EXPECT_NO_THROW(g.validate());
  // probes do not change what the graph computes
  std::map<std::string, graph::Tensor> feeds{{"x", f16({2, 8}, ramp(16))}};
  auto a = graph::run_graph_reference(mlp(), feeds, graph::RefPrecision::F32);
  auto b = graph::run_graph_reference(g, feeds, graph::RefPrecision::F32);
  EXPECT_EQ(a.at("probs").to_f32(), b.at("probs").to_f32());
}

TEST(Insertion, InputsScopeDirectionAndDebugOptions) {
  graph::Graph g = mlp();
  g.ops()[1].debug.capture = false;      // add1: never probed
  g.ops()[2].debug.sample_rate = 0.25;   // relu1: per-op rate override
  auto cfg = ProbeConfig::from_string(R"(
watch_points:
  - match: "*"
    scope: "model/layer1/.*"
    data_mode: [input, output]
    sample_rate: 0.5
)");
  auto res = probes::insert_probes(g, cfg);
  EXPECT_EQ(probe_names(res), (std::vector<std::string>{"fc1/probe_capture:in0", "fc1/probe_capture:in1",
                                                        "fc1/probe_capture:out0", "relu1/probe_capture:in0",
                                                        "relu1/probe_capture:out0"}));
  for (const auto& s : res.probes) EXPECT_DOUBLE_EQ(s.sample_rate, s.target_op == "relu1" ? 0.25 : 0.5) << s.probe_op;
  EXPECT_TRUE(res.probes[0].is_input);

  graph::Graph g2 = mlp();
  auto back = ProbeConfig::from_string("watch_points: [\"*\"]\ndirection: backward\n");
  auto r2 = probes::insert_probes(g2, back);
  EXPECT_TRUE(r2.probes.empty());
  ASSERT_EQ(r2.warnings.size(), 1u);
  EXPECT_NE(r2.warnings[0].find("selects no op"), std::string::npos);
}

TEST(Insertion, OverlappingWatchPointsMergeIntoOneProbe) {
  graph::Graph g = mlp();
  auto cfg = ProbeConfig::from_string(R"(
watch_points:
  - {name: cheap, match: "fc1", mode: hash, sample_rate: 0.1}
  - {name: deep, match: "fc1:0", mode: full, sample_rate: 0.5}
)");
  auto res = probes::insert_probes(g, cfg);
  ASSERT_EQ(res.probes.size(), 1u);
  EXPECT_EQ(res.probes[0].mode, CaptureMode::Full);
  EXPECT_DOUBLE_EQ(res.probes[0].sample_rate, 0.5);
  EXPECT_EQ(res.probes[0].watch_points, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(g.op(res.probes[0].probe_op_id).attr_str("watch_point", ""), "cheap,deep");
}

TEST(Insertion, BreakpointProbesFollowTheirCapture) {
  graph::Graph g = mlp();
  auto cfg = ProbeConfig::from_string(R"(
watch_points:
  - match: softmax
    conditions: ["nan_count > 0", {when: "max > 100", actions: [stats_dump]}]
    actions: [break]
  - match: fc2
    halt_on_exception: true
)");
  auto res = probes::insert_probes(g, cfg);
  EXPECT_EQ(probe_names(res), (std::vector<std::string>{"fc2/probe_capture:out0", "fc2/probe_break:out0",
                                                        "softmax/probe_capture:out0", "softmax/probe_break:out0"}));
  const auto& brk = g.op(res.probes[3].probe_op_id);
  EXPECT_EQ(brk.type, "ProbeBreakpoint");
  EXPECT_EQ(brk.attr_str("condition", ""), "nan_count > 0");
  EXPECT_EQ(brk.attr_int("halt_on_exception"), 0);
  const auto& exc = g.op(res.probes[1].probe_op_id);
  EXPECT_EQ(exc.attr_str("condition", ""), "");
  EXPECT_EQ(exc.attr_int("halt_on_exception"), 1);
  // capture before breakpoint in the after-list of the op
  auto after = res.after(g.find_op("softmax")->id);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(g.op(after[0]).type, "ProbeCapture");
  EXPECT_EQ(g.op(after[1]).type, "ProbeBreakpoint");
  EXPECT_NO_THROW(g.validate());
}

TEST(Insertion, SyncProbesAroundCollectives) {
  ensure_allreduce();
  graph::Graph g = mlp();
  g.add_op(make_op("allreduce", "AllReduce", {"fc2:0"}, {"fc2:0/reduced"}));
  auto cfg = ProbeConfig::from_string("consistency: {reference_rank: 0, mode: hash}\n");
  auto res = probes::insert_probes(g, cfg);
  ASSERT_EQ(res.probes.size(), 2u);
  EXPECT_EQ(res.probes[0].kind, ProbeKind::Sync);
  EXPECT_EQ(res.probes[0].position, probes::ProbePosition::Before);
  EXPECT_TRUE(res.probes[0].is_input);
  EXPECT_EQ(res.probes[1].position, probes::ProbePosition::After);
  EXPECT_EQ(res.probes[1].tensor, "fc2:0/reduced");
  std::uint32_t ar = g.find_op("allreduce")->id;
  EXPECT_EQ(res.before(ar).size(), 1u);
  EXPECT_EQ(res.after(ar).size(), 1u);
  EXPECT_EQ(g.op(res.probes[0].probe_op_id).attr_str("mode", ""), "hash");
  EXPECT_NO_THROW(g.validate());
}

TEST(Insertion, DisabledConfigInsertsNothing) {
  graph::Graph g = mlp();
  auto cfg = ProbeConfig::from_string("enabled: false\nwatch_points: [\"*\"]\n");
  EXPECT_TRUE(probes::insert_probes(g, cfg).probes.empty());
  EXPECT_EQ(g.ops().size(), mlp().ops().size());
}

TEST(Sampling, DeterministicAndConvergent) {
  EXPECT_EQ(probes::splitmix64(0), 0xE220A8397B1DCDAFull);  // reference value of SplitMix64 from state 0
  EXPECT_FALSE(probes::sampled(1, "op", 3, 0, 0.0));
  EXPECT_TRUE(probes::sampled(1, "op", 3, 0, 1.0));
  int hits = 0, same = 0, rank_diff = 0, seed_diff = 0;
  const int n = 20000;
  for (int step = 0; step < n; ++step) {
    bool a = probes::sampled(7, "layer4/conv2/probe_capture:out0", step, 0, 0.1);
    hits += a;
    same += a == probes::sampled(7, "layer4/conv2/probe_capture:out0", step, 0, 0.1);
    rank_diff += a != probes::sampled(7, "layer4/conv2/probe_capture:out0", step, 1, 0.1);
    seed_diff += a != probes::sampled(8, "layer4/conv2/probe_capture:out0", step, 0, 0.1);
  }
  EXPECT_EQ(same, n);
  EXPECT_NEAR(hits / double(n), 0.1, 0.01);
  EXPECT_GT(rank_diff, n / 20);  // ranks sample independently
  EXPECT_GT(seed_diff, n / 20);
  EXPECT_EQ(probes::fnv1a64(""), 0xCBF29CE484222325ull);
}
