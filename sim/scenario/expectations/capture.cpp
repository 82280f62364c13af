// capture: capture overhead (simulated cycles, against the same run without probes) below P %;
// dropped records and corrupt records (rejected by their checks when drained) = N or a bound;
// `variant` picks a variant run.
#include <algorithm>

#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct Capture : ExpectationCheck {
  std::optional<double> overhead_below_percent;
  std::optional<CountBound> dropped, corrupt;
  std::optional<std::string> variant;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    if (variant && std::find(s.variants.begin(), s.variants.end(), *variant) == s.variants.end())
      entry["capture"]["variant"].fail("the name of a variant of this scenario", "'" + *variant + "'");
  }

  json params() const override {
    json j = json::object();
    put(j, "overhead_below_percent", overhead_below_percent);
    if (dropped) j["dropped"] = dropped->str();
    if (corrupt) j["corrupt"] = corrupt->str();
    put(j, "variant", variant);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    const json* cap = run_field(r, variant, "capture");
    const std::string where = variant_suffix(variant);
    std::vector<std::string> exp, act;
    if (overhead_below_percent) exp.push_back(fmt::format("overhead < {}%", *overhead_below_percent));
    if (dropped) exp.push_back("dropped " + dropped->str());
    if (corrupt) exp.push_back("corrupt " + corrupt->str());
    res.expected = "capture" + where + ": " + fmt::format("{}", fmt::join(exp, ", "));
    if (!cap || !cap->is_object()) {
      res.actual = "no capture statistics" + where;
      return res;
    }
    bool ok = true;
    if (overhead_below_percent) {
      const json& o = field(*cap, "overhead_percent");
      if (o.is_number()) {
        act.push_back(fmt::format("overhead {:.3f}%", o.get<double>()));
        ok = ok && o.get<double>() < *overhead_below_percent;
      } else {
        act.push_back(fmt::format("overhead unknown"));
        ok = false;
      }
    }
    if (dropped) {
      std::uint64_t d = cap->value("dropped", std::uint64_t{0});
      act.push_back(fmt::format("dropped {}", d));
      ok = ok && dropped->holds(d);
    }
    if (corrupt) {
      std::uint64_t c = cap->value("corrupt", std::uint64_t{0});
      act.push_back(fmt::format("corrupt {}", c));
      ok = ok && corrupt->holds(c);
    }
    res.passed = ok;
    res.actual = fmt::format("{}", fmt::join(act, ", "));
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  body.expect_keys({"overhead_below_percent", "dropped", "corrupt", "variant"});
  auto c = std::make_unique<Capture>();
  if (auto v = body.get("overhead_below_percent")) {
    c->overhead_below_percent = v->number();
    if (*c->overhead_below_percent <= 0) v->fail("a positive percentage", v->describe());
  }
  if (auto v = body.get("dropped")) c->dropped = parse_bound(*v);
  if (auto v = body.get("corrupt")) c->corrupt = parse_bound(*v);
  if (auto v = body.get("variant")) c->variant = v->str();
  if (!c->overhead_below_percent && !c->dropped && !c->corrupt) body.fail("overhead_below_percent, dropped and/or corrupt");
  return c;
}

}  // namespace

void register_capture_expectation(ExpectationRegistry& r) {
  r.add({"capture", "capture overhead below P %, dropped / corrupt records = N or a bound (>= 1), per variant", parse});
}

}  // namespace probelab::sim::expect
