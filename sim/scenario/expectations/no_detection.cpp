// no_detection: nothing flagged — no anomaly, no condition fired and (unless `comparisons:
// false`) no failing reference comparison; `kind`/`op` narrow it to matching anomalies, `step`
// and `rank` to anomalies and comparisons of that step and rank.
#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct NoDetection : ExpectationCheck {
  std::optional<std::string> kind, op;
  std::optional<std::int64_t> step, rank;
  bool comparisons = true;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "no_detection", "step", step, s.steps, "steps");
    check_site(entry, "no_detection", "rank", rank, s.ranks, "ranks");
  }

  json params() const override {
    json j = {{"comparisons", comparisons}};
    put(j, "kind", kind);
    put(j, "op", op);
    put(j, "step", step);
    put(j, "rank", rank);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    res.expected = "no detection";
    if (kind) res.expected += " of " + *kind;
    if (op) res.expected += " at op " + *op;
    if (step) res.expected += fmt::format(" at step {}", *step);
    if (rank) res.expected += fmt::format(" on rank {}", *rank);
    auto in_scope = [this](const json& j) { return matches_int(step, field(j, "step")) && matches_int(rank, field(j, "rank")); };
    json hits = json::array();
    for (const auto& a : items(r, "anomalies"))
      if ((!kind || kind_matches(*kind, a)) && matches(op, field(a, "op")) && in_scope(a)) hits.push_back(a);
    json failed = json::array();
    if (comparisons && !kind && !op)
      for (const auto& c : items(r, "comparisons"))
        if (!c.value("passed", true) && in_scope(c)) failed.push_back(c);
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
  const YamlView body = body_or_empty(given);  // `no_detection: true` is `no_detection: {}`
  body.expect_keys({"kind", "op", "step", "rank", "comparisons"});
  auto d = std::make_unique<NoDetection>();
  if (auto v = body.get("kind")) d->kind = v->str_in(detection_kinds());
  d->op = opt_glob(body, "op");
  d->step = opt_int(body, "step");
  d->rank = opt_int(body, "rank");
  d->comparisons = body.bool_or("comparisons", true);
  return d;
}

}  // namespace

void register_no_detection_expectation(ExpectationRegistry& r) {
  r.add({"no_detection", "nothing flagged: no anomaly, no condition fired, no failing comparison", parse});
}

}  // namespace probelab::sim::expect
