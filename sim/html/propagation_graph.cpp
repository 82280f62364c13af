#include "sim/html/propagation_graph.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/html/html_doc.h"

namespace probelab::html {

using nlohmann::json;

namespace {

using Key = std::tuple<std::string, std::int64_t, std::int64_t>;  // op, step, rank

int role_strength(const std::string& r) {
  if (r == "source") return 4;
  if (r == "carrier") return 3;
  if (r == "propagation") return 2;
  if (r == "path" || r.empty()) return 0;
  return 1;
}

std::int64_t int_or(const json& o, const char* key, std::int64_t def) {
  if (o.is_object() && o.contains(key) && o[key].is_number_integer()) return o[key].get<std::int64_t>();
  return def;
}

/// A path element: "op", "op@STEP" or {op, step, rank}.
Key parse_element(const json& el, std::int64_t step, std::int64_t rank) {
  if (el.is_object()) return {el.value("op", std::string("?")), int_or(el, "step", step), int_or(el, "rank", rank)};
  std::string op = el.is_string() ? el.get<std::string>() : el.dump();
  if (auto at = op.rfind('@'); at != std::string::npos && at + 1 < op.size() &&
      std::all_of(op.begin() + static_cast<std::ptrdiff_t>(at) + 1, op.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    step = std::stoll(op.substr(at + 1));
    op.resize(at);
  }
  return {op, step, rank};
}

class Builder {
 public:
  std::size_t node(const Key& k) {
    auto [it, fresh] = index_.emplace(k, g_.nodes.size());
    if (fresh) {
      GraphNode n;
      std::tie(n.op, n.step, n.rank) = k;
      n.role = "path";
      g_.nodes.push_back(std::move(n));
    }
    return it->second;
  }
  void role(std::size_t i, const std::string& r) {
    if (role_strength(r) > role_strength(g_.nodes[i].role)) g_.nodes[i].role = r;
  }
  void kind(std::size_t i, const std::string& k) {
    auto& ks = g_.nodes[i].kinds;
    if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
  }
  void source_if(std::size_t i, const std::string& source_op) {
    if (!source_op.empty() && g_.nodes[i].op == source_op) role(i, "source");
  }
  void edge(std::size_t a, std::size_t b) {
    if (a != b && edges_.emplace(a, b).second) g_.edges.push_back({a, b});
  }
  PropagationGraph take() { return std::move(g_); }

 private:
  PropagationGraph g_;
  std::map<Key, std::size_t> index_;
  std::set<std::pair<std::size_t, std::size_t>> edges_;
};

/// Successors and in-degrees of every node.
struct Adjacency {
  std::vector<std::vector<std::size_t>> out;
  std::vector<std::size_t> in_deg;
};

Adjacency adjacency(const PropagationGraph& g) {
  Adjacency a{std::vector<std::vector<std::size_t>>(g.nodes.size()), std::vector<std::size_t>(g.nodes.size(), 0)};
  for (const auto& e : g.edges) {
    a.out[e.from].push_back(e.to);
    ++a.in_deg[e.to];
  }
  return a;
}

constexpr std::size_t kDrop = static_cast<std::size_t>(-1);

/// The graph with node i replaced by node target[i] (kDrop: removed): nodes kept in order,
/// edges redirected, duplicates and self-loops dropped.
PropagationGraph remap(const PropagationGraph& g, const std::vector<std::size_t>& target) {
  PropagationGraph r;
  r.omitted = g.omitted;
  std::vector<std::size_t> index(g.nodes.size(), kDrop);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (target[i] == i) {
      index[i] = r.nodes.size();
      r.nodes.push_back(g.nodes[i]);
    }
  std::set<std::pair<std::size_t, std::size_t>> seen;
  for (const auto& e : g.edges) {
    const std::size_t a = target[e.from] == kDrop ? kDrop : index[target[e.from]];
    const std::size_t b = target[e.to] == kDrop ? kDrop : index[target[e.to]];
    if (a != kDrop && b != kDrop && a != b && seen.emplace(a, b).second) r.edges.push_back({a, b});
  }
  return r;
}

/// Folds runs of plain path nodes (one edge in, one out, nothing latched) into one node each.
PropagationGraph fold_chains(const PropagationGraph& g) {
  const std::size_t n = g.nodes.size();
  const Adjacency adj = adjacency(g);
  auto plain = [&](std::size_t i) {
    return g.nodes[i].role == "path" && g.nodes[i].kinds.empty() && adj.in_deg[i] == 1 && adj.out[i].size() == 1;
  };
  std::vector<std::size_t> target(n);
  for (std::size_t i = 0; i < n; ++i) target[i] = i;
  std::vector<bool> taken(n, false);
  PropagationGraph folded = g;
  for (std::size_t u = 0; u < n; ++u) {
    if (plain(u)) continue;
    for (std::size_t v : adj.out[u]) {
      std::vector<std::size_t> run;
      for (std::size_t w = v; plain(w) && !taken[w] && run.size() < n; w = adj.out[w].front()) run.push_back(w);
      if (run.size() < 2) continue;
      GraphNode& head = folded.nodes[run.front()];
      head.folded.clear();
      for (std::size_t w : run) {
        taken[w] = true;
        target[w] = run.front();
        head.folded.push_back(g.nodes[w].op);
      }
      head.op = fmt::format("+{} ops", run.size());
    }
  }
  return remap(folded, target);
}

/// Lanes (ranks) that show the same thing -- the same ops at the same steps in the same roles,
/// joined the same way, to themselves or to the same other ranks -- become one lane listing its
/// ranks: 64 ranks that all received a NaN through the same all-reduce read as one lane.
PropagationGraph merge_lanes(const PropagationGraph& g) {
  std::map<std::int64_t, std::vector<std::size_t>> lanes;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) lanes[g.nodes[i].rank].push_back(i);
  auto where = [&](std::size_t i, std::int64_t lane) {
    const GraphNode& n = g.nodes[i];
    return fmt::format("{}@{}#{}", n.op, n.step, n.rank == lane ? std::string("self") : std::to_string(n.rank));
  };
  std::map<std::vector<std::string>, std::vector<std::int64_t>> groups;  // signature -> ranks
  for (const auto& [rank, ids] : lanes) {
    std::vector<std::string> sig;
    for (std::size_t i : ids) {
      const GraphNode& n = g.nodes[i];
      sig.push_back(fmt::format("n {}@{} {} {} {}", n.op, n.step, n.role, fmt::join(n.kinds, ","), fmt::join(n.folded, ",")));
    }
    for (const auto& e : g.edges)
      if (g.nodes[e.from].rank == rank || g.nodes[e.to].rank == rank)
        sig.push_back("e " + where(e.from, rank) + " " + where(e.to, rank));
    std::sort(sig.begin(), sig.end());
    groups[sig].push_back(rank);
  }
  std::vector<std::size_t> target(g.nodes.size());
  for (std::size_t i = 0; i < target.size(); ++i) target[i] = i;
  PropagationGraph out = g;
  for (const auto& [sig, ranks] : groups) {
    if (ranks.size() < 2) continue;
    const std::int64_t keep = ranks.front();
    // A node of a lane is its (op, folded ops, step): unique within the lane.
    auto key = [&](std::size_t i) {
      return std::make_pair(fmt::format("{}|{}", g.nodes[i].op, fmt::join(g.nodes[i].folded, ",")), g.nodes[i].step);
    };
    std::map<std::pair<std::string, std::int64_t>, std::size_t> rep;  // node key -> node of the kept lane
    for (std::size_t i : lanes[keep]) {
      rep[key(i)] = i;
      out.nodes[i].ranks = ranks;
    }
    for (std::size_t k = 1; k < ranks.size(); ++k)
      for (std::size_t i : lanes[ranks[k]]) target[i] = rep.at(key(i));
  }
  return remap(out, target);
}

/// At most `max_nodes` nodes: sources, then carriers, then the rest, each in order of appearance.
PropagationGraph cap_nodes(const PropagationGraph& g, std::size_t max_nodes) {
  if (g.nodes.size() <= max_nodes) return g;
  std::vector<std::size_t> order(g.nodes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return role_strength(g.nodes[a].role) > role_strength(g.nodes[b].role);
  });
  std::vector<std::size_t> target(g.nodes.size(), kDrop);
  for (std::size_t k = 0; k < max_nodes; ++k) target[order[k]] = order[k];
  PropagationGraph r = remap(g, target);
  r.omitted += g.nodes.size() - max_nodes;
  return r;
}

/// Longest-path depth in a deterministic topological order; nodes on a cycle go last.
void assign_depths(PropagationGraph& g) {
  const std::size_t n = g.nodes.size();
  auto [out, in_deg] = adjacency(g);
  std::set<std::size_t> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (in_deg[i] == 0) ready.insert(i);
  std::vector<bool> done(n, false);
  std::size_t max_depth = 0;
  while (!ready.empty()) {
    const std::size_t u = *ready.begin();
    ready.erase(ready.begin());
    done[u] = true;
    max_depth = std::max(max_depth, g.nodes[u].depth);
    for (std::size_t v : out[u]) {
      g.nodes[v].depth = std::max(g.nodes[v].depth, g.nodes[u].depth + 1);
      if (--in_deg[v] == 0) ready.insert(v);
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    if (!done[i]) g.nodes[i].depth = max_depth + 1;
}

}  // namespace

PropagationGraph build_propagation_graph(const json& anomalies, std::size_t max_nodes) {
  Builder b;
  if (anomalies.is_array()) {
    for (const auto& a : anomalies) {
      if (!a.is_object() || a.value("kind", std::string()) == "condition" || !a.contains("op")) continue;
      const std::int64_t step = int_or(a, "step", -1), rank = int_or(a, "rank", -1);
      std::vector<std::size_t> chain;
      if (a.contains("propagation_path") && a["propagation_path"].is_array())
        for (const auto& el : a["propagation_path"]) {
          const std::size_t i = b.node(parse_element(el, step, rank));
          if (el.is_object() && el.contains("role") && el["role"].is_string()) b.role(i, el["role"].get<std::string>());
          if (chain.empty() || chain.back() != i) chain.push_back(i);
        }
      const std::size_t own = b.node({a.value("op", std::string("?")), step, rank});
      if (chain.empty() || chain.back() != own) chain.push_back(own);
      for (std::size_t i = 1; i < chain.size(); ++i) b.edge(chain[i - 1], chain[i]);
      std::string role = a.value("role", std::string());
      if (role.empty()) role = chain.size() > 1 ? "propagation" : "source";
      b.role(own, role);
      b.kind(own, a.value("kind", std::string("?")));
      // The head of a path is the source when the anomaly names it so.
      b.source_if(chain.front(), a.value("source_op", std::string()));
    }
  }
  PropagationGraph g = cap_nodes(merge_lanes(fold_chains(b.take())), max_nodes);
  assign_depths(g);
  return g;
}

}  // namespace probelab::html
