// Pattern fusion, see passes.h.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "graph/fused_ops.h"
#include "graph/op_registry.h"
#include "graph/passes.h"

namespace probelab::graph {
namespace {

std::string canonical(const std::string& type) {
  const OpDef* def = OpRegistry::instance().find(type);
  return def ? def->type : type;
}

// Extra conditions on a chain member beyond its type.
bool accepts(const Op& op) {
  const std::string t = canonical(op.type);
  if (t == "BatchNormalization") return op.attr_int("training_mode", 0) == 0 && op.outputs.size() == 1;
  if (t == "LayerNormalization") return !op.outputs.empty();
  return true;
}

std::string common_prefix_dir(const std::vector<std::string>& names) {
  std::string p = names.front();
  for (const std::string& n : names) {
    std::size_t k = 0;
    while (k < p.size() && k < n.size() && p[k] == n[k]) ++k;
    p.resize(k);
  }
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? std::string() : p.substr(0, slash + 1);
}

std::string fused_name(const std::vector<const Op*>& chain, const std::set<std::string>& taken) {
  std::vector<std::string> names;
  for (const Op* op : chain) names.push_back(op->name);
  const std::string dir = common_prefix_dir(names);
  std::vector<std::string> tails;
  for (const std::string& n : names) tails.push_back(n.substr(dir.size()));
  const std::string base = dir + fmt::format("{}", fmt::join(tails, "+"));
  std::string name = base;
  for (int k = 2; taken.count(name); ++k) name = fmt::format("{}#{}", base, k);
  return name;
}

std::vector<std::string> split_path(const std::string& s) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t k = 0; k <= s.size(); ++k)
    if (k == s.size() || s[k] == '/') {
      parts.push_back(s.substr(start, k - start));
      start = k + 1;
    }
  return parts;
}

// Longest common leading run of '/'-separated scope components; the first scope when none.
std::string common_scope(const std::vector<const Op*>& chain) {
  std::vector<std::string> common = split_path(chain.front()->scope);
  for (const Op* op : chain) {
    const auto parts = split_path(op->scope);
    std::size_t k = 0;
    while (k < common.size() && k < parts.size() && common[k] == parts[k]) ++k;
    common.resize(k);
  }
  return common.empty() ? chain.front()->scope : fmt::format("{}", fmt::join(common, "/"));
}

// Follows the pattern from `first`; returns the chain when every condition holds.
std::vector<const Op*> match_chain(const Graph& g, const Op& first, const FusionPattern& pat,
                                   const std::vector<bool>& taken) {
  std::vector<const Op*> chain{&first};
  const std::set<std::string> outputs(g.outputs().begin(), g.outputs().end());
  for (std::size_t k = 1; k < pat.chain.size(); ++k) {
    const Op& prev = *chain.back();
    for (std::size_t i = 0; i < prev.outputs.size(); ++i) {
      if (outputs.count(prev.outputs[i])) return {};
      const auto users = g.consumers(prev.outputs[i]);
      if (i > 0 && !users.empty()) return {};
      if (i == 0 && users.size() != 1) return {};
    }
    const Op* next = g.consumers(prev.outputs[0]).front();
    if (taken[next->id] || canonical(next->type) != pat.chain[k] || !accepts(*next)) return {};
    if (std::count(next->inputs.begin(), next->inputs.end(), prev.outputs[0]) != 1) return {};
    chain.push_back(next);
  }
  return chain;
}

Op make_fused(const FusionPattern& pat, const std::vector<const Op*>& chain, const std::string& name) {
  Op f;
  f.name = name;
  f.type = pat.fused_type;
  f.scope = common_scope(chain);
  f.direction = chain.front()->direction;
  f.outputs = chain.back()->outputs;
  std::map<std::string, std::string> renamed;  // intermediate tensor -> body name
  for (std::size_t k = 0; k + 1 < chain.size(); ++k)
    for (std::size_t i = 0; i < chain[k]->outputs.size(); ++i)
      renamed[chain[k]->outputs[i]] = fmt::format("{}/{}:{}", name, chain[k]->name, i);
  for (const Op* op : chain) {
    for (const std::string& in : op->inputs)
      if (!in.empty() && !renamed.count(in) && std::find(f.inputs.begin(), f.inputs.end(), in) == f.inputs.end())
        f.inputs.push_back(in);
    if (!f.debug.sample_rate) f.debug.sample_rate = op->debug.sample_rate;
    f.debug.capture = f.debug.capture && op->debug.capture;
    f.fused_from.push_back(op->name);
    Op body = *op;
    body.id = static_cast<std::uint32_t>(f.fused_body.size());
    for (std::string& in : body.inputs)
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
    for (std::string& out : body.outputs)
      if (auto it = renamed.find(out); it != renamed.end()) out = it->second;
    f.fused_body.push_back(std::move(body));
  }
  return f;
}

}  // namespace

const std::vector<FusionPattern>& fusion_patterns() {
  static const std::vector<FusionPattern> kPatterns{
      {"FusedMatMulBiasGelu", {"MatMul", "Add", "Gelu"}},
      {"FusedLayerNormRelu", {"LayerNormalization", "Relu"}},
      {"FusedConvBnRelu", {"Conv", "BatchNormalization", "Relu"}},
  };
  return kPatterns;
}

Graph fuse_graph(const Graph& g) {
  ensure_fused_ops_registered();
  std::vector<bool> taken(g.ops().size(), false);
  std::map<std::uint32_t, Op> fused_at;  // id of the chain's last op -> fused op
  std::set<std::string> names;
  for (const Op& op : g.ops()) names.insert(op.name);
  for (std::uint32_t id : g.topo_order()) {
    const Op& op = g.ops()[id];
    if (taken[id]) continue;
    for (const FusionPattern& pat : fusion_patterns()) {
      if (canonical(op.type) != pat.chain.front() || !accepts(op)) continue;
      const auto chain = match_chain(g, op, pat, taken);
      if (chain.empty()) continue;
      const std::string name = fused_name(chain, names);
      names.insert(name);
      for (const Op* c : chain) taken[c->id] = true;
      fused_at.emplace(chain.back()->id, make_fused(pat, chain, name));
      break;
    }
  }
  std::vector<Op> ops;
  for (const Op& op : g.ops()) {
    if (auto it = fused_at.find(op.id); it != fused_at.end()) ops.push_back(std::move(it->second));
    else if (!taken[op.id]) ops.push_back(op);
  }
  return rebuild_graph(g, std::move(ops));
}

}  // namespace probelab::graph
