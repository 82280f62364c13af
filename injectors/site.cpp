#include "injectors/site.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "numerics/fp16.h"
#include "numerics/bf16.h"

namespace probelab::inject {

bool SiteFilter::matches(const chip::FaultSite& s) const {
  return matches_op(s.op_id) && steps.contains(s.step) && ranks.contains(s.rank);
}

std::vector<ParamSpec> site_params(const std::string& op_default, const std::string& step_default,
                                   const std::string& rank_default) {
  return {
      {"op", "glob", op_default, "op name glob in the executed graph (e.g. 'layer2/softmax', 'conv*')"},
      {"step", "int | list of int/\"a-b\" | all", step_default, "training steps at which the fault applies"},
      {"rank", "int | list of int/\"a-b\" | all", rank_default, "ranks (chips) on which the fault applies"},
  };
}

SiteFilter read_site(const Params& p, const graph::Graph* g, std::uint32_t ranks, std::uint32_t steps,
                     const std::vector<std::string>& op_types) {
  SiteFilter f;
  const auto glob = p.str("op");
  if (glob == "*" && op_types.empty()) {
    f.any_op = true;
  } else if (g) {
    try {
      for (const auto* op : g->select_ops(glob)) {
        bool type_ok = op_types.empty();
        for (const auto& t : op_types) type_ok = type_ok || op->type == t;
        if (type_ok) f.op_ids.insert(op->id);
      }
    } catch (const graph::GraphError& e) {
      p.fail("op", e.what());
    }
    if (f.op_ids.empty()) {
      std::string some;
      int n = 0;
      for (const auto& op : g->ops()) {
        bool type_ok = op_types.empty();
        for (const auto& t : op_types) type_ok = type_ok || op.type == t;
        if (!type_ok) continue;
        if (n++ == 8) {
          some += ", ...";
          break;
        }
        some += (some.empty() ? "" : ", ") + op.name;
      }
      std::string types;
      for (const auto& t : op_types) types += (types.empty() ? "" : "/") + t;
      // Fusion renames ops: name the fused ops that hold a match, and how to reach the inner one.
      std::string fused;
      for (const auto& op : g->ops()) {
        std::string inner;
        for (const auto& from : op.fused_from)
          if (graph::glob_match(glob, from)) inner = from;
        for (const auto& body : op.fused_body)
          if (inner.empty() && graph::glob_match(glob, body.name)) inner = body.name;
        if (inner.empty()) continue;
        fused += fmt::format("{}'{}' is inside the fused op '{}' (use op: '{}'; a value fault on its intermediate: "
                             "op: '{}', tensor: output, inner: '{}')",
                             fused.empty() ? "; " : ", ", inner, op.name, op.name, op.name, inner);
      }
      p.fail("op", fmt::format("'{}' matches no {}op of the executed graph (ops: {}){}", glob,
                               types.empty() ? "" : types + " ", some.empty() ? "none" : some, fused));
    }
  } else {
    f.any_op = glob == "*";
  }
  f.steps = p.index_set("step");
  f.ranks = p.index_set("rank");
  if (!f.ranks.all && !f.ranks.values.empty() && *f.ranks.values.rbegin() >= ranks)
    p.fail("rank", fmt::format("rank {} does not exist (the scenario has {} rank(s))", *f.ranks.values.rbegin(), ranks));
  if (!f.steps.all && !f.steps.values.empty() && *f.steps.values.rbegin() >= steps)
    p.fail("step", fmt::format("step {} is never reached (the scenario runs {} step(s), numbered from 0)",
                               *f.steps.values.rbegin(), steps));
  return f;
}

std::size_t element_bits(graph::DType t) { return graph::dtype_size(t) * 8; }

std::uint64_t get_bits(std::span<const std::byte> bytes, graph::DType t, std::uint64_t index) {
  const auto sz = graph::dtype_size(t);
  if ((index + 1) * sz > bytes.size()) throw std::out_of_range("element index beyond tensor bytes");
  std::uint64_t v = 0;
  std::memcpy(&v, bytes.data() + index * sz, sz);
  return v;
}

void set_bits(std::span<std::byte> bytes, graph::DType t, std::uint64_t index, std::uint64_t bits) {
  const auto sz = graph::dtype_size(t);
  if ((index + 1) * sz > bytes.size()) throw std::out_of_range("element index beyond tensor bytes");
  std::memcpy(bytes.data() + index * sz, &bits, sz);
}

std::uint64_t encode_value(double v, graph::DType t) {
  using graph::DType;
  switch (t) {
    case DType::F64:
      return std::bit_cast<std::uint64_t>(v);
    case DType::F32:
      return std::bit_cast<std::uint32_t>(static_cast<float>(v));
    case DType::F16:
      if (std::isnan(v)) return 0x7E00;
      return num::to_f16(v).value.bits;
    case DType::BF16:
      if (std::isnan(v)) return 0x7FC0;
      return num::to_bf16(v).value.bits;
    case DType::I32:
      return static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
    case DType::I64:
      return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
    case DType::Bool:
      return v != 0 ? 1 : 0;
    case DType::I8:
      return static_cast<std::uint8_t>(static_cast<std::int8_t>(v));
    case DType::U8:
      return static_cast<std::uint8_t>(v);
  }
  return 0;
}

std::string hex_bits(std::uint64_t bits, graph::DType t) {
  return fmt::format("0x{:0{}x}", bits, graph::dtype_size(t) * 2);
}

std::string coord_str(const graph::Shape& shape, std::uint64_t linear) {
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    const auto d = shape[i] > 0 ? static_cast<std::uint64_t>(shape[i]) : 1;
    c[i] = static_cast<std::int64_t>(linear % d);
    linear /= d;
  }
  return fmt::format("[{}]", fmt::join(c, ", "));
}

const std::vector<std::string>& collective_op_types() {
  static const std::vector<std::string> t = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast"};
  return t;
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace probelab::inject
