// `nan`, `inf` and `value`: overwrite elements of an op's output (or input) at a step and rank.
// Propagation is then the real datapath's doing: downstream ops compute on the corrupted value.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "injectors/injector.h"
#include "injectors/site.h"

namespace probelab::inject {
namespace {

enum class Target { Output, Input };

class ValueInjector final : public Injector {
 public:
  ValueInjector(const Params& p, const InjectionEnv& env, const std::string& kind) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    site_ = read_site(p, env.executed, env.ranks, env.steps);
    target_ = p.choice("tensor", {"output", "input"}) == "output" ? Target::Output : Target::Input;
    // A collective's input is read by the collective engine straight from HBM, not loaded by a
    // core: no input hook reaches it (its result is a site, as the engine stores it).
    const auto& coll = collective_op_types();
    bool only_collectives = !site_.any_op && target_ == Target::Input;
    for (auto id : site_.op_ids)
      only_collectives = only_collectives && std::find(coll.begin(), coll.end(), env.executed->op(id).type) != coll.end();
    if (only_collectives)
      p.fail("op", fmt::format("with tensor: input matches only collective ops ({}), whose inputs the collective engine "
                               "reads from HBM itself, not loaded by an AI core: corrupt the op that produces the input "
                               "(tensor: output) or the collective's result (tensor: output)",
                               fmt::join(coll, ", ")));
    slot_ = static_cast<std::uint16_t>(p.uinteger("index"));
    count_ = p.uinteger("count");
    if (count_ == 0) p.fail("count", "must be at least 1");
    if (kind == "nan") {
      value_ = std::nan("");
    } else if (kind == "inf") {
      value_ = p.choice("sign", {"+", "-"}) == "-" ? -INFINITY : INFINITY;
    } else {
      const auto v = p.node("value");
      if (v.IsScalar() && v.Scalar() == "random_finite") {
        random_value_ = true;
      } else {
        value_ = p.number("value");
        if (!std::isfinite(value_))
          p.fail("value", fmt::format("{} is not a finite number (kind nan or inf writes those)", v.Scalar()));
      }
    }
    if (p.has("inner")) {
      inner_ = p.str("inner");
      if (target_ != Target::Output) p.fail("inner", "corrupts an intermediate of a fused op: use it with tensor: output");
      for (auto id : site_.op_ids) {
        const auto& op = env.executed->op(id);
        bool found = false;
        for (const auto& in : op.fused_body) found = found || graph::glob_match(*inner_, in.name);
        if (!found)
          p.fail("inner", fmt::format("op '{}' is not a fused op with an inner op matching '{}'", op.name, *inner_));
      }
    }
    // Resolve the element per matched op and check it exists in every matched tensor.
    const auto el = p.node("element");
    for (auto id : site_.op_ids) {
      const auto& op = env.executed->op(id);
      const auto& names = target_ == Target::Output ? op.outputs : op.inputs;
      if (slot_ >= names.size() || names[slot_].empty())
        p.fail("index", fmt::format("op '{}' has no {} {}", op.name, target_ == Target::Output ? "output" : "input", slot_));
      const auto& shape = env.executed->tensor(names[slot_]).desc.shape;
      const graph::DType dt = env.executed->tensor(names[slot_]).desc.dtype;
      if (!inner_ && !graph::is_float(dt) && kind != "value")  // no NaN or Inf in an integer or bool tensor
        p.fail("op", fmt::format("{} {} of op '{}' ('{}') is {}: it holds no {} ({} needs a float tensor)",
                                 target_ == Target::Output ? "output" : "input", slot_, op.name, names[slot_],
                                 graph::dtype_name(dt), kind == "nan" ? "NaN" : "infinity", kind));
      const auto n = static_cast<std::uint64_t>(graph::numel(shape));
      std::uint64_t e = 0;
      if (el.IsScalar() && el.Scalar() == "random") {
        e = splitmix64(seed_ ^ (0x100000000ull * id)) % n;
      } else if (el.IsSequence()) {
        const auto c = p.int_list("element");
        if (c.size() != shape.size())
          p.fail("element", fmt::format("coordinate has {} dims, tensor '{}' of op '{}' has shape {}", c.size(),
                                        names[slot_], op.name, graph::shape_str(shape)));
        for (std::size_t i = 0; i < c.size(); ++i) {
          if (c[i] < 0 || c[i] >= shape[i])
            p.fail("element", fmt::format("coordinate outside shape {} of '{}'", graph::shape_str(shape), names[slot_]));
          e = e * static_cast<std::uint64_t>(shape[i]) + static_cast<std::uint64_t>(c[i]);
        }
      } else {
        e = p.uinteger("element");
      }
      if (e + count_ > n)
        p.fail("element", fmt::format("elements [{}, {}) are outside tensor '{}' of op '{}' ({} elements, shape {})", e,
                                      e + count_, names[slot_], op.name, n, graph::shape_str(shape)));
      element_[id] = e;
      shape_[id] = shape;
    }
  }

  std::uint32_t sites() const override {
    if (inner_) return chip::kFaultFusedInner;
    return target_ == Target::Output ? chip::kFaultOpOutput : chip::kFaultOpInput;
  }

  void on_fused_inner(const chip::FaultSite& s, std::uint32_t /*inner_index*/, const std::string& inner_name,
                      std::span<float> values) override {
    if (!graph::glob_match(*inner_, inner_name)) return;
    const graph::TensorDesc d{graph::DType::F32, {static_cast<std::int64_t>(values.size())}};
    apply(s, d, 0, std::as_writable_bytes(values), ("intermediate of inner op " + inner_name).c_str());
  }

  void on_op_output(const chip::FaultSite& s, std::uint16_t index, const graph::TensorDesc& d,
                    std::uint64_t elem_offset, std::span<std::byte> bytes) override {
    if (target_ == Target::Output && index == slot_) apply(s, d, elem_offset, bytes, "output");
  }
  void on_op_input(const chip::FaultSite& s, std::uint16_t index, const graph::TensorDesc& d,
                   std::span<std::byte> bytes) override {
    if (target_ == Target::Input && index == slot_) apply(s, d, 0, bytes, "input");
  }

 private:
  void apply(const chip::FaultSite& s, const graph::TensorDesc& d, std::uint64_t offset, std::span<std::byte> bytes,
             const char* what) {
    if (!site_.matches(s)) return;
    auto it = element_.find(s.op_id);
    if (it == element_.end()) return;
    const auto n = bytes.size() / graph::dtype_size(d.dtype);
    for (std::uint64_t e = it->second; e < it->second + count_; ++e) {
      if (e < offset || e >= offset + n) continue;
      const auto local = e - offset;
      const auto before = get_bits(bytes, d.dtype, local);
      double v = value_;
      if (random_value_) {
        // A finite value with a random exponent and sign, drawn from the seed and the site.
        const auto r = splitmix64(seed_ ^ (s.step * 0x9E37ull) ^ (std::uint64_t{s.rank} << 40) ^ e);
        v = std::ldexp(1.0 + static_cast<double>(r & 0xFFFF) / 65536.0, static_cast<int>((r >> 16) % 30) - 15);
        if (r >> 63) v = -v;
      }
      const auto after = encode_value(v, d.dtype);
      set_bits(bytes, d.dtype, local, after);
      record({s, op_name(s.op_id),
              fmt::format("{} {} element {} {}", what, slot_, e, coord_str(shape_[s.op_id], e)),
              hex_bits(before, d.dtype), hex_bits(after, d.dtype)});
    }
  }

  SiteFilter site_;
  Target target_ = Target::Output;
  std::optional<std::string> inner_;  // glob over the inner ops of a fused op
  std::uint16_t slot_ = 0;
  std::uint64_t count_ = 1;
  double value_ = 0;
  bool random_value_ = false;
  std::map<std::uint32_t, std::uint64_t> element_;
  std::map<std::uint32_t, graph::Shape> shape_;
};

std::vector<ParamSpec> value_params(const std::string& kind) {
  auto ps = site_params("");
  ps.push_back({"tensor", "output|input", "output",
                "which side of the op is corrupted (a collective's output as its engine stores it on the rank; its "
                "input is not a site)"});
  ps.push_back({"inner", "glob", "-",
                "fused ops: corrupt the result of the inner op matching this glob inside the kernel (before the next inner op reads it)"});
  ps.push_back({"index", "int", "0", "output (or input) slot of the op"});
  ps.push_back({"element", "int | [coords] | random", "0",
                "first corrupted element: row-major linear index, a coordinate, or a seeded random draw"});
  ps.push_back({"count", "int", "1", "number of consecutive elements corrupted"});
  if (kind == "inf") ps.push_back({"sign", "+|-", "+", "sign of the infinity"});
  if (kind == "value") ps.push_back({"value", "number | random_finite", "", "value written (rounded to the tensor dtype)"});
  ps.push_back(seed_param());
  return ps;
}

}  // namespace

void register_value_injectors(InjectorRegistry& r) {
  const std::pair<const char*, const char*> kinds[] = {
      {"nan", "set elements of an op's output or input to NaN at a step and rank"},
      {"inf", "set elements of an op's output or input to +Inf or -Inf at a step and rank"},
      {"value", "set elements of an op's output or input to a given or random finite value"},
  };
  for (const auto& [name, doc] : kinds) {
    std::string kind = name;
    r.add({kind, doc, value_params(kind), [kind](const Params& p, const InjectionEnv& env) {
             return std::make_unique<ValueInjector>(p, env, kind);
           }});
  }
}

}  // namespace probelab::inject
