// consistency: ranks diverge first at op X (and step) by more than D, growing over steps, the
// first divergence on exactly the ranks listed (`ranks: [77]`, ranges as "24-31"); or
// `consistent: true` (every rank agrees with the reference rank).
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

// Whether a compared op (report consistency.ops) matches `glob`.
bool compared(const std::string& glob, const json& c) {
  for (const auto& o : items(c, "ops"))
    if (o.is_string() && matches(glob, o)) return true;
  return false;
}

// The compared ops, the first few of them.
std::string compared_list(const json& c) {
  constexpr std::size_t kShown = 6;
  std::vector<std::string> names;
  for (const auto& o : items(c, "ops"))
    if (o.is_string()) names.push_back(o.get<std::string>());
  if (names.empty()) return "none";
  const std::size_t n = names.size();
  if (n > kShown) names.resize(kShown);
  return fmt::format("{}{}", fmt::join(names, ", "), n > kShown ? fmt::format(" and {} more", n - kShown) : "");
}

// How far a divergence goes: its max_abs_diff, or, compared by hash (no size), that it is unknown.
std::string divergence_size(const json& fd) {
  const json& d = field(fd, "max_abs_diff");
  if (d.is_number() && fd.value("basis", "") != "hash") return fmt::format("{:.3g}", d.get<double>());
  return "an unknown amount (compared by hash)";
}

struct Consistency : ExpectationCheck {
  bool consistent = false;
  std::optional<std::string> op;
  std::optional<std::int64_t> step;
  std::optional<double> min_divergence;
  std::optional<std::vector<std::int64_t>> ranks;  // the first divergence's ranks, ascending
  bool growing = false;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "consistency", "step", step, s.steps, "steps");
    if (s.ranks < 2) entry.fail("a consistency expectation only with ranks >= 2", fmt::format("ranks: {}", s.ranks));
    if (ranks && !ranks->empty() && ranks->back() >= s.ranks) {
      const YamlView at = entry.get("consistency") ? entry["consistency"]["ranks"] : entry;
      at.fail(fmt::format("ranks of the job (0..{})", s.ranks - 1), fmt::format("rank {}", ranks->back()));
    }
  }

  json params() const override {
    json j = {{"consistent", consistent}, {"growing", growing}};
    put(j, "op", op);
    put(j, "step", step);
    put(j, "min_divergence", min_divergence);
    put(j, "ranks", ranks);
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
                                            field(fd, "step").dump(), divergence_size(fd));
      return res;
    }
    res.expected = "ranks diverge";
    if (op) res.expected += " first at op " + *op;
    if (step) res.expected += fmt::format(" step {}", *step);
    if (min_divergence) res.expected += fmt::format(" by more than {}", *min_divergence);
    if (ranks) res.expected += fmt::format(" on ranks [{}]", fmt::join(*ranks, ", "));
    if (growing) res.expected += ", growing over steps";
    if (!c.is_object() || !c.value("checked", false)) {
      res.actual = "no consistency check ran";
      return res;
    }
    if (op && c.contains("ops") && !compared(*op, c)) {
      // e.g. a ReduceScatter: its shards differ from rank to rank by design and are not compared.
      res.actual = fmt::format("no op matching '{}' is compared across ranks (compared: {})", *op, compared_list(c));
      return res;
    }
    if (!fd.is_object()) {
      res.actual = "consistent (no divergence)";
      return res;
    }
    double diff = field(fd, "max_abs_diff").is_number() ? fd["max_abs_diff"].get<double>() : 0.0;
    std::vector<std::int64_t> got;
    for (const auto& x : items(fd, "ranks"))
      if (x.is_number_integer()) got.push_back(x.get<std::int64_t>());
    res.actual = fmt::format("first divergence at {} step {} on ranks [{}] by {}", fd.value("op", "?"),
                             field(fd, "step").dump(), fmt::join(got, ", "), divergence_size(fd));
    bool ok = matches(op, field(fd, "op")) && matches_int(step, field(fd, "step"));
    if (ranks) ok = ok && got == *ranks;
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

/// A rank, or a list of ranks and "a-b" ranges: the distinct ranks, ascending.
std::vector<std::int64_t> parse_ranks(const YamlView& v) {
  std::vector<std::int64_t> out;
  auto one = [&](const YamlView& x) {
    const std::string t = x.is_scalar() ? x.str() : std::string();
    const auto dash = t.find('-');
    if (dash == std::string::npos || dash == 0) {
      out.push_back(x.integer(0, 65535));
      return;
    }
    std::int64_t lo = -1, hi = -1;
    try {
      std::size_t a = 0, b = 0;
      lo = std::stoll(t.substr(0, dash), &a);
      hi = std::stoll(t.substr(dash + 1), &b);
      if (a != dash || b != t.size() - dash - 1) lo = -1;
    } catch (const std::exception&) {
      lo = -1;
    }
    if (lo < 0 || hi < lo || hi > 65535) x.fail("a rank or a range of ranks \"a-b\" (a <= b)", "'" + t + "'");
    for (std::int64_t r = lo; r <= hi; ++r) out.push_back(r);
  };
  if (v.is_seq()) {
    if (v.size() == 0) v.fail("a rank or a non-empty list of ranks", "[]");
    for (const auto& x : v.items()) one(x);
  } else {
    one(v);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  auto c = std::make_unique<Consistency>();
  if (body.is_scalar() && body.str() == "consistent") {  // `consistency: consistent`
    c->consistent = true;
    return c;
  }
  body.expect_keys({"consistent", "op", "step", "min_divergence", "ranks", "growing"});
  c->consistent = body.bool_or("consistent", false);
  c->op = opt_glob(body, "op");
  c->step = opt_int(body, "step");
  if (auto v = body.get("min_divergence")) c->min_divergence = v->number();
  c->growing = body.bool_or("growing", false);
  if (auto v = body.get("ranks")) c->ranks = parse_ranks(*v);
  if (c->consistent && (c->op || c->step || c->min_divergence || c->ranks || c->growing))
    body.fail("either consistent: true or a divergence (op, step, min_divergence, ranks, growing), not both");
  if (!c->consistent && !c->op && !c->step && !c->min_divergence && !c->ranks && !c->growing)
    body.fail("consistent: true, or at least one of op, step, min_divergence, ranks, growing");
  return c;
}

}  // namespace

void register_consistency_expectation(ExpectationRegistry& r) {
  r.add({"consistency", "ranks diverge first at op X, step N, by more than D, on the ranks listed, growing; or consistent: true",
         parse});
}

}  // namespace probelab::sim::expect
