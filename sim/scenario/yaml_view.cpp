#include "sim/scenario/yaml_view.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace probelab::sim {

namespace {

std::string join_choices(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += i + 1 == v.size() ? " or " : ", ";
    out += "'" + v[i] + "'";
  }
  return out;
}

}  // namespace

ScenarioError::ScenarioError(std::string file, int line, int column, std::string key,
                             std::string expected, std::string got)
    : std::runtime_error([&] {
        std::string where = file.empty() ? std::string("<input>") : file;
        if (line > 0) where += fmt::format(":{}:{}", line, column);
        std::string msg = fmt::format("{}: ", where);
        if (!key.empty()) msg += fmt::format("key '{}': ", key);
        msg += "expected " + expected;
        if (!got.empty()) msg += ", got " + got;
        return msg;
      }()),
      file_(std::move(file)),
      line_(line),
      column_(column),
      key_(std::move(key)),
      expected_(std::move(expected)) {}

std::string join_path(const std::string& parent, const std::string& key) {
  if (parent.empty()) return key;
  if (!key.empty() && key.front() == '[') return parent + key;
  return parent + "." + key;
}

YamlView::YamlView(YAML::Node node, std::string file, std::string path, YAML::Mark fallback)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)), fallback_(fallback) {}

YAML::Mark YamlView::mark() const {
  if (node_.IsDefined()) {
    YAML::Mark m = node_.Mark();
    if (!m.is_null()) return m;
  }
  return fallback_;
}

YamlView YamlView::child(const YAML::Node& n, const std::string& path) const {
  YamlView v(n, file_, path, mark());
  v.overridden_ = overridden_;
  return v;
}

YamlView YamlView::with_overrides(std::vector<std::string> paths) const {
  YamlView v = *this;
  v.overridden_ = std::make_shared<const std::vector<std::string>>(std::move(paths));
  return v;
}

const std::string* YamlView::override_of(const std::string& path) const {
  if (!overridden_) return nullptr;
  for (const auto& k : *overridden_) {
    const bool under = path == k || (path.size() > k.size() && path.compare(0, k.size(), k) == 0 &&
                                     (path[k.size()] == '.' || path[k.size()] == '['));
    if (under) return &k;
  }
  return nullptr;
}

bool YamlView::overridden(const std::string& rel) const { return override_of(join_path(path_, rel)) != nullptr; }

void YamlView::fail_at(const std::string& rel, const std::string& expected, const std::string& got) const {
  const std::string path = join_path(path_, rel);
  if (const std::string* k = override_of(path)) throw ScenarioError(file_ + " (--set " + *k + ")", 0, 0, path, expected, got);
  fail(expected, got);
}

void YamlView::fail(const std::string& expected, const std::string& got) const {
  if (const std::string* k = override_of(path_))  // a value given with --set has no place in the file
    throw ScenarioError(file_ + " (--set " + *k + ")", 0, 0, path_, expected, got);
  YAML::Mark m = mark();
  int line = m.is_null() ? 0 : m.line + 1;
  int col = m.is_null() ? 0 : m.column + 1;
  throw ScenarioError(file_, line, col, path_, expected, got);
}

std::string YamlView::describe() const {
  if (!node_.IsDefined() || node_.IsNull()) return "nothing";
  if (node_.IsMap()) return "a mapping";
  if (node_.IsSequence()) return "a list";
  return "'" + node_.Scalar() + "'";
}

void YamlView::expect_keys(std::initializer_list<const char*> allowed) const {
  expect_keys(std::vector<std::string>(allowed.begin(), allowed.end()));
}

void YamlView::expect_keys(const std::vector<std::string>& allowed) const {
  if (!node_.IsMap()) fail("a mapping", describe());
  for (const auto& kv : node_) {
    const std::string key = kv.first.Scalar();
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == key;
    if (!ok) {
      child(kv.first, join_path(path_, key)).fail(allowed.empty() ? std::string("no keys here") : "one of " + join_choices(allowed),
             "unknown key '" + key + "'");
    }
  }
}

std::vector<std::string> YamlView::keys() const {
  if (!node_.IsMap()) fail("a mapping", describe());
  std::vector<std::string> out;
  for (const auto& kv : node_) out.push_back(kv.first.Scalar());
  return out;
}

bool YamlView::has(const std::string& key) const {
  return node_.IsMap() && node_[key].IsDefined() && !node_[key].IsNull();
}

YamlView YamlView::operator[](const std::string& key) const {
  if (!node_.IsMap()) fail("a mapping", describe());
  YAML::Node n = node_[key];
  if (!n.IsDefined() || n.IsNull()) fail("a value for required key '" + key + "'", "nothing");
  return child(n, join_path(path_, key));
}

std::optional<YamlView> YamlView::get(const std::string& key) const {
  if (!node_.IsMap()) fail("a mapping", describe());
  YAML::Node n = node_[key];
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  return child(n, join_path(path_, key));
}

std::size_t YamlView::size() const {
  if (!node_.IsSequence()) fail("a list", describe());
  return node_.size();
}

YamlView YamlView::at(std::size_t i) const {
  if (!node_.IsSequence()) fail("a list", describe());
  return child(node_[i], join_path(path_, fmt::format("[{}]", i)));
}

std::vector<YamlView> YamlView::items() const {
  std::vector<YamlView> out;
  for (std::size_t i = 0, n = size(); i < n; ++i) out.push_back(at(i));
  return out;
}

std::string YamlView::scalar_or_fail(const std::string& expected) const {
  if (!node_.IsScalar()) fail(expected, describe());
  return node_.Scalar();
}

std::string YamlView::str() const { return scalar_or_fail("a string"); }

std::string YamlView::str_in(std::initializer_list<const char*> choices) const {
  return str_in(std::vector<std::string>(choices.begin(), choices.end()));
}

std::string YamlView::str_in(const std::vector<std::string>& choices) const {
  const std::string expected = "one of " + join_choices(choices);
  std::string s = scalar_or_fail(expected);
  for (const auto& c : choices)
    if (c == s) return s;
  fail(expected, "'" + s + "'");
}

std::int64_t YamlView::integer(std::int64_t min, std::int64_t max) const {
  std::string expected = "an integer";
  if (min != INT64_MIN && max != INT64_MAX)
    expected = fmt::format("an integer in [{}, {}]", min, max);
  else if (min == 0)
    expected = "a non-negative integer";
  else if (min == 1)
    expected = "a positive integer";
  else if (min != INT64_MIN)
    expected = fmt::format("an integer >= {}", min);
  std::string s = scalar_or_fail(expected);
  std::int64_t v = 0;
  const char* b = s.data();
  const char* e = b + s.size();
  if (!s.empty() && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || s.empty()) fail(expected, "'" + s + "'");
  if (v < min || v > max) fail(expected, "'" + s + "'");
  return v;
}

std::uint64_t YamlView::uinteger() const {
  const std::string expected = "a non-negative integer";
  std::string s = scalar_or_fail(expected);
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) fail(expected, "'" + s + "'");
  return v;
}

double YamlView::number() const {
  std::string s = scalar_or_fail("a finite number");
  double v = 0;
  try {
    v = node_.as<double>();
  } catch (const YAML::Exception&) {
    fail("a finite number", "'" + s + "'");
  }
  // YAML's .nan and .inf parse as numbers; no scenario value means either.
  if (!std::isfinite(v)) fail("a finite number", "'" + s + "'");
  return v;
}

bool YamlView::boolean() const {
  std::string s = scalar_or_fail("true or false");
  if (s == "true" || s == "True" || s == "TRUE" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "False" || s == "FALSE" || s == "no" || s == "off") return false;
  fail("true or false", "'" + s + "'");
}

std::string YamlView::str_or(const std::string& key, const std::string& def) const {
  auto v = get(key);
  return v ? v->str() : def;
}

std::int64_t YamlView::int_or(const std::string& key, std::int64_t def, std::int64_t min,
                              std::int64_t max) const {
  auto v = get(key);
  return v ? v->integer(min, max) : def;
}

double YamlView::number_or(const std::string& key, double def) const {
  auto v = get(key);
  return v ? v->number() : def;
}

bool YamlView::bool_or(const std::string& key, bool def) const {
  auto v = get(key);
  return v ? v->boolean() : def;
}

}  // namespace probelab::sim
