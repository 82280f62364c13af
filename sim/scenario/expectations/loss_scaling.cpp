// loss_scaling: what the dynamic loss scaler decided from the device's float status
// (report.json loss_scaling). `step` (and optionally `rank`) selects decisions; `skipped` /
// `found_inf` / `recovered` must hold for every selected one; `ranks_agree` (the ranks' updated
// parameters are bit-identical at the end) and `decisions_agree` (every step skipped on all ranks
// or on none) check the job as a whole.
#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct LossScaling : ExpectationCheck {
  std::optional<std::int64_t> step, rank;
  std::optional<bool> skipped, found_inf, recovered, ranks_agree, decisions_agree;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "loss_scaling", "step", step, s.steps, "steps");
    check_site(entry, "loss_scaling", "rank", rank, s.ranks, "ranks");
  }

  json params() const override {
    json j = json::object();
    put(j, "step", step);
    put(j, "rank", rank);
    put(j, "skipped", skipped);
    put(j, "found_inf", found_inf);
    put(j, "recovered", recovered);
    put(j, "ranks_agree", ranks_agree);
    put(j, "decisions_agree", decisions_agree);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    const json& ls = field(r, "loss_scaling");
    std::string want;
    auto add = [&want](const char* what, const std::optional<bool>& v) {
      if (v) want += fmt::format("{}{} {}", want.empty() ? "" : ", ", what, *v);
    };
    add("skipped", skipped);
    add("found_inf", found_inf);
    add("recovered", recovered);
    add("ranks_agree", ranks_agree);
    add("decisions_agree", decisions_agree);
    res.expected = "loss scaling: " + want;
    if (step) res.expected += fmt::format(" at step {}", *step);
    if (rank) res.expected += fmt::format(" on rank {}", *rank);
    if (!ls.is_object()) {
      res.actual = "no loss_scaling section (training.loss_scaling not set)";
      return res;
    }
    res.passed = true;
    std::string got;
    std::size_t selected = 0;
    for (const auto& s : items(ls, "steps")) {
      if (!matches_int(step, field(s, "step")) || !matches_int(rank, field(s, "rank"))) continue;
      ++selected;
      auto check = [&](const char* key, const std::optional<bool>& v) {
        if (v && field(s, key) != json(*v)) res.passed = false;
      };
      check("skipped", skipped);
      check("found_inf", found_inf);
      check("recovered", recovered);
      if (got.size() < 400)
        got += fmt::format("{}rank {} step {}: scale {} found_inf {} skipped {} status {}", got.empty() ? "" : "; ",
                           field(s, "rank").dump(), field(s, "step").dump(), field(s, "scale").dump(),
                           field(s, "found_inf").dump(), field(s, "skipped").dump(), field(s, "status").dump());
    }
    if ((skipped || found_inf || recovered) && selected == 0) res.passed = false;
    if (ranks_agree && field(ls, "ranks_agree") != json(*ranks_agree)) res.passed = false;
    if (decisions_agree && field(ls, "decisions_agree") != json(*decisions_agree)) res.passed = false;
    res.actual = fmt::format("{}; ranks_agree {}, decisions_agree {}", got.empty() ? "no decision selected" : got,
                             field(ls, "ranks_agree").dump(), field(ls, "decisions_agree").dump());
    return res;
  }
};

std::optional<bool> opt_bool(const YamlView& m, const char* key) {
  if (auto v = m.get(key)) return v->boolean();
  return std::nullopt;
}

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  body.expect_keys({"step", "rank", "skipped", "found_inf", "recovered", "ranks_agree", "decisions_agree"});
  auto d = std::make_unique<LossScaling>();
  d->step = opt_int(body, "step");
  d->rank = opt_int(body, "rank");
  d->skipped = opt_bool(body, "skipped");
  d->found_inf = opt_bool(body, "found_inf");
  d->recovered = opt_bool(body, "recovered");
  d->ranks_agree = opt_bool(body, "ranks_agree");
  d->decisions_agree = opt_bool(body, "decisions_agree");
  if (!d->skipped && !d->found_inf && !d->recovered && !d->ranks_agree && !d->decisions_agree)
    body.fail("at least one of skipped, found_inf, recovered, ranks_agree, decisions_agree", "no check");
  return d;
}

}  // namespace

void register_loss_scaling_expectation(ExpectationRegistry& r) {
  r.add({"loss_scaling", "the dynamic loss scaler's decisions from the float status: skipped/found_inf/recovered at a "
                         "step (and rank), ranks_agree, decisions_agree",
         parse});
}

}  // namespace probelab::sim::expect
