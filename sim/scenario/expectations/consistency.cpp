// consistency: ranks diverge first at op X (and step) by more than D, growing over steps; or
// `consistent: true` (every rank agrees with the reference rank).
#include <algorithm>

#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct Consistency : ExpectationCheck {
  bool consistent = false;
  std::optional<std::string> op;
  std::optional<std::int64_t> step;
  std::optional<double> min_divergence;
  bool growing = false;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "consistency", "step", step, s.steps, "steps");
    if (s.ranks < 2) entry.fail("a consistency expectation only with ranks >= 2", fmt::format("ranks: {}", s.ranks));
  }

  json params() const override {
    json j = {{"consistent", consistent}, {"growing", growing}};
    put(j, "op", op);
    put(j, "step", step);
    put(j, "min_divergence", min_divergence);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    const json& c = field(r, "consistency");
    const json& fd = field(c, "first_divergence");
    if (consistent) {
      res.expected = "ranks consistent";
      if (!c.is_object() || !c.value("checked", false)) {
        res.actual = "no consistency check ran";
        return res;
      }
      res.passed = c.value("consistent", false);
      res.actual = res.passed ? "consistent"
                              : fmt::format("diverged at {} step {} by {}", fd.value("op", "?"),
                                            field(fd, "step").dump(), field(fd, "max_abs_diff").dump());
      return res;
    }
    res.expected = "ranks diverge";
    if (op) res.expected += " first at op " + *op;
    if (step) res.expected += fmt::format(" step {}", *step);
    if (min_divergence) res.expected += fmt::format(" by more than {}", *min_divergence);
    if (growing) res.expected += ", growing over steps";
    if (!c.is_object() || !c.value("checked", false)) {
      res.actual = "no consistency check ran";
      return res;
    }
    if (!fd.is_object()) {
      res.actual = "consistent (no divergence)";
      return res;
    }
    double diff = field(fd, "max_abs_diff").is_number() ? fd["max_abs_diff"].get<double>() : 0.0;
    res.actual = fmt::format("first divergence at {} step {} rank {} by {:.3g}", fd.value("op", "?"),
                             field(fd, "step").dump(), field(fd, "rank").dump(), diff);
    bool ok = matches(op, field(fd, "op")) && matches_int(step, field(fd, "step"));
    if (min_divergence) {
      // The first divergent op may differ only slightly at its first step; the bound applies to
      // the largest divergence reported for that op over the run.
      double best = diff;
      for (const auto& s : items(c, "per_step")) best = std::max(best, s.value("max_abs_diff", 0.0));
      ok = ok && best > *min_divergence;
      res.actual += fmt::format(", max {:.3g}", best);
    }
    if (growing) {
      const json& ps = field(c, "per_step");
      bool grows = ps.is_array() && ps.size() >= 2 &&
                   ps.back().value("max_abs_diff", 0.0) > ps.front().value("max_abs_diff", 0.0);
      std::string trend;
      for (const auto& s : items(c, "per_step"))
        trend += fmt::format("{}{:.3g}", trend.empty() ? "" : " -> ", s.value("max_abs_diff", 0.0));
      res.actual += ", per step " + (trend.empty() ? std::string("none") : trend);
      ok = ok && grows;
    }
    res.passed = ok;
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  auto c = std::make_unique<Consistency>();
  if (body.is_scalar() && body.str() == "consistent") {  // `consistency: consistent`
    c->consistent = true;
    return c;
  }
  body.expect_keys({"consistent", "op", "step", "min_divergence", "growing"});
  c->consistent = body.bool_or("consistent", false);
  c->op = opt_glob(body, "op");
  c->step = opt_int(body, "step");
  if (auto v = body.get("min_divergence")) c->min_divergence = v->number();
  c->growing = body.bool_or("growing", false);
  if (c->consistent && (c->op || c->step || c->min_divergence || c->growing))
    body.fail("either consistent: true or a divergence (op, step, min_divergence, growing), not both");
  if (!c->consistent && !c->op && !c->step && !c->min_divergence && !c->growing)
    body.fail("consistent: true, or at least one of op, step, min_divergence, growing");
  return c;
}

}  // namespace

void register_consistency_expectation(ExpectationRegistry& r) {
  r.add({"consistency", "ranks diverge first at op X, step N, by more than D, growing; or consistent: true", parse});
}

}  // namespace probelab::sim::expect
