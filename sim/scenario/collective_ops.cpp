#include "sim/scenario/collective_ops.h"

#include <fmt/format.h>

#include "graph/op_registry.h"

namespace probelab::sim {

namespace {

using graph::AttrSpec;
using graph::GraphError;
using graph::Op;
using graph::TensorDesc;

std::vector<AttrSpec> common_attrs(bool reduces) {
  std::vector<AttrSpec> a;
  if (reduces) a.push_back({"reduction", false, graph::AttrValue{std::string("mean")}, "\"sum\" or \"mean\""});
  a.push_back({"algorithm", false, graph::AttrValue{std::string("ring")}, "\"ring\", \"tree\" or \"direct\""});
  a.push_back({"accumulation", false, graph::AttrValue{std::string("fp32")}, "accumulator dtype: \"fp32\" or \"fp16\""});
  a.push_back({"order", false, graph::AttrValue{std::string("arrival")},
               "direct algorithm: \"arrival\" or \"group\" order of the additions on each rank"});
  a.push_back({"comm", false, graph::AttrValue{std::int64_t{0}}, "communicator id"});
  a.push_back({"ranks", false, graph::AttrValue{std::int64_t{0}}, "group size (0: every rank of the job)"});
  a.push_back({"root", false, graph::AttrValue{std::int64_t{0}}, "root rank (Broadcast)"});
  return a;
}

void check_choice(const Op& op, const std::string& key, const std::string& def, std::initializer_list<const char*> ok) {
  const std::string v = op.attr_str(key, def);
  for (const char* c : ok)
    if (v == c) return;
  throw GraphError(fmt::format("{} '{}': attribute '{}' is \"{}\" (expected {})", op.type, op.name, key, v,
                               fmt::join(ok, ", ")));
}

graph::OpDef make(const std::string& type, const std::string& doc, bool reduces, int scale_dim0) {
  graph::OpDef d;
  d.type = type;
  d.doc = doc;
  d.min_inputs = d.max_inputs = 1;
  d.num_outputs = 1;
  d.input_names = {"X"};
  d.output_names = {"Y"};
  d.attrs = common_attrs(reduces);
  d.infer = [reduces, scale_dim0](const Op& op, std::span<const TensorDesc> in) {
    if (in.size() != 1) throw GraphError(fmt::format("{} '{}': expected 1 input", op.type, op.name));
    if (!graph::is_float(in[0].dtype))
      throw GraphError(fmt::format("{} '{}': input must be a float tensor", op.type, op.name));
    if (reduces) check_choice(op, "reduction", "mean", {"sum", "mean"});
    check_choice(op, "algorithm", "ring", {"ring", "tree", "direct"});
    check_choice(op, "accumulation", "fp32", {"fp32", "fp16"});
    check_choice(op, "order", "arrival", {"arrival", "group"});
    TensorDesc out = in[0];
    out.format = graph::Format::ND;
    if (scale_dim0 != 0) {
      const std::int64_t n = op.attr_int("ranks", 0);
      if (n <= 0 || out.shape.empty())
        throw GraphError(fmt::format("{} '{}': needs attribute 'ranks' > 0 and a rank >= 1 input", op.type, op.name));
      if (scale_dim0 < 0) {
        if (out.shape[0] % n != 0)
          throw GraphError(fmt::format("{} '{}': leading dim {} not divisible by ranks {}", op.type, op.name,
                                       out.shape[0], n));
        out.shape[0] /= n;
      } else {
        out.shape[0] *= n;
      }
    }
    return std::vector<TensorDesc>{out};
  };
  return d;
}

}  // namespace

const std::vector<std::string>& collective_algorithms() {
  static const std::vector<std::string> a = {"ring", "tree", "direct"};
  return a;
}

void ensure_collective_ops_registered() {
  auto& reg = graph::OpRegistry::instance();
  if (!reg.find("AllReduce"))
    reg.add(make("AllReduce", "sum or mean of X over the ranks, result on every rank", true, 0));
  if (!reg.find("ReduceScatter"))
    reg.add(make("ReduceScatter", "reduce X over the ranks; rank i keeps block i of the leading dim", true, -1));
  if (!reg.find("AllGather"))
    reg.add(make("AllGather", "concatenate every rank's X along the leading dim", false, 1));
  if (!reg.find("Broadcast")) reg.add(make("Broadcast", "X of the root rank on every rank", false, 0));
}

}  // namespace probelab::sim
