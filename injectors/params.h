// Typed, validated reading of an injection descriptor (a YAML mapping), in the style of
// Ramulator's required()/default_val(): every key an injector accepts is declared once in a
// ParamSpec list (name, type, default, doc) that also feeds `probelab list`; a key not declared
// is an error, and every error names the descriptor's position, the key and what was expected.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace probelab::inject {

/// Bad injection descriptor (exit code 2 at the CLI).
class InjectorError : public std::runtime_error {
 public:
  /// `key`: the descriptor key at fault, when one is ("" otherwise).
  explicit InjectorError(const std::string& what, std::string key = {}) : std::runtime_error(what), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

struct ParamSpec {
  std::string name;
  std::string type;           // human-readable: "glob", "int", "list of int|range", ...
  std::string default_value;  // "" = required
  std::string doc;
  bool required() const { return default_value.empty(); }
  /// The default as a YAML node (null when there is none); text that is not valid YAML, such
  /// as the glob "*", stands for itself.
  YAML::Node default_node() const;
};

/// Steps or ranks: a list of values and "a-b" ranges, or "all".
struct IndexSet {
  bool all = false;
  std::set<std::uint64_t> values;
  bool contains(std::uint64_t v) const { return all || values.count(v) != 0; }
  std::string str() const;
};

class Params {
 public:
  /// `where` is e.g. "scenario.yaml:14:5: injections[2] (nan)".
  Params(YAML::Node node, std::string where, const std::vector<ParamSpec>& specs);

  bool has(const std::string& key) const;
  std::string str(const std::string& key) const;
  std::int64_t integer(const std::string& key) const;
  std::uint64_t uinteger(const std::string& key) const;
  double number(const std::string& key) const;
  bool boolean(const std::string& key) const;
  IndexSet index_set(const std::string& key) const;
  std::vector<std::int64_t> int_list(const std::string& key) const;
  /// The raw node (for keys with several accepted shapes); Null if absent and no default.
  YAML::Node node(const std::string& key) const;
  /// One of `choices`, else an error listing them.
  std::string choice(const std::string& key, const std::vector<std::string>& choices) const;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  const std::string& where() const { return where_; }
  const YAML::Node& raw() const { return node_; }

 private:
  YAML::Node value(const std::string& key) const;  // given value, else the spec default parsed as YAML
  const ParamSpec& spec(const std::string& key) const;
  YAML::Node node_;
  std::string where_;
  const std::vector<ParamSpec>& specs_;
};

}  // namespace probelab::inject
