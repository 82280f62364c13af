// comparison: op X fails (or passes) the reference comparison; `inner_op`: the fused
// decomposition blamed an inner op; `first`: X is the first failing op.
#include <algorithm>

#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct Comparison : ExpectationCheck {
  std::string op;
  bool fails = true;
  std::optional<std::string> inner_op;
  bool first = false;
  std::optional<std::int64_t> step, rank;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "comparison", "step", step, s.steps, "steps");
    check_site(entry, "comparison", "rank", rank, s.ranks, "ranks");
  }

  json params() const override {
    json j = {{"op", op}, {"result", fails ? "fails" : "passes"}, {"first", first}};
    put(j, "inner_op", inner_op);
    put(j, "step", step);
    put(j, "rank", rank);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    res.expected = fmt::format("comparison of {} {}", op, fails ? "fails" : "passes");
    if (inner_op) res.expected += ", decomposition blames inner op " + *inner_op;
    if (first) res.expected += ", first failing op";
    json mine = json::array();
    for (const auto& c : items(r, "comparisons"))
      if (matches(op, field(c, "op")) && matches_int(step, field(c, "step")) && matches_int(rank, field(c, "rank")))
        mine.push_back(c);
    auto cmp_str = [](const json& c) {
      std::string s = fmt::format("{} {}", c.value("op", "?"), c.value("passed", false) ? "passed" : "failed");
      if (c.contains("inner_culprit") && c["inner_culprit"].is_string())
        s += " (inner " + c["inner_culprit"].get<std::string>() + ")";
      return s;
    };
    if (mine.empty()) {
      res.actual = "no comparison of a matching op";
      return res;
    }
    if (!fails) {
      res.passed = std::all_of(mine.begin(), mine.end(), [](const json& c) { return c.value("passed", false); });
      res.actual = list_str(mine, cmp_str);
      return res;
    }
    for (const auto& c : mine) {
      if (c.value("passed", true)) continue;
      if (inner_op && !matches(inner_op, field(c, "inner_culprit"))) continue;
      res.passed = true;
      res.actual = cmp_str(c);
      break;
    }
    if (!res.passed) res.actual = list_str(mine, cmp_str);
    if (first) {
      const json& f = field(r, "first_failing_op");
      bool ok = matches(op, f) && !f.is_null();
      res.actual += "; first failing op " + (f.is_string() ? f.get<std::string>() : std::string("none"));
      res.passed = res.passed && ok;
    }
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  body.expect_keys({"op", "result", "inner_op", "first", "step", "rank"});
  auto c = std::make_unique<Comparison>();
  c->op = glob_checked(body["op"]);
  c->fails = body["result"].str_in({"fails", "passes"}) == "fails";
  c->inner_op = opt_glob(body, "inner_op");
  c->first = body.bool_or("first", false);
  c->step = opt_int(body, "step");
  c->rank = opt_int(body, "rank");
  if (!c->fails && (c->inner_op || c->first)) body.fail("inner_op and first only with result: fails");
  return c;
}

}  // namespace

void register_comparison_expectation(ExpectationRegistry& r) {
  r.add({"comparison", "op X fails / passes the reference comparison (inner_op: fused decomposition; first)", parse});
}

}  // namespace probelab::sim::expect
