// Typed attribute access of Op.
#include "graph/op.h"

#include <fmt/format.h>

#include "graph/graph.h"

namespace probelab::graph {
namespace {

std::string_view attr_type_name(const AttrValue& v) {
  static constexpr std::string_view kNames[] = {"int", "float", "string", "int list", "float list", "string list"};
  return kNames[v.index()];
}

[[noreturn]] void missing(const Op& op, const std::string& key) {
  throw GraphError(fmt::format("op '{}' ({}): missing attribute '{}'", op.name, op.type, key));
}

[[noreturn]] void mistyped(const Op& op, const std::string& key, const AttrValue& v, std::string_view expected) {
  throw GraphError(fmt::format("op '{}' ({}): attribute '{}' has type {}, expected {}", op.name, op.type, key,
                               attr_type_name(v), expected));
}

const AttrValue& get(const Op& op, const std::string& key) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end()) missing(op, key);
  return it->second;
}

}  // namespace

std::string_view direction_name(Direction d) {
  switch (d) {
    case Direction::Forward: return "forward";
    case Direction::Backward: return "backward";
    case Direction::Optimizer: return "optimizer";
  }
  return "invalid";
}

std::string_view attr_value_type_name(const AttrValue& v) { return attr_type_name(v); }

std::string attr_value_str(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) return fmt::format("\"{}\"", x);
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::vector<std::string> q;
          for (const auto& s : x) q.push_back(fmt::format("\"{}\"", s));
          return fmt::format("[{}]", fmt::join(q, ", "));
        } else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>)
          return fmt::format("{}", x);
        else
          return fmt::format("[{}]", fmt::join(x, ", "));
      },
      v);
}

std::int64_t Op::attr_int(const std::string& key) const {
  const AttrValue& v = get(*this, key);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  mistyped(*this, key, v, "int");
}

std::int64_t Op::attr_int(const std::string& key, std::int64_t def) const {
  return has_attr(key) ? attr_int(key) : def;
}

double Op::attr_float(const std::string& key) const {
  const AttrValue& v = get(*this, key);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  mistyped(*this, key, v, "float");
}

double Op::attr_float(const std::string& key, double def) const { return has_attr(key) ? attr_float(key) : def; }

std::string Op::attr_str(const std::string& key) const {
  const AttrValue& v = get(*this, key);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  mistyped(*this, key, v, "string");
}

std::string Op::attr_str(const std::string& key, const std::string& def) const {
  return has_attr(key) ? attr_str(key) : def;
}

std::vector<std::int64_t> Op::attr_ints(const std::string& key) const {
  const AttrValue& v = get(*this, key);
  if (const auto* l = std::get_if<std::vector<std::int64_t>>(&v)) return *l;
  // An empty list has no element type; accept it whatever list type it was stored as.
  if (const auto* l = std::get_if<std::vector<double>>(&v); l && l->empty()) return {};
  if (const auto* l = std::get_if<std::vector<std::string>>(&v); l && l->empty()) return {};
  mistyped(*this, key, v, "int list");
}

std::vector<std::int64_t> Op::attr_ints(const std::string& key, std::vector<std::int64_t> def) const {
  return has_attr(key) ? attr_ints(key) : def;
}

std::vector<double> Op::attr_floats(const std::string& key) const {
  const AttrValue& v = get(*this, key);
  if (const auto* l = std::get_if<std::vector<double>>(&v)) return *l;
  if (const auto* l = std::get_if<std::vector<std::int64_t>>(&v)) return {l->begin(), l->end()};
  if (const auto* l = std::get_if<std::vector<std::string>>(&v); l && l->empty()) return {};
  mistyped(*this, key, v, "float list");
}

std::vector<double> Op::attr_floats(const std::string& key, std::vector<double> def) const {
  return has_attr(key) ? attr_floats(key) : def;
}

std::vector<std::string> Op::attr_strs(const std::string& key) const {
  const AttrValue& v = get(*this, key);
  if (const auto* l = std::get_if<std::vector<std::string>>(&v)) return *l;
  if (const auto* l = std::get_if<std::vector<std::int64_t>>(&v); l && l->empty()) return {};
  if (const auto* l = std::get_if<std::vector<double>>(&v); l && l->empty()) return {};
  mistyped(*this, key, v, "string list");
}

}  // namespace probelab::graph
