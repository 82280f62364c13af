#include "sim/scenario/gradient_buckets.h"

#include <algorithm>

#include <fmt/format.h>

namespace probelab::sim {

namespace {

struct Member {
  std::string param, grad;
  std::int64_t numel = 0;
  std::uint32_t ready = 0;  // index of the gradient's producer: the backward order
};

graph::Op make_op(std::string name, std::string type, const std::string& scope, std::vector<std::string> in,
                  std::vector<std::string> out, graph::Attrs attrs) {
  graph::Op op;
  op.name = std::move(name);
  op.type = std::move(type);
  op.scope = scope;
  op.direction = graph::Direction::Backward;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  op.attrs = std::move(attrs);
  return op;
}

// The buckets: members in backward order, each bucket at most cap_bytes unless one member alone.
std::vector<std::vector<Member>> fill(std::vector<Member> members, std::int64_t cap_bytes, std::int64_t elem_bytes) {
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.ready < b.ready; });
  std::vector<std::vector<Member>> buckets;
  std::int64_t bytes = 0;
  for (Member& m : members) {
    const std::int64_t size = m.numel * elem_bytes;
    if (buckets.empty() || bytes + size > cap_bytes) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(std::move(m));
    bytes += size;
  }
  return buckets;
}

}  // namespace

GradientBuckets add_gradient_buckets(graph::Graph& g, const std::vector<std::pair<std::string, std::string>>& grads,
                                     std::int64_t cap_bytes, std::int64_t elem_bytes, const graph::Attrs& attrs) {
  std::vector<Member> members;
  for (const auto& [param, grad] : grads) {
    const graph::Op* producer = g.producer(grad);
    members.push_back(Member{param, grad, graph::numel(g.tensor(grad).desc.shape), producer ? producer->id + 1 : 0});
  }
  GradientBuckets out;
  int fused = 0;
  for (const std::vector<Member>& bucket : fill(std::move(members), cap_bytes, elem_bytes)) {
    if (bucket.size() == 1) {  // the per-parameter all-reduce
      const Member& m = bucket.front();
      const std::string reduced = m.grad + "/reduced";
      g.add_op(make_op(m.grad + "/allreduce", "AllReduce", "allreduce/" + m.param, {m.grad}, {reduced}, attrs));
      out.collectives.push_back(m.grad + "/allreduce");
      out.reduced.emplace_back(m.param, reduced);
      continue;
    }
    const std::string name = fmt::format("gradient_bucket{}", fused++), scope = "allreduce/" + name;
    std::vector<std::string> flat, split_out;
    std::vector<std::int64_t> sizes;
    for (const Member& m : bucket) {
      flat.push_back(m.grad + "/flat");
      g.add_op(make_op(m.grad + "/flat", "Reshape", scope, {m.grad}, {flat.back()},
                       {{"shape", std::vector<std::int64_t>{m.numel}}}));
      split_out.push_back(m.grad + "/reduced/flat");
      sizes.push_back(m.numel);
    }
    g.add_op(make_op(name + "/concat", "Concat", scope, flat, {name}, {{"axis", std::int64_t{0}}}));
    g.add_op(make_op(name + "/allreduce", "AllReduce", scope, {name}, {name + "/reduced"}, attrs));
    out.collectives.push_back(name + "/allreduce");
    g.add_op(make_op(name + "/split", "Split", scope, {name + "/reduced"}, split_out,
                     {{"axis", std::int64_t{0}}, {"split", sizes}}));
    for (const Member& m : bucket) {
      const std::string reduced = m.grad + "/reduced";
      g.add_op(make_op(reduced + "/shape", "Reshape", scope, {m.grad + "/reduced/flat"}, {reduced},
                       {{"shape", g.tensor(m.grad).desc.shape}}));
      out.reduced.emplace_back(m.param, reduced);
    }
  }
  return out;
}

}  // namespace probelab::sim
