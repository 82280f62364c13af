#include "sim/scenario/expectations/expect_util.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "graph/graph.h"

namespace probelab::sim::expect {

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

std::optional<std::int64_t> opt_int(const YamlView& m, const char* key, std::int64_t min) {
  if (auto v = m.get(key)) return v->integer(min);
  return std::nullopt;
}

YamlView body_or_empty(const YamlView& given) {
  return given.is_scalar() && given.boolean() ? YamlView(YAML::Node(YAML::NodeType::Map), given.file(), given.path(), given.mark())
                                              : given;
}

void check_site(const YamlView& entry, const std::string& kind, const char* key, std::optional<std::int64_t> v,
                std::int64_t limit, const char* what) {
  if (v && *v >= limit) {
    YamlView body = entry[kind];
    body[key].fail(fmt::format("a {} below {} ({})", key, what, limit), body[key].describe());
  }
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
  if (want == "inf") {
    // an op read an Inf, or a latch whose first offending value is an infinity (an overflow to
    // Inf, an Inf written where a NaN-free result was due)
    const json& v = field(a, "value");
    return k == "inf_input" || (v.is_string() && (v == "inf" || v == "-inf"));
  }
  return k == want;
}

std::string anomaly_str(const json& a) {
  std::string s = fmt::format("{} at {}", a.value("kind", "?"), a.value("op", "?"));
  if (a.contains("element") && a["element"].is_number()) s += fmt::format(" element {}", a["element"].dump());
  if (a.contains("step")) s += fmt::format(" step {}", a["step"].dump());
  if (a.contains("rank")) s += fmt::format(" rank {}", a["rank"].dump());
  if (a.contains("latency_cycles") && !a["latency_cycles"].is_null())
    s += fmt::format(" latency {} cycles", a["latency_cycles"].dump());
  if (a.contains("core_kind") && a["core_kind"].is_string())
    s += fmt::format(" ({} {})", a["core_kind"].get<std::string>(), a.value("core", 0));
  return s;
}

const json& field(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

const json& items(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json& v = field(j, key);
  return v.is_array() ? v : kEmpty;
}

const json* run_field(const json& r, const std::optional<std::string>& variant, const char* key) {
  if (!variant) return &field(r, key);
  for (const auto& v : items(r, "variants"))
    if (v.value("name", "") == *variant) return &field(v, key);
  return nullptr;
}

std::string variant_suffix(const std::optional<std::string>& variant) {
  return variant ? " of variant " + *variant : std::string();
}

namespace {

/// Splits "<op> <number>" into the comparison (default "==") and the number text.
std::pair<std::string, std::string> split_bound(const std::string& s) {
  static const char* ops[] = {">=", "<=", "==", ">", "<"};
  std::string cmp = "==", rest = s;
  for (const char* op : ops) {
    if (s.rfind(op, 0) == 0) {
      cmp = op;
      rest = s.substr(std::string(op).size());
      break;
    }
  }
  rest.erase(0, rest.find_first_not_of(' '));
  return {cmp, rest};
}

template <class T> bool compare(const std::string& cmp, T v, T n) {
  if (cmp == ">=") return v >= n;
  if (cmp == "<=") return v <= n;
  if (cmp == ">") return v > n;
  if (cmp == "<") return v < n;
  return v == n;
}

}  // namespace

bool CountBound::holds(std::uint64_t v) const { return compare(cmp, v, n); }

std::string CountBound::str() const { return fmt::format("{} {}", cmp, n); }

bool ValueBound::holds(double v) const { return compare(cmp, v, x); }

std::string ValueBound::str() const { return fmt::format("{} {}", cmp, x); }

ValueBound parse_value_bound(const YamlView& v) {
  ValueBound b;
  const std::string s = v.str();
  const auto [cmp, rest] = split_bound(s);
  b.cmp = cmp;
  char* end = nullptr;
  b.x = rest.empty() ? 0.0 : std::strtod(rest.c_str(), &end);
  if (rest.empty() || end != rest.c_str() + rest.size() || !std::isfinite(b.x))
    v.fail("a number X or a bound '>= X', '<= X', '> X', '< X', '== X'", "'" + s + "'");
  return b;
}

CountBound parse_bound(const YamlView& v) {
  CountBound b;
  const std::string s = v.str();
  auto [cmp, rest] = split_bound(s);
  b.cmp = cmp;
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

}  // namespace probelab::sim::expect
