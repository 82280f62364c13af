// The propagation graph of a report's anomalies: every anomaly's propagation_path (source first)
// becomes a chain of nodes (op, step, rank) joined by edges; the graph is the union of the chains.
// A path element is an op name (it inherits the anomaly's step and rank), "op@STEP", or an object
// {op, step?, rank?, role?}; a node's role is the strongest one seen for it: source, carrier,
// propagation, then any other role a report names, then "path" (an op on a path that latched
// nothing itself). Runs of plain path nodes are folded into one "+N ops" node; ranks whose lanes
// show the same thing (same ops, steps, roles and edges) share one lane. Drawn as inline
// SVG: columns by causal depth, one lane per rank, so propagation across steps runs left to right
// and a collective carrying a value to its peers crosses lanes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::html {

struct GraphNode {
  std::string op;
  std::int64_t step = -1, rank = -1;  // -1: unknown
  std::string role;                   // source | carrier | propagation | path | (other)
  std::vector<std::string> kinds;     // anomaly kinds latched at this node
  std::vector<std::string> folded;    // ops folded into this node ("+N ops")
  std::vector<std::int64_t> ranks;    // the ranks of a merged lane (empty: just `rank`)
  std::size_t depth = 0;              // causal depth (longest path from a root)
};

struct GraphEdge {
  std::size_t from = 0, to = 0;
};

struct PropagationGraph {
  std::vector<GraphNode> nodes;
  std::vector<GraphEdge> edges;
  std::size_t omitted = 0;  // nodes left out beyond the cap
};

/// Builds the graph of `anomalies` (report.json's list; condition entries are ignored), at most
/// `max_nodes` nodes (sources first, then carriers, then the others in order of appearance).
PropagationGraph build_propagation_graph(const nlohmann::json& anomalies, std::size_t max_nodes = 160);

/// The graph as an inline <svg> with a legend; a note when there is nothing to draw.
std::string propagation_svg(const PropagationGraph& g);

}  // namespace probelab::html
