#include "sim/scenario/collective_lowering.h"

#include <fmt/format.h>

#include "graph/passes.h"

namespace probelab::sim {

std::int64_t padded_length(std::int64_t numel, std::int64_t parts) { return (numel + parts - 1) / parts * parts; }

namespace {

using graph::Op;

Op stage(const Op& from, std::string name, std::string type, std::vector<std::string> in, std::vector<std::string> out,
         graph::Attrs attrs) {
  Op op;
  op.name = std::move(name);
  op.type = std::move(type);
  op.scope = from.scope;
  op.direction = from.direction;
  op.grad_of = from.grad_of;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  op.attrs = std::move(attrs);
  return op;
}

/// The stages of one hierarchical AllReduce (collective_lowering.h).
void lower(const graph::Graph& g, const Op& op, std::uint32_t ranks, std::uint32_t cps, std::vector<Op>& ops,
           std::map<std::string, graph::Tensor>& extra) {
  const graph::TensorDesc& d = g.tensor(op.inputs.at(0)).desc;
  const std::int64_t n = graph::numel(d.shape), c = cps;
  const std::uint32_t servers = ranks / cps;
  auto attr = [&](const char* k, const char* def) { return op.attr_str(k, def); };
  const std::string acc = attr("accumulation", "fp32"), reduction = attr("reduction", "mean");
  const bool reshape = d.shape.empty() || d.shape[0] % c != 0;
  const std::int64_t padded = padded_length(n, c);
  std::string x = op.inputs[0];
  if (reshape) {
    ops.push_back(stage(op, op.name + "/flat", "Reshape", {x}, {op.name + "/flat:0"},
                        {{"shape", std::vector<std::int64_t>{n}}}));
    x = op.name + "/flat:0";
    if (padded != n) {
      const std::string zeros = op.name + "/pad_zeros";
      extra[zeros] = graph::Tensor::from_f64({padded - n}, std::vector<double>(static_cast<std::size_t>(padded - n), 0.0), d.dtype);
      ops.push_back(stage(op, op.name + "/pad", "Concat", {x, zeros}, {op.name + "/pad:0"}, {{"axis", std::int64_t{0}}}));
      x = op.name + "/pad:0";
    }
  }
  const std::string rs = op.name + "/intra_rs:0", ar = op.name + "/inter:0";
  const std::string ag = reshape ? op.name + "/intra_ag:0" : op.outputs.at(0);
  ops.push_back(stage(op, op.name + "/intra_rs", "ReduceScatter", {x}, {rs},
                      {{"reduction", std::string("sum")}, {"algorithm", std::string("ring")}, {"accumulation", acc},
                       {"comm", std::string("server")}, {"ranks", std::int64_t{cps}}}));
  graph::Attrs inter = {{"reduction", reduction},
                        {"algorithm", attr("inter_algorithm", "ring")},
                        {"accumulation", acc},
                        {"order", attr("order", "arrival")},
                        {"comm", std::string("peers")},
                        {"ranks", std::int64_t{servers}}};
  if (reduction == "mean") inter["divisor"] = std::int64_t{ranks};
  ops.push_back(stage(op, op.name + "/inter", "AllReduce", {rs}, {ar}, std::move(inter)));
  ops.push_back(stage(op, op.name + "/intra_ag", "AllGather", {ar}, {ag},
                      {{"algorithm", std::string("ring")}, {"comm", std::string("server")}, {"ranks", std::int64_t{cps}},
                       {"replicas", std::string("world")}}));
  if (!reshape) return;
  std::string y = ag;
  if (padded != n) {
    ops.push_back(stage(op, op.name + "/unpad", "Slice", {y}, {op.name + "/unpad:0"},
                        {{"starts", std::vector<std::int64_t>{0}}, {"ends", std::vector<std::int64_t>{n}},
                         {"axes", std::vector<std::int64_t>{0}}}));
    y = op.name + "/unpad:0";
  }
  ops.push_back(stage(op, op.name + "/shape", "Reshape", {y}, {op.outputs.at(0)}, {{"shape", d.shape}}));
}

}  // namespace

graph::Graph lower_hierarchical(const graph::Graph& g, std::uint32_t ranks, std::uint32_t cps) {
  bool any = false;
  for (const Op& op : g.ops()) any = any || (op.type == "AllReduce" && op.attr_str("algorithm", "ring") == "hierarchical");
  if (!any) return g;
  std::vector<Op> ops;
  std::map<std::string, graph::Tensor> extra;
  for (const Op& op : g.ops()) {
    if (op.type != "AllReduce" || op.attr_str("algorithm", "ring") != "hierarchical") {
      ops.push_back(op);
      continue;
    }
    if (op.attr_str("comm", "world") != "world")
      throw graph::GraphError(fmt::format("AllReduce '{}': algorithm hierarchical needs comm world", op.name));
    if (ranks <= cps || cps == 1) {
      Op flat = op;
      flat.attrs["algorithm"] = cps == 1 ? op.attr_str("inter_algorithm", "ring") : std::string("ring");
      ops.push_back(std::move(flat));
      continue;
    }
    lower(g, op, ranks, cps, ops, extra);
  }
  for (auto& op : ops) op.id = 0;
  return graph::rebuild_graph(g, std::move(ops), extra);
}

}  // namespace probelab::sim
