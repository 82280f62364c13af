// loss: how much a training run's loss went down between two steps, on one rank, of the main run
// or of a variant: drop_percent = 100 (loss[from] - loss[to]) / |loss[from]|, against a bound.
// With `data: {batches: 1}` (the same batch every step) the loss changes only through the
// weights, so `drop_percent: "== 0"` says that every update rounded away.
#include <algorithm>
#include <cmath>

#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct Loss : ExpectationCheck {
  ValueBound drop;
  std::int64_t rank = 0;
  std::int64_t from_step = 0;
  std::optional<std::int64_t> to_step;  // default: the last step
  std::optional<std::string> variant;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "loss", "rank", rank, s.ranks, "ranks");
    check_site(entry, "loss", "from_step", from_step, s.steps, "steps");
    check_site(entry, "loss", "to_step", to_step, s.steps, "steps");
    if (to_step && *to_step <= from_step)
      entry["loss"]["to_step"].fail(fmt::format("a step after from_step ({})", from_step), std::to_string(*to_step));
    if (!to_step && s.steps < 2) entry.fail("a loss expectation only with steps >= 2", fmt::format("steps: {}", s.steps));
    if (variant && std::find(s.variants.begin(), s.variants.end(), *variant) == s.variants.end())
      entry["loss"]["variant"].fail("the name of a variant of this scenario", "'" + *variant + "'");
  }

  json params() const override {
    json j = {{"drop_percent", drop.str()}, {"rank", rank}, {"from_step", from_step}};
    put(j, "to_step", to_step);
    put(j, "variant", variant);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    const json* losses = run_field(r, variant, "losses");
    const std::string where = variant_suffix(variant);
    res.expected = fmt::format("loss{} on rank {} drops {}% from step {} to {}", where, rank, drop.str(), from_step,
                               to_step ? "step " + std::to_string(*to_step) : std::string("the last step"));
    const auto r_index = static_cast<std::size_t>(rank);
    if (!losses || !losses->is_array() || losses->size() <= r_index || !(*losses)[r_index].is_array()) {
      res.actual = "no losses of rank " + std::to_string(rank) + where + " (a training run reports them)";
      return res;
    }
    const json& per_step = (*losses)[r_index];
    const std::size_t last = to_step ? static_cast<std::size_t>(*to_step) : per_step.size() - 1;
    const auto from = static_cast<std::size_t>(from_step);
    if (per_step.size() <= std::max(from, last) || per_step.empty() || !per_step[from].is_number() ||
        !per_step[last].is_number()) {
      res.actual = fmt::format("{} losses reported, not both steps {} and {}", per_step.size(), from, last);
      return res;
    }
    const double a = per_step[from].get<double>(), b = per_step[last].get<double>();
    const double pct = a == b ? 0.0 : 100.0 * (a - b) / std::abs(a);
    res.actual = fmt::format("loss {} at step {}, {} at step {}: drop {:.4g}%", a, from, b, last, pct);
    res.passed = std::isfinite(pct) && drop.holds(pct);
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  body.expect_keys({"drop_percent", "rank", "from_step", "to_step", "variant"});
  auto c = std::make_unique<Loss>();
  if (!body.get("drop_percent")) body.fail("drop_percent: a bound such as '>= 1' or '== 0'");
  c->drop = parse_value_bound(body["drop_percent"]);
  c->rank = opt_int(body, "rank").value_or(0);
  c->from_step = opt_int(body, "from_step").value_or(0);
  c->to_step = opt_int(body, "to_step");
  if (auto v = body.get("variant")) c->variant = v->str();
  return c;
}

}  // namespace

void register_loss_expectation(ExpectationRegistry& r) {
  r.add({"loss", "the training loss drops by a bound in percent between two steps (rank, variant)", parse});
}

}  // namespace probelab::sim::expect
