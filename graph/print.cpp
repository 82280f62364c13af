// Text rendering of graphs and snapshots, see print.h.
#include "graph/print.h"

#include <fmt/format.h>

namespace probelab::graph {
namespace {

std::string tensor_list(const Graph& g, const std::vector<std::string>& names, bool descs) {
  std::vector<std::string> parts;
  for (const std::string& n : names) {
    if (n.empty()) {
      parts.emplace_back("<none>");
      continue;
    }
    const TensorInfo* t = g.find_tensor(n);
    parts.push_back(descs && t ? fmt::format("{} {}", n, desc_str(t->desc)) : n);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string attrs_str(const Attrs& attrs) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : attrs) parts.push_back(fmt::format("{}={}", k, attr_value_str(v)));
  return fmt::format("{}", fmt::join(parts, " "));
}

void append_op(std::string& out, const Graph& g, const Op& op, const PrintOptions& opts, const std::string& indent) {
  out += fmt::format("{}#{} {} : {}", indent, op.id, op.name, op.type);
  if (op.direction != Direction::Forward) out += fmt::format(" [{}]", direction_name(op.direction));
  if (!op.scope.empty()) out += fmt::format("  scope={}", op.scope);
  out += '\n';
  const std::string more = indent + "    ";
  out += fmt::format("{}in:  {}\n", more, tensor_list(g, op.inputs, opts.tensors));
  out += fmt::format("{}out: {}\n", more, tensor_list(g, op.outputs, opts.tensors));
  if (opts.attrs && !op.attrs.empty()) out += fmt::format("{}attrs: {}\n", more, attrs_str(op.attrs));
  if (op.debug.sample_rate || !op.debug.capture) {
    out += more + "debug:";
    if (op.debug.sample_rate) out += fmt::format(" sample_rate={}", *op.debug.sample_rate);
    if (!op.debug.capture) out += " capture=false";
    out += '\n';
  }
  if (!op.grad_of.empty()) out += fmt::format("{}gradient of: {}\n", more, op.grad_of);
  if (!op.fused_from.empty()) out += fmt::format("{}fused from: {}\n", more, fmt::join(op.fused_from, ", "));
  if (opts.fused_bodies)
    for (const Op& inner : op.fused_body)
      out += fmt::format("{}  | {} : {} ({}) -> ({}){}\n", more, inner.name, inner.type, fmt::join(inner.inputs, ", "),
                         fmt::join(inner.outputs, ", "),
                         opts.attrs && !inner.attrs.empty() ? "  " + attrs_str(inner.attrs) : std::string());
}

}  // namespace

std::string format_graph(const Graph& g, const PrintOptions& opts) {
  std::string out = fmt::format("{}: {} ops, {} inputs, {} initializers, {} outputs\n", g.label(), g.ops().size(),
                                g.inputs().size(), g.initializers().size(), g.outputs().size());
  if (!g.inputs().empty()) {
    out += "inputs:\n";
    for (const std::string& n : g.inputs()) out += fmt::format("  {} {}\n", n, desc_str(g.tensor(n).desc));
  }
  if (!g.initializers().empty()) {
    out += "initializers:\n";
    for (const auto& [n, v] : g.initializers())
      out += fmt::format("  {} {} ({})\n", n, desc_str(v.desc()), tensor_kind_name(g.tensor(n).kind));
  }
  out += "ops (topological order):\n";
  for (std::uint32_t id : g.topo_order()) append_op(out, g, g.op(id), opts, "  ");
  if (!g.outputs().empty()) {
    out += "outputs:\n";
    for (const std::string& n : g.outputs()) {
      const TensorInfo* t = g.find_tensor(n);
      out += fmt::format("  {} {}\n", n, t ? desc_str(t->desc) : std::string("<undeclared>"));
    }
  }
  return out;
}

std::string format_snapshot_summary(const SnapshotSet& s) {
  std::string out = fmt::format("snapshots of graph '{}':\n", s.original.name());
  for (Stage st : {Stage::Original, Stage::Optimized, Stage::Fused})
    out += fmt::format("  {:<9}  {} ops\n", stage_name(st), s.at(st).ops().size());
  const auto& log = s.optimize_log;
  if (!log.folded_at_import.empty())
    out += fmt::format("optimized: {} model nodes folded into constants at import: {}\n", log.folded_at_import.size(),
                       fmt::join(log.folded_at_import, ", "));
  out += fmt::format("optimized: {} folded into constants{}{}\n", log.folded.size(), log.folded.empty() ? "" : ": ",
                     fmt::join(log.folded, ", "));
  out += fmt::format("optimized: {} dead ops eliminated{}{}\n", log.dead.size(), log.dead.empty() ? "" : ": ",
                     fmt::join(log.dead, ", "));
  std::size_t fused = 0;
  for (const Op& op : s.fused.ops()) fused += op.fused_from.empty() ? 0 : 1;
  out += fmt::format("fused: {} fused ops\n", fused);
  for (const Op& op : s.fused.ops()) {
    if (op.fused_from.empty()) continue;
    const OpProvenance p = trace_to_original(s, Stage::Fused, op.name);
    out += fmt::format("  {} : {} <- original ops {}\n", op.name, op.type, fmt::join(p.original_ops, ", "));
  }
  return out;
}

}  // namespace probelab::graph
