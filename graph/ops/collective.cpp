// Collectives as graph ops: AllReduce, ReduceScatter, AllGather, Broadcast. The host executor
// compiles each into a Collective task (chip_model/spec/collective_args.h) that every rank of the
// communicator issues; the chips' collective engines run it over the cluster network.
//
// On one rank's data a collective is not defined (its result depends on every rank), so these ops
// have no CPU reference kernel: reference comparisons skip them and the cross-rank consistency
// check covers them. Shapes: AllReduce and Broadcast keep the input's; ReduceScatter divides the
// leading dimension by the group size (`ranks`), AllGather multiplies it.
//
// Gradients are the transposes of the collectives for a job whose objective is the sum of the
// ranks' losses (SPMD autodiff, as JAX transposes psum / all_gather), with n = `ranks`:
//   AllGather            dX = ReduceScatter(sum, dY); with grad_reduction "mean",
//                        ReduceScatter(mean, dY): for consumers every rank runs on the same
//                        values (tensor parallelism's replicated layers: every rank's dY is the
//                        same), each rank's own block of dY, as Megatron's split does
//   ReduceScatter(sum)   dX = AllGather(dY)
//   ReduceScatter(mean)  dX = AllGather(dY) / n
//   AllReduce(sum)       dX = AllReduce(sum, dY)
//   AllReduce(mean)      dX = AllReduce(mean, dY)
//   Broadcast            dX = Reduce(sum, dY) to the root: the root's X gets the sum of every
//                        rank's dY, the others' X none (it does not reach Y). The chip has no
//                        Reduce: dY is padded into block `root` of n blocks along the leading dim
//                        (zeros elsewhere) and ReduceScatter(sum) hands rank i block i of the sum,
//                        the root Σ dY, every other rank zeros (n times the data of a Reduce, the
//                        same values and order of additions as a ReduceScatter of the forward
//                        op's algorithm and accumulation). Needs `ranks` and an input of rank >= 1.
// Training then averages every weight gradient over the ranks (the objective is their mean): a
// weight every rank holds by the gradient all-reduce (mean), a weight shard by 1/n
// (sim/scenario/workload.h, tensor parallelism). The gradient collectives use the forward op's
// communicator, algorithm and accumulation.
#include <cstdint>
#include <limits>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

const std::vector<std::string>& algorithms() {
  static const std::vector<std::string> a = {"ring", "tree", "direct", "hierarchical"};
  return a;
}

std::vector<AttrSpec> collective_attrs(const std::string& type, bool reduces) {
  const bool all_reduce = type == "AllReduce";
  std::vector<AttrSpec> a;
  if (reduces) a.push_back(attr_str("reduction", "mean", "\"sum\" or \"mean\""));
  a.push_back(attr_str("algorithm", "ring",
                       all_reduce ? "\"ring\", \"tree\", \"direct\" or \"hierarchical\" (intra-server reduce-scatter, "
                                    "inter-server all-reduce, intra-server all-gather; lowered into those three ops "
                                    "when the workload is built)"
                                  : "\"ring\", \"tree\" or \"direct\""));
  if (all_reduce)
    a.push_back(attr_str("inter_algorithm", "ring", "hierarchical: algorithm of the inter-server stage (ring, tree, direct)"));
  // A gather or a broadcast adds nothing: its accumulation and order are its gradient's (a ReduceScatter).
  const std::string grads = reduces ? "" : " (of its gradient, a ReduceScatter: this op adds nothing)";
  a.push_back(attr_str("accumulation", "fp32", "accumulator dtype: \"fp32\" or \"fp16\"" + grads));
  a.push_back(attr_str("order", "arrival",
                       "direct algorithm: \"arrival\" or \"group\" order of the additions on each rank" + grads));
  a.push_back(attr_str("comm", "world",
                       "communicator: \"world\" (every rank), \"server\" (the ranks of this rank's server), \"peers\" "
                       "(the ranks with this rank's chip index in every server)"));
  a.push_back(attr_int("ranks", 0, "group size (0: not fixed; ReduceScatter and AllGather need it for their shapes)"));
  a.push_back(attr_int("root", 0, "root: rank within the communicator (Broadcast; the tree root)"));
  if (reduces) a.push_back(attr_int("divisor", 0, "mean: divide the sum by this (0: the group size)"));
  if (type == "AllGather")
    a.push_back(attr_str("grad_reduction", "sum",
                         "AllGather: the reduction of the ReduceScatter that is its gradient: \"sum\" (the transpose) or "
                         "\"mean\" (every rank's dY is the same: each rank's own block of it)"));
  a.push_back(attr_str("replicas", "",
                       "ranks whose outputs the consistency check compares: \"comm\" (the communicator's members; the "
                       "default, none for ReduceScatter), \"world\" or \"none\""));
  return a;
}

void check_choice(const Op& op, const std::string& key, const std::string& v, const std::vector<std::string>& ok) {
  std::string choices;
  for (const auto& c : ok) {
    if (v == c) return;
    choices += fmt::format("{}\"{}\"", choices.empty() ? "" : ", ", c);
  }
  fail(op, "attribute '{}' is \"{}\" (expected {})", key, v, choices);
}

std::vector<TensorDesc> infer_collective(const Op& op, Descs in, bool reduces, int scale_dim0) {
  expect_inputs(op, in, 1, 1);
  expect_float(op, in[0], "input X");
  const AttrReader a(op);
  if (reduces) check_choice(op, "reduction", a.s("reduction"), {"sum", "mean"});
  const std::string algo = a.s("algorithm");
  if (op.type == "AllReduce") {
    check_choice(op, "algorithm", algo, algorithms());
    check_choice(op, "inter_algorithm", a.s("inter_algorithm"), {"ring", "tree", "direct"});
  } else {
    check_choice(op, "algorithm", algo, {"ring", "tree", "direct"});
  }
  check_choice(op, "accumulation", a.s("accumulation"), {"fp32", "fp16"});
  check_choice(op, "order", a.s("order"), {"arrival", "group"});
  check_choice(op, "comm", a.s("comm"), {"world", "server", "peers"});
  check_choice(op, "replicas", a.s("replicas"), {"", "comm", "world", "none"});
  if (op.type == "AllGather") check_choice(op, "grad_reduction", a.s("grad_reduction"), {"sum", "mean"});
  if (a.i("ranks") < 0 || a.i("root") < 0) fail(op, "attributes 'ranks' and 'root' must be >= 0");
  if (reduces && (a.i("divisor") < 0 || a.i("divisor") > std::numeric_limits<std::uint32_t>::max()))
    fail(op, "attribute 'divisor' must be in [0, {}] (0: the group size), got {}", std::numeric_limits<std::uint32_t>::max(),
         a.i("divisor"));
  TensorDesc out = in[0];
  out.format = Format::ND;
  if (scale_dim0 != 0) {
    const std::int64_t n = a.i("ranks");
    if (n <= 0 || out.shape.empty()) fail(op, "needs attribute 'ranks' > 0 and an input of rank >= 1");
    if (scale_dim0 < 0) {
      if (out.shape[0] % n != 0) fail(op, "leading dim {} is not divisible by ranks {}", out.shape[0], n);
      out.shape[0] /= n;
    } else {
      out.shape[0] *= n;
    }
  }
  return {out};
}

/// The attributes a gradient collective inherits from the forward op.
Attrs carried(const Op& op) {
  const AttrReader a(op);
  std::string algo = a.s("algorithm");
  if (algo == "hierarchical") algo = "ring";
  return {{"algorithm", algo}, {"accumulation", a.s("accumulation")}, {"order", a.s("order")},
          {"comm", a.s("comm")}, {"ranks", a.i("ranks")}, {"root", a.i("root")}};
}

std::int64_t group_size(const Op& op) {
  const std::int64_t n = AttrReader(op).i("ranks");
  if (n <= 0) fail(op, "its gradient needs attribute 'ranks' (the group size)");
  return n;
}

/// Emits `type` on dY with `attrs`, then (scale != 1) a Scale into dX.
void emit_collective_grad(GradBuilder& b, const Op& op, const std::string& type, Attrs attrs, double scale) {
  if (!b.needs(op, 0)) return;
  if (scale == 1.0) {
    b.emit(op, "", type, {b.dy(op)}, {b.dx(op, 0)}, std::move(attrs));
    return;
  }
  const std::string t = GradBuilder::temp(op, "collective");
  b.emit(op, "collective", type, {b.dy(op)}, {t}, std::move(attrs));
  b.emit(op, "", "Scale", {t}, {b.dx(op, 0)}, {{"alpha", scale}});
}

void all_reduce_grad(GradBuilder& b, const Op& op) {
  Attrs at = carried(op);
  at["reduction"] = AttrReader(op).s("reduction");
  emit_collective_grad(b, op, "AllReduce", std::move(at), 1.0);
}

void reduce_scatter_grad(GradBuilder& b, const Op& op) {
  const bool mean = AttrReader(op).s("reduction") == "mean";
  emit_collective_grad(b, op, "AllGather", carried(op), mean ? 1.0 / static_cast<double>(group_size(op)) : 1.0);
}

void all_gather_grad(GradBuilder& b, const Op& op) {
  Attrs at = carried(op);
  at["reduction"] = AttrReader(op).s("grad_reduction");
  emit_collective_grad(b, op, "ReduceScatter", std::move(at), 1.0);
}

void broadcast_grad(GradBuilder& b, const Op& op) {
  if (!b.needs(op, 0)) return;
  const std::int64_t n = group_size(op);
  const Shape& shape = b.desc(op.inputs[0]).shape;
  if (shape.empty()) fail(op, "its gradient needs an input of rank >= 1 (a scalar: reshape it to [1] first)");
  const std::int64_t root = AttrReader(op).i("root");
  if (root >= n) fail(op, "attribute 'root' {} is outside the group of {} ranks", root, n);
  const std::int64_t d0 = shape[0];
  const std::string padded = GradBuilder::temp(op, "to_root");
  b.emit(op, "to_root", "Pad", {b.dy(op)}, {padded},
         {{"pads", std::vector<std::int64_t>{root * d0, (n - 1 - root) * d0}}, {"axes", std::vector<std::int64_t>{0}}});
  Attrs at = carried(op);
  at["reduction"] = std::string("sum");
  b.emit(op, "", "ReduceScatter", {padded}, {b.dx(op, 0)}, std::move(at));
}

OpDef make(const std::string& type, const std::string& doc, bool reduces, int scale_dim0,
           decltype(OpDef::gradient) grad) {
  OpDef d;
  d.type = type;
  d.doc = doc;
  d.min_inputs = d.max_inputs = 1;
  d.num_outputs = 1;
  d.input_names = {"X"};
  d.output_names = {"Y"};
  d.attrs = collective_attrs(type, reduces);
  d.infer = [reduces, scale_dim0](const Op& op, Descs in) { return infer_collective(op, in, reduces, scale_dim0); };
  d.gradient = std::move(grad);
  return d;
}

}  // namespace

void register_collective_ops(OpRegistry& r) {
  r.add(make("AllReduce", "sum or mean of X over the ranks of the communicator, the result on every rank", true, 0,
             all_reduce_grad));
  r.add(make("ReduceScatter", "reduce X over the ranks; rank i keeps block i of the leading dim", true, -1,
             reduce_scatter_grad));
  r.add(make("AllGather", "concatenate every rank's X along the leading dim, in rank order", false, 1, all_gather_grad));
  r.add(make("Broadcast", "X of the root rank on every rank", false, 0, broadcast_grad));
}

}  // namespace probelab::graph::ops
