#include "sim/expectation.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "graph/graph.h"

namespace probelab::sim {

using nlohmann::json;

namespace {

std::string glob_checked(const YamlView& v) {
  std::string g = v.str();
  if (g.empty()) v.fail("a non-empty op glob");
  try {
    graph::glob_match(g, "");
  } catch (const std::exception& e) {
    v.fail("a valid glob (* ? [a-z])", fmt::format("'{}' ({})", g, e.what()));
  }
  return g;
}

std::optional<std::string> opt_glob(const YamlView& m, const char* key) {
  if (auto v = m.get(key)) return glob_checked(*v);
  return std::nullopt;
}

std::optional<std::int64_t> opt_int(const YamlView& m, const char* key, std::int64_t min = 0) {
  if (auto v = m.get(key)) return v->integer(min);
  return std::nullopt;
}

CountBound parse_bound(const YamlView& v) {
  CountBound b;
  std::string s = v.str();
  static const char* ops[] = {">=", "<=", "==", ">", "<"};
  std::string rest = s;
  for (const char* op : ops) {
    if (s.rfind(op, 0) == 0) {
      b.cmp = op;
      rest = s.substr(std::string(op).size());
      break;
    }
  }
  rest.erase(0, rest.find_first_not_of(' '));
  try {
    std::size_t pos = 0;
    long long n = std::stoll(rest, &pos);
    if (pos != rest.size() || n < 0) throw std::invalid_argument("x");
    b.n = static_cast<std::uint64_t>(n);
  } catch (const std::exception&) {
    v.fail("a count N or a bound '>= N', '<= N', '> N', '< N'", "'" + s + "'");
  }
  return b;
}

bool matches(const std::optional<std::string>& glob, const json& v) {
  if (!glob) return true;
  return v.is_string() && graph::glob_match(*glob, v.get<std::string>());
}

bool matches_int(const std::optional<std::int64_t>& want, const json& v) {
  if (!want) return true;
  return v.is_number_integer() && v.get<std::int64_t>() == *want;
}

bool kind_matches(const std::string& want, const json& a) {
  std::string k = a.value("kind", "");
  if (want == "any") return true;
  if (want == "nan") return k == "invalid" || k == "nan_input" || k == "nan";
  return k == want;
}

std::string anomaly_str(const json& a) {
  std::string s = fmt::format("{} at {}", a.value("kind", "?"), a.value("op", "?"));
  if (a.contains("element") && a["element"].is_number()) s += fmt::format(" element {}", a["element"].dump());
  if (a.contains("step")) s += fmt::format(" step {}", a["step"].dump());
  if (a.contains("rank")) s += fmt::format(" rank {}", a["rank"].dump());
  if (a.contains("latency_cycles") && !a["latency_cycles"].is_null())
    s += fmt::format(" latency {} cycles", a["latency_cycles"].dump());
  return s;
}

template <class F>
std::string list_str(const json& arr, F&& f, std::size_t max = 4) {
  if (!arr.is_array() || arr.empty()) return "none";
  std::string s;
  for (std::size_t i = 0; i < arr.size() && i < max; ++i) s += (i ? "; " : "") + f(arr[i]);
  if (arr.size() > max) s += fmt::format("; ... ({} in all)", arr.size());
  return s;
}

const json& field(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

// The array under `key`, or an empty array (a reference either way: nothing is copied).
const json& items(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json& v = field(j, key);
  return v.is_array() ? v : kEmpty;
}

ExpectationResult eval(const DetectionExpect& e, const json& r) {
  ExpectationResult res;
  res.expected = fmt::format("detection of {}", e.kind);
  if (e.op) res.expected += " at op " + *e.op;
  if (e.tensor) res.expected += " on tensor " + *e.tensor;
  if (e.element) res.expected += fmt::format(" element {}", *e.element);
  if (e.step) res.expected += fmt::format(" step {}", *e.step);
  if (e.rank) res.expected += fmt::format(" rank {}", *e.rank);
  if (e.max_latency_cycles) res.expected += fmt::format(" within {} cycles", *e.max_latency_cycles);
  const json& an = field(r, "anomalies");
  bool site_found = false;
  for (const auto& a : items(r, "anomalies")) {
    if (!kind_matches(e.kind, a) || !matches(e.op, field(a, "op")) || !matches(e.tensor, field(a, "tensor")) ||
        !matches_int(e.element, field(a, "element")) || !matches_int(e.step, field(a, "step")) ||
        !matches_int(e.rank, field(a, "rank")))
      continue;
    site_found = true;
    if (e.max_latency_cycles) {
      const json& lat = field(a, "latency_cycles");
      if (!lat.is_number() || lat.get<double>() > static_cast<double>(*e.max_latency_cycles)) continue;
    }
    res.passed = true;
    res.actual = anomaly_str(a);
    return res;
  }
  res.actual = (site_found ? "matching anomaly too late: " : "anomalies: ") + list_str(an, anomaly_str);
  return res;
}

ExpectationResult eval(const NoDetectionExpect& e, const json& r) {
  ExpectationResult res;
  res.expected = "no detection";
  if (e.kind) res.expected += " of " + *e.kind;
  if (e.op) res.expected += " at op " + *e.op;
  json hits = json::array();
  for (const auto& a : items(r, "anomalies"))
    if ((!e.kind || kind_matches(*e.kind, a)) && matches(e.op, field(a, "op"))) hits.push_back(a);
  json failed = json::array();
  if (e.comparisons && !e.kind && !e.op)
    for (const auto& c : items(r, "comparisons"))
      if (!c.value("passed", true)) failed.push_back(c);
  res.passed = hits.empty() && failed.empty();
  if (res.passed) {
    res.actual = "nothing flagged";
  } else {
    res.actual = "anomalies: " + list_str(hits, anomaly_str);
    if (!failed.empty())
      res.actual += "; failing comparisons: " +
                    list_str(failed, [](const json& c) { return c.value("op", "?"); });
  }
  return res;
}

ExpectationResult eval(const ComparisonExpect& e, const json& r) {
  ExpectationResult res;
  res.expected = fmt::format("comparison of {} {}", e.op, e.fails ? "fails" : "passes");
  if (e.inner_op) res.expected += ", decomposition blames inner op " + *e.inner_op;
  if (e.first) res.expected += ", first failing op";
  json mine = json::array();
  for (const auto& c : items(r, "comparisons"))
    if (matches(e.op, field(c, "op")) && matches_int(e.step, field(c, "step")) &&
        matches_int(e.rank, field(c, "rank")))
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
  if (!e.fails) {
    res.passed = std::all_of(mine.begin(), mine.end(), [](const json& c) { return c.value("passed", false); });
    res.actual = list_str(mine, cmp_str);
    return res;
  }
  for (const auto& c : mine) {
    if (c.value("passed", true)) continue;
    if (e.inner_op && !matches(e.inner_op, field(c, "inner_culprit"))) continue;
    res.passed = true;
    res.actual = cmp_str(c);
    break;
  }
  if (!res.passed) res.actual = list_str(mine, cmp_str);
  if (e.first) {
    const json& first = field(r, "first_failing_op");
    bool ok = matches(e.op, first) && !first.is_null();
    res.actual += "; first failing op " + (first.is_string() ? first.get<std::string>() : std::string("none"));
    res.passed = res.passed && ok;
  }
  return res;
}

ExpectationResult eval(const ConsistencyExpect& e, const json& r) {
  ExpectationResult res;
  const json& c = field(r, "consistency");
  const json& fd = field(c, "first_divergence");
  if (e.consistent) {
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
  if (e.op) res.expected += " first at op " + *e.op;
  if (e.step) res.expected += fmt::format(" step {}", *e.step);
  if (e.min_divergence) res.expected += fmt::format(" by more than {}", *e.min_divergence);
  if (e.growing) res.expected += ", growing over steps";
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
  bool ok = matches(e.op, field(fd, "op")) && matches_int(e.step, field(fd, "step"));
  if (e.min_divergence) {
    // The first divergent op may differ only slightly at its first step; the bound applies to the
    // largest divergence reported for that op over the run.
    double best = diff;
    for (const auto& s : items(c, "per_step"))
      best = std::max(best, s.value("max_abs_diff", 0.0));
    ok = ok && best > *e.min_divergence;
    res.actual += fmt::format(", max {:.3g}", best);
  }
  if (e.growing) {
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

ExpectationResult eval(const DiagnosisExpect& e, const json& r) {
  ExpectationResult res;
  res.expected = fmt::format("diagnosis top-{} includes {}{} as {}", e.top, e.op,
                             e.tensor ? " (tensor " + *e.tensor + ")" : std::string(), e.cause);
  if (e.exclusive) res.expected += " (no other op blamed as " + e.cause + ")";
  const json& d = field(r, "diagnosis");
  auto cand_str = [](const json& c) {
    const std::string t = c.value("tensor", "");
    return fmt::format("{}{} ({})", c.value("op", "?"), t.empty() ? "" : " [" + t + "]", c.value("cause", "?"));
  };
  res.actual = "candidates: " + list_str(d, cand_str, 5);
  if (!d.is_array()) return res;
  auto blamed = [&e](const json& c) { return matches(e.op, field(c, "op")) && matches(e.tensor, field(c, "tensor")); };
  bool hit = false;
  for (std::size_t i = 0; i < d.size() && i < static_cast<std::size_t>(e.top); ++i)
    hit = hit || (blamed(d[i]) && d[i].value("cause", "") == e.cause);
  if (hit && e.exclusive)
    for (const auto& c : d)
      if (c.value("cause", "") == e.cause && !blamed(c)) hit = false;
  res.passed = hit;
  return res;
}

ExpectationResult eval(const CaptureExpect& e, const json& r) {
  ExpectationResult res;
  const json* cap = &field(r, "capture");
  std::string where;
  if (e.variant) {
    cap = nullptr;
    const json& variants = field(r, "variants");
    if (variants.is_array())
      for (const auto& v : variants)
        if (v.value("name", "") == *e.variant) cap = &field(v, "capture");
    where = " of variant " + *e.variant;
  }
  std::vector<std::string> exp, act;
  if (e.overhead_below_percent) exp.push_back(fmt::format("overhead < {}%", *e.overhead_below_percent));
  if (e.dropped) exp.push_back("dropped " + e.dropped->str());
  res.expected = "capture" + where + ": " + fmt::format("{}", fmt::join(exp, ", "));
  if (!cap || !cap->is_object()) {
    res.actual = "no capture statistics" + where;
    return res;
  }
  bool ok = true;
  if (e.overhead_below_percent) {
    const json& o = field(*cap, "overhead_percent");
    if (o.is_number()) {
      act.push_back(fmt::format("overhead {:.3f}%", o.get<double>()));
      ok = ok && o.get<double>() < *e.overhead_below_percent;
    } else {
      act.push_back("overhead unknown");
      ok = false;
    }
  }
  if (e.dropped) {
    std::uint64_t d = cap->value("dropped", std::uint64_t{0});
    act.push_back(fmt::format("dropped {}", d));
    ok = ok && e.dropped->holds(d);
  }
  res.passed = ok;
  res.actual = fmt::format("{}", fmt::join(act, ", "));
  return res;
}

}  // namespace

bool CountBound::holds(std::uint64_t v) const {
  if (cmp == ">=") return v >= n;
  if (cmp == "<=") return v <= n;
  if (cmp == ">") return v > n;
  if (cmp == "<") return v < n;
  return v == n;
}

std::string CountBound::str() const { return fmt::format("{} {}", cmp, n); }

const std::vector<std::pair<std::string, std::string>>& expectation_kinds() {
  static const std::vector<std::pair<std::string, std::string>> k = {
      {"detection", "an anomaly of a kind at op (glob), element, step, rank, within a latency bound in cycles"},
      {"no_detection", "nothing flagged: no anomaly, no condition fired, no failing comparison"},
      {"comparison", "op X fails / passes the reference comparison (inner_op: fused decomposition; first)"},
      {"consistency", "ranks diverge first at op X, step N, by more than D, growing; or consistent: true"},
      {"diagnosis", "a top-k root-cause candidate is op X with cause class C (exclusive: only X)"},
      {"capture", "capture overhead below P %, dropped records = N or a bound (>= 1), per variant"},
  };
  return k;
}

const std::vector<std::string>& detection_kinds() {
  static const std::vector<std::string> k = {"overflow", "underflow", "invalid", "nan_input",
                                             "nan",      "condition", "any"};
  return k;
}

Expectation parse_expectation(const YamlView& entry) {
  Expectation ex;
  ex.line = entry.mark().is_null() ? 0 : entry.mark().line + 1;
  std::vector<std::string> kinds;
  for (const auto& [k, _] : expectation_kinds()) kinds.push_back(k);
  if (!entry.is_map() || entry.node().size() != 1)
    entry.fail("a one-key mapping naming the expectation kind (" + fmt::format("{}", fmt::join(kinds, ", ")) + ")",
               entry.describe());
  ex.kind = entry.keys().front();
  entry.expect_keys(kinds);
  YamlView body = entry.get(ex.kind).value_or(YamlView(YAML::Node(YAML::NodeType::Map), entry.file(),
                                                       join_path(entry.path(), ex.kind), entry.mark()));
  if (body.is_scalar() && ex.kind == "no_detection" && body.boolean())
    body = YamlView(YAML::Node(YAML::NodeType::Map), entry.file(), body.path(), body.mark());
  if (body.is_scalar() && ex.kind == "consistency" && body.str() == "consistent") {
    ConsistencyExpect c;
    c.consistent = true;
    ex.body = c;
    return ex;
  }
  if (ex.kind == "detection") {
    body.expect_keys({"kind", "op", "tensor", "element", "step", "rank", "max_latency_cycles"});
    DetectionExpect d;
    d.kind = body["kind"].str_in(detection_kinds());
    d.op = opt_glob(body, "op");
    d.tensor = opt_glob(body, "tensor");
    d.element = opt_int(body, "element");
    d.step = opt_int(body, "step");
    d.rank = opt_int(body, "rank");
    if (auto v = body.get("max_latency_cycles")) d.max_latency_cycles = v->uinteger();
    ex.body = d;
  } else if (ex.kind == "no_detection") {
    body.expect_keys({"kind", "op", "comparisons"});
    NoDetectionExpect d;
    if (auto v = body.get("kind")) d.kind = v->str_in(detection_kinds());
    d.op = opt_glob(body, "op");
    d.comparisons = body.bool_or("comparisons", true);
    ex.body = d;
  } else if (ex.kind == "comparison") {
    body.expect_keys({"op", "result", "inner_op", "first", "step", "rank"});
    ComparisonExpect c;
    c.op = glob_checked(body["op"]);
    c.fails = body["result"].str_in({"fails", "passes"}) == "fails";
    c.inner_op = opt_glob(body, "inner_op");
    c.first = body.bool_or("first", false);
    c.step = opt_int(body, "step");
    c.rank = opt_int(body, "rank");
    if (!c.fails && (c.inner_op || c.first))
      body.fail("inner_op and first only with result: fails");
    ex.body = c;
  } else if (ex.kind == "consistency") {
    body.expect_keys({"consistent", "op", "step", "min_divergence", "growing"});
    ConsistencyExpect c;
    c.consistent = body.bool_or("consistent", false);
    c.op = opt_glob(body, "op");
    c.step = opt_int(body, "step");
    if (auto v = body.get("min_divergence")) c.min_divergence = v->number();
    c.growing = body.bool_or("growing", false);
    if (c.consistent && (c.op || c.step || c.min_divergence || c.growing))
      body.fail("either consistent: true or a divergence (op, step, min_divergence, growing), not both");
    if (!c.consistent && !c.op && !c.step && !c.min_divergence && !c.growing)
      body.fail("consistent: true, or at least one of op, step, min_divergence, growing");
    ex.body = c;
  } else if (ex.kind == "diagnosis") {
    body.expect_keys({"op", "tensor", "cause", "top", "exclusive"});
    DiagnosisExpect d;
    if (!body.get("op") && !body.get("tensor")) body.fail("an op or a tensor glob (the blamed place)");
    if (body.get("op")) d.op = glob_checked(body["op"]);
    d.tensor = opt_glob(body, "tensor");
    d.cause = body["cause"].str();
    d.top = static_cast<int>(body.int_or("top", 1, 1, 10));
    d.exclusive = body.bool_or("exclusive", false);
    ex.body = d;
  } else {
    body.expect_keys({"overhead_below_percent", "dropped", "variant"});
    CaptureExpect c;
    if (auto v = body.get("overhead_below_percent")) {
      c.overhead_below_percent = v->number();
      if (*c.overhead_below_percent <= 0) v->fail("a positive percentage", v->describe());
    }
    if (auto v = body.get("dropped")) c.dropped = parse_bound(*v);
    if (auto v = body.get("variant")) c.variant = v->str();
    if (!c.overhead_below_percent && !c.dropped) body.fail("overhead_below_percent and/or dropped");
    ex.body = c;
  }
  return ex;
}

ExpectationResult evaluate(const Expectation& e, const json& report) {
  return std::visit([&](const auto& b) { return eval(b, report); }, e.body);
}

}  // namespace probelab::sim
