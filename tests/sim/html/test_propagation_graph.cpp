// The propagation graph: chains from each anomaly's path, plain runs folded, roles by strength,
// steps and ranks from path elements, a node cap, and the SVG drawing one group per node.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "sim/html/propagation_graph.h"
#include "tests/sim/html/html_test_util.h"

namespace probelab::html {
namespace {

using nlohmann::json;

const GraphNode* find(const PropagationGraph& g, const std::string& op, std::int64_t step = -2) {
  for (const auto& n : g.nodes)
    if (n.op == op && (step == -2 || n.step == step)) return &n;
  return nullptr;
}

bool has_edge(const PropagationGraph& g, const GraphNode* a, const GraphNode* b) {
  return std::any_of(g.edges.begin(), g.edges.end(),
                     [&](const GraphEdge& e) { return &g.nodes[e.from] == a && &g.nodes[e.to] == b; });
}

TEST(PropagationGraph, ChainsFromPathsWithRoles) {
  const PropagationGraph g = build_propagation_graph(test::small_report()["anomalies"]);
  ASSERT_EQ(g.nodes.size(), 3u);  // act, fc2, loss; the condition is not a node
  const GraphNode* act = find(g, "act");
  const GraphNode* fc2 = find(g, "fc2");
  const GraphNode* loss = find(g, "loss");
  ASSERT_TRUE(act && fc2 && loss);
  EXPECT_EQ(act->role, "source");
  EXPECT_EQ(fc2->role, "path");
  EXPECT_EQ(loss->role, "propagation");
  EXPECT_EQ(loss->kinds, std::vector<std::string>{"nan_input"});
  EXPECT_EQ(act->depth, 0u);
  EXPECT_EQ(loss->depth, 2u);
  EXPECT_TRUE(has_edge(g, act, fc2));
  EXPECT_TRUE(has_edge(g, fc2, loss));
  EXPECT_EQ(g.edges.size(), 2u);
}

TEST(PropagationGraph, FoldsRunsOfPlainOps) {
  json path = json::array({"src"});
  for (int i = 0; i < 20; ++i) path.push_back("mid" + std::to_string(i));
  path.push_back("sink");
  const json an = {{{"kind", "invalid"}, {"op", "src"}, {"step", 1}, {"rank", 0}, {"role", "source"}},
                   {{"kind", "nan_input"}, {"op", "sink"}, {"step", 1}, {"rank", 0}, {"role", "propagation"},
                    {"source_op", "src"}, {"propagation_path", path}}};
  const PropagationGraph g = build_propagation_graph(an);
  ASSERT_EQ(g.nodes.size(), 3u);
  const GraphNode* fold = find(g, "+20 ops");
  ASSERT_NE(fold, nullptr);
  EXPECT_EQ(fold->folded.front(), "mid0");
  EXPECT_EQ(fold->folded.back(), "mid19");
  EXPECT_TRUE(has_edge(g, find(g, "src"), fold));
  EXPECT_TRUE(has_edge(g, fold, find(g, "sink")));
}

TEST(PropagationGraph, StepsAndRanksFromPathElementsAcrossLanes) {
  // A NaN made on rank 2 at step 0 reaches the weights through the update, the next step's
  // forward pass, and every rank through the all-reduce (a carrier).
  const json an = {
      {{"kind", "invalid"}, {"op", "fc1"}, {"step", 0}, {"rank", 2}, {"role", "source"}},
      {{"kind", "nan_input"}, {"op", "fc1"}, {"step", 1}, {"rank", 2}, {"role", "propagation"}, {"source_op", "fc1"},
       {"propagation_path", {"fc1@0", "fc1/update@0", "fc1"}}},
      {{"kind", "nan_input"}, {"op", "fc2"}, {"step", 1}, {"rank", 0}, {"role", "propagation"}, {"source_op", "fc1"},
       {"propagation_path",
        {{{"op", "fc1"}, {"step", 0}, {"rank", 2}}, {{"op", "grad/allreduce"}, {"step", 0}, {"rank", 0}, {"role", "carrier"}},
         "fc2"}}}};
  const PropagationGraph g = build_propagation_graph(an);
  const GraphNode* src = find(g, "fc1", 0);
  const GraphNode* next = find(g, "fc1", 1);
  const GraphNode* carrier = find(g, "grad/allreduce");
  ASSERT_TRUE(src && next && carrier);
  EXPECT_EQ(src->role, "source");
  EXPECT_EQ(src->rank, 2);
  EXPECT_EQ(next->role, "propagation");
  EXPECT_EQ(carrier->role, "carrier");
  EXPECT_EQ(carrier->rank, 0);
  EXPECT_EQ(find(g, "fc2")->rank, 0);
  EXPECT_TRUE(has_edge(g, src, carrier));
  EXPECT_TRUE(has_edge(g, src, find(g, "fc1/update")));
  EXPECT_GT(next->depth, src->depth);
  const std::string svg = propagation_svg(g);
  EXPECT_NE(svg.find(">rank 0<"), std::string::npos);
  EXPECT_NE(svg.find(">rank 2<"), std::string::npos);
  std::size_t groups = 0;
  for (std::size_t at = svg.find("<g class=\"node"); at != std::string::npos; at = svg.find("<g class=\"node", at + 1))
    ++groups;
  EXPECT_EQ(groups, g.nodes.size());
}

TEST(PropagationGraph, RanksThatShowTheSameShareALane) {
  // A NaN made on rank 37 reaches every rank through one all-reduce (a carrier), then each
  // rank's update: 63 identical lanes and the source's own.
  json an = {{{"kind", "invalid"}, {"op", "fc2"}, {"step", 1}, {"rank", 37}, {"role", "source"}}};
  for (int r = 0; r < 64; ++r)
    an.push_back({{"kind", "nan_input"}, {"op", "w/update"}, {"step", 1}, {"rank", r}, {"role", "propagation"},
                  {"source_op", "fc2"},
                  {"propagation_path",
                   {{{"op", "fc2"}, {"step", 1}, {"rank", 37}}, {{"op", "grad/allreduce"}, {"role", "carrier"}}, "w/update"}}});
  const PropagationGraph g = build_propagation_graph(an);
  std::set<std::int64_t> lanes;
  for (const auto& n : g.nodes) lanes.insert(n.rank);
  EXPECT_EQ(lanes, (std::set<std::int64_t>{0, 37}));
  const GraphNode* carrier = nullptr;
  for (const auto& n : g.nodes)
    if (n.op == "grad/allreduce" && n.rank == 0) carrier = &n;
  ASSERT_NE(carrier, nullptr);
  EXPECT_EQ(carrier->role, "carrier");
  EXPECT_EQ(carrier->ranks.size(), 63u);
  EXPECT_EQ(std::count(carrier->ranks.begin(), carrier->ranks.end(), 37), 0);
  EXPECT_TRUE(has_edge(g, find(g, "fc2"), carrier));
  EXPECT_EQ(g.nodes.size(), 5u);  // fc2@37, its own all-reduce and update, and the merged pair
  const std::string svg = propagation_svg(g);
  EXPECT_NE(svg.find("63 ranks"), std::string::npos);
  EXPECT_NE(svg.find("ranks 0-36, 38-63"), std::string::npos);
}

TEST(PropagationGraph, CapsTheNodeCountAndSaysSo) {
  json an = json::array();
  for (int i = 0; i < 300; ++i)
    an.push_back({{"kind", "nan_input"}, {"op", "op" + std::to_string(i)}, {"step", 0}, {"rank", i % 64},
                  {"role", "propagation"}, {"propagation_path", {"root", "op" + std::to_string(i)}}});
  an.push_back({{"kind", "invalid"}, {"op", "late_source"}, {"step", 0}, {"rank", 5}, {"role", "source"}});
  const PropagationGraph g = build_propagation_graph(an, 50);
  EXPECT_EQ(g.nodes.size(), 50u);
  EXPECT_NE(find(g, "late_source"), nullptr);  // sources are kept first
  EXPECT_GT(g.omitted, 0u);
  for (const auto& e : g.edges) EXPECT_LT(std::max(e.from, e.to), 50u);
  EXPECT_NE(propagation_svg(g).find("more nodes not drawn"), std::string::npos);
}

TEST(PropagationGraph, NothingToDraw) {
  EXPECT_TRUE(build_propagation_graph(json::array()).nodes.empty());
  EXPECT_TRUE(build_propagation_graph(json()).nodes.empty());
  EXPECT_NE(propagation_svg({}).find("nothing propagated"), std::string::npos);
}

}  // namespace
}  // namespace probelab::html
