// no_detection: nothing flagged — no anomaly, no condition fired and (unless `comparisons:
// false`) no failing reference comparison; `kind`/`op` narrow it to matching anomalies.
#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct NoDetection : ExpectationCheck {
  std::optional<std::string> kind, op;
  bool comparisons = true;

  json params() const override {
    json j = {{"comparisons", comparisons}};
    put(j, "kind", kind);
    put(j, "op", op);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    res.expected = "no detection";
    if (kind) res.expected += " of " + *kind;
    if (op) res.expected += " at op " + *op;
    json hits = json::array();
    for (const auto& a : items(r, "anomalies"))
      if ((!kind || kind_matches(*kind, a)) && matches(op, field(a, "op"))) hits.push_back(a);
    json failed = json::array();
    if (comparisons && !kind && !op)
      for (const auto& c : items(r, "comparisons"))
        if (!c.value("passed", true)) failed.push_back(c);
    res.passed = hits.empty() && failed.empty();
    if (res.passed) {
      res.actual = "nothing flagged";
    } else {
      res.actual = "anomalies: " + list_str(hits, anomaly_str);
      if (!failed.empty())
        res.actual += "; failing comparisons: " + list_str(failed, [](const json& c) { return c.value("op", "?"); });
    }
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& given) {
  // `no_detection: true` is the same as `no_detection: {}`.
  YamlView body = given.is_scalar() && given.boolean()
                      ? YamlView(YAML::Node(YAML::NodeType::Map), given.file(), given.path(), given.mark())
                      : given;
  body.expect_keys({"kind", "op", "comparisons"});
  auto d = std::make_unique<NoDetection>();
  if (auto v = body.get("kind")) d->kind = v->str_in(detection_kinds());
  d->op = opt_glob(body, "op");
  d->comparisons = body.bool_or("comparisons", true);
  return d;
}

}  // namespace

void register_no_detection_expectation(ExpectationRegistry& r) {
  r.add({"no_detection", "nothing flagged: no anomaly, no condition fired, no failing comparison", parse});
}

}  // namespace probelab::sim::expect
