#include "injectors/params.h"

#include <fmt/format.h>

#include <charconv>

namespace probelab::inject {

std::string IndexSet::str() const {
  if (all) return "all";
  std::string s = "[";
  bool first = true;
  for (auto v : values) {
    s += fmt::format("{}{}", first ? "" : ", ", v);
    first = false;
  }
  return s + "]";
}

Params::Params(YAML::Node node, std::string where, const std::vector<ParamSpec>& specs)
    : node_(std::move(node)), where_(std::move(where)), specs_(specs) {
  if (!node_.IsMap()) throw InjectorError(fmt::format("{}: an injection must be a mapping", where_));
  for (const auto& kv : node_) {
    const auto key = kv.first.as<std::string>();
    if (key == "kind") continue;
    bool known = false;
    for (const auto& s : specs_) known = known || s.name == key;
    if (!known) {
      std::string valid;
      for (const auto& s : specs_) valid += (valid.empty() ? "" : ", ") + s.name;
      throw InjectorError(fmt::format("{}: unknown key '{}' (valid keys: kind, {})", where_, key, valid));
    }
  }
  for (const auto& s : specs_) {
    if (s.required() && !node_[s.name]) {
      throw InjectorError(fmt::format("{}: missing required key '{}' ({})", where_, s.name, s.doc));
    }
  }
}

const ParamSpec& Params::spec(const std::string& key) const {
  for (const auto& s : specs_) {
    if (s.name == key) return s;
  }
  throw std::logic_error("injector reads undeclared parameter '" + key + "'");
}

YAML::Node ParamSpec::default_node() const {
  if (default_value.empty() || default_value == "-") return YAML::Node();
  try {
    return YAML::Load(default_value);
  } catch (const YAML::Exception&) {
    return YAML::Node(default_value);
  }
}

bool Params::has(const std::string& key) const {
  spec(key);
  return static_cast<bool>(node_[key]);
}

YAML::Node Params::value(const std::string& key) const {
  const auto& s = spec(key);
  if (node_[key]) return node_[key];
  return s.default_node();
}

YAML::Node Params::node(const std::string& key) const { return value(key); }

void Params::fail(const std::string& key, const std::string& what) const {
  throw InjectorError(fmt::format("{}: key '{}': {}", where_, key, what), key);
}

std::string Params::str(const std::string& key) const {
  auto v = value(key);
  if (!v.IsScalar()) fail(key, "expected a string");
  return v.as<std::string>();
}

std::int64_t Params::integer(const std::string& key) const {
  auto v = value(key);
  std::int64_t out = 0;
  if (!v.IsScalar() || !YAML::convert<std::int64_t>::decode(v, out)) fail(key, "expected an integer");
  return out;
}

std::uint64_t Params::uinteger(const std::string& key) const {
  const auto v = integer(key);
  if (v < 0) fail(key, "expected a non-negative integer");
  return static_cast<std::uint64_t>(v);
}

double Params::number(const std::string& key) const {
  auto v = value(key);
  double out = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, out)) fail(key, "expected a number");
  return out;
}

bool Params::boolean(const std::string& key) const {
  auto v = value(key);
  bool out = false;
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, out)) fail(key, "expected true or false");
  return out;
}

std::string Params::choice(const std::string& key, const std::vector<std::string>& choices) const {
  const auto s = str(key);
  for (const auto& c : choices) {
    if (c == s) return s;
  }
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  fail(key, fmt::format("'{}' is not one of: {}", s, list));
}

namespace {
std::optional<std::uint64_t> parse_u64(const std::string& s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}
}  // namespace

IndexSet Params::index_set(const std::string& key) const {
  auto v = value(key);
  IndexSet out;
  auto add_item = [&](const YAML::Node& item) {
    if (!item.IsScalar()) fail(key, "expected integers or \"a-b\" ranges");
    const auto s = item.as<std::string>();
    if (s == "all") {
      out.all = true;
      return;
    }
    if (auto n = parse_u64(s)) {
      out.values.insert(*n);
      return;
    }
    const auto dash = s.find('-');
    if (dash != std::string::npos) {
      auto a = parse_u64(s.substr(0, dash));
      auto b = parse_u64(s.substr(dash + 1));
      if (a && b && *a <= *b && *b - *a < 1000000) {
        for (auto i = *a; i <= *b; ++i) out.values.insert(i);
        return;
      }
    }
    fail(key, fmt::format("'{}' is not a non-negative integer, an \"a-b\" range or \"all\"", s));
  };
  if (!v || v.IsNull()) fail(key, "expected a value");
  if (v.IsSequence()) {
    for (const auto& item : v) add_item(item);
  } else {
    add_item(v);
  }
  return out;
}

std::vector<std::int64_t> Params::int_list(const std::string& key) const {
  auto v = value(key);
  std::vector<std::int64_t> out;
  auto add = [&](const YAML::Node& n) {
    std::int64_t x = 0;
    if (!n.IsScalar() || !YAML::convert<std::int64_t>::decode(n, x)) fail(key, "expected integers");
    out.push_back(x);
  };
  if (v.IsSequence()) {
    for (const auto& n : v) add(n);
  } else if (v.IsScalar()) {
    add(v);
  } else {
    fail(key, "expected an integer or a list of integers");
  }
  return out;
}

}  // namespace probelab::inject
