// hang: the job hung (report.json "hang", sim/run/hang_report.h): ranks blocked in collectives
// until the driver's timeout. `hang: true` (or {}) asks only that; the optional fields ask that
// some blocked rank matches every one given (rank, step, op glob), and `apart: true` that the
// ranks' programs went apart (ranks at different collectives under one call number), `link` (a
// glob) that a message was lost on a dead link of that name. Without a hang expectation a run that
// hangs fails; with one, a run that finishes fails it.
#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct Hang : ExpectationCheck {
  std::optional<std::int64_t> rank, step;
  std::optional<std::string> op, link;
  bool apart = false;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "hang", "rank", rank, s.ranks, "ranks");
    check_site(entry, "hang", "step", step, s.steps, "steps");
  }

  json params() const override {
    json j = {{"apart", apart}};
    put(j, "rank", rank);
    put(j, "step", step);
    put(j, "op", op);
    put(j, "link", link);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    std::string want = "the job hangs";
    if (rank || step || op)
      want += fmt::format(" with a rank blocked{}{}{}", rank ? fmt::format(" on r{}", *rank) : "",
                          step ? fmt::format(" at step {}", *step) : "", op ? " in an op matching " + *op : "");
    if (apart) want += ", its ranks at different collectives under one call";
    if (link) want += ", a message lost on a dead link matching " + *link;
    res.expected = want;
    const json& h = field(r, "hang");
    if (!h.is_object()) {
      res.actual = r.value("status", "") == "ok" ? "the job finished" : "no hang: " + r.value("error", std::string("?"));
      return res;
    }
    const json& blocked = items(h, "blocked");
    bool found = false;
    for (const auto& b : blocked)
      found = found || (matches_int(rank, field(b, "rank")) && matches_int(step, field(b, "step")) && matches(op, field(b, "op")));
    bool went_apart = false;
    for (const auto& e : items(h, "explanation"))
      went_apart = went_apart || (e.is_string() && e.get<std::string>().find("programs went apart") != std::string::npos);
    bool lost = false;
    for (const auto& l : items(h, "lost")) lost = lost || matches(link, field(l, "link"));
    res.actual = h.value("summary", std::string("job hang"));
    res.passed = found && (!apart || went_apart) && (!link || lost);
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& given) {
  const YamlView body = body_or_empty(given);  // `hang: true` is `hang: {}`
  body.expect_keys({"rank", "step", "op", "apart", "link"});
  auto h = std::make_unique<Hang>();
  h->rank = opt_int(body, "rank");
  h->step = opt_int(body, "step");
  h->op = opt_glob(body, "op");
  h->apart = body.bool_or("apart", false);
  h->link = opt_glob(body, "link");
  return h;
}

}  // namespace

void register_hang_expectation(ExpectationRegistry& r) {
  r.add({"hang", "the job hangs: ranks blocked in collectives (rank, step, op of a blocked one; apart; link lost on)",
         parse});
}

}  // namespace probelab::sim::expect
