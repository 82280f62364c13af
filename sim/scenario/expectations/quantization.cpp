// quantization: report.json `quantization` (sim/run/quant_report.h; a variant's own section with
// `variant: NAME`) shows, for the layers matching `op` (a glob) and one operand (activations,
// default, or weights), summed over `steps` ([first, last], default every step), saturated and/or
// flushed-to-zero code counts within bounds: `saturated: ">= 1"`, `underflow: "<= 100"` (a number
// alone means ==). At least one bound is required; a layer must match.
#include <algorithm>

#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct Quantization : ExpectationCheck {
  std::string op, operand = "activations";
  std::optional<std::string> variant;
  std::optional<std::int64_t> first, last;
  std::optional<CountBound> saturated, underflow;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "quantization", "steps", last, s.steps, "steps");
    if (variant && std::find(s.variants.begin(), s.variants.end(), *variant) == s.variants.end())
      entry["quantization"]["variant"].fail(fmt::format("a variant of this scenario ({})", fmt::join(s.variants, ", ")),
                                            "'" + *variant + "'");
  }

  json params() const override {
    json j = {{"op", op}, {"operand", operand}};
    if (variant) j["variant"] = *variant;
    if (first) j["steps"] = {*first, *last};
    if (saturated) j["saturated"] = saturated->str();
    if (underflow) j["underflow"] = underflow->str();
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    std::string where = variant ? fmt::format("variant {}", *variant) : std::string("the run");
    res.expected = fmt::format("{} {} of {} in {}{}", op, operand,
                               first ? fmt::format("steps {}-{}", *first, *last) : std::string("every step"), where,
                               fmt::format("{}{}", saturated ? ": saturated " + saturated->str() : std::string(),
                                           underflow ? (saturated ? ", " : ": ") + std::string("flushed ") + underflow->str()
                                                     : std::string()));
    const json* q = &field(r, "quantization");
    if (variant) {
      static const json kNone;
      q = &kNone;
      for (const json& v : items(r, "variants"))
        if (v.value("name", "") == *variant) q = &field(v, "quantization");
    }
    std::uint64_t sat = 0, und = 0;
    std::size_t layers = 0;
    for (const json& l : items(*q, "layers")) {
      if (!matches(op, field(l, "op")) || !l.contains(operand)) continue;
      ++layers;
      for (const json& s : items(l[operand], "per_step")) {
        const std::int64_t st = s.value("step", 0);
        if (first && (st < *first || st > *last)) continue;
        sat += s.value("saturated", std::uint64_t{0});
        und += s.value("underflow", std::uint64_t{0});
      }
    }
    res.actual = layers == 0 ? fmt::format("no quantized layer matching {} in {}", op, where)
                             : fmt::format("{} layer{}: saturated {}, flushed {}", layers, layers == 1 ? "" : "s", sat, und);
    res.passed = layers > 0 && (!saturated || saturated->holds(sat)) && (!underflow || underflow->holds(und));
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  body.expect_keys({"op", "operand", "variant", "steps", "saturated", "underflow"});
  auto c = std::make_unique<Quantization>();
  c->op = glob_checked(body["op"]);
  if (auto o = body.get("operand")) c->operand = o->str_in({"activations", "weights"});
  if (auto v = body.get("variant")) c->variant = v->str();
  if (auto s = body.get("steps")) {
    if (!s->is_seq() || s->size() != 2) s->fail("[first, last] steps", s->describe());
    c->first = s->at(0).integer(0);
    c->last = s->at(1).integer(0);
    if (*c->last < *c->first) s->fail("[first, last] with first <= last", s->describe());
  }
  if (auto v = body.get("saturated")) c->saturated = parse_bound(*v);
  if (auto v = body.get("underflow")) c->underflow = parse_bound(*v);
  if (!c->saturated && !c->underflow) body.fail("a bound: saturated and/or underflow (e.g. \">= 1\")");
  return c;
}

}  // namespace

void register_quantization_expectation(ExpectationRegistry& r) {
  r.add({"quantization",
         "saturated / flushed-to-zero code counts of quantized layers (op glob, operand, steps, variant) within bounds",
         parse});
}

}  // namespace probelab::sim::expect
