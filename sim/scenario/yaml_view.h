// Typed, validating access to a YAML document: every accessor knows the file and the dotted key
// path of its node, so a bad value raises a ScenarioError naming file, line:column, key and what
// was expected. Used by the scenario loader; usable for any YAML configuration of the harness.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

class YamlView {
 public:
  /// `fallback` is the mark used when `node` has none (nodes created by --set overrides, or a
  /// missing key: then the parent's position).
  YamlView(YAML::Node node, std::string file, std::string path, YAML::Mark fallback = YAML::Mark::null_mark());

  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  YAML::Mark mark() const;

  bool is_map() const { return node_.IsMap(); }
  bool is_seq() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }
  bool defined() const { return node_.IsDefined() && !node_.IsNull(); }

  /// Requires a mapping whose keys are all in `allowed`; unknown keys are errors listing the
  /// allowed ones.
  void expect_keys(std::initializer_list<const char*> allowed) const;
  void expect_keys(const std::vector<std::string>& allowed) const;
  /// Requires a mapping; returns its keys in file order.
  std::vector<std::string> keys() const;

  bool has(const std::string& key) const;
  /// A required key; error when missing.
  YamlView operator[](const std::string& key) const;
  /// An optional key: nullopt when missing or null.
  std::optional<YamlView> get(const std::string& key) const;
  /// Sequence access.
  std::size_t size() const;
  YamlView at(std::size_t i) const;
  std::vector<YamlView> items() const;  // a sequence's elements (error if not a sequence)

  // Scalars. `expected` overrides the default description in errors.
  std::string str() const;
  std::string str_in(std::initializer_list<const char*> choices) const;
  std::string str_in(const std::vector<std::string>& choices) const;
  std::int64_t integer(std::int64_t min = INT64_MIN, std::int64_t max = INT64_MAX) const;
  std::uint64_t uinteger() const;
  double number() const;  // finite: .nan and .inf are errors
  bool boolean() const;

  // Optional scalars with defaults.
  std::string str_or(const std::string& key, const std::string& def) const;
  std::int64_t int_or(const std::string& key, std::int64_t def, std::int64_t min = INT64_MIN,
                      std::int64_t max = INT64_MAX) const;
  double number_or(const std::string& key, double def) const;
  bool bool_or(const std::string& key, bool def) const;

  [[noreturn]] void fail(const std::string& expected, const std::string& got = {}) const;
  /// Whether the value at `rel` below this node ("a.b", "[0].c", as path() reads them) was given
  /// with --set.
  bool overridden(const std::string& rel) const;
  /// For a validator of this node that knows which of its values is wrong: names the --set key
  /// when the value at `rel` was given with --set, else fails as fail() (this node's position).
  [[noreturn]] void fail_at(const std::string& rel, const std::string& expected, const std::string& got = {}) const;
  /// This view, and the views taken from it, with the values under `paths` (as path() reads them:
  /// "a[0].b") given on the command line: their errors name the --set key, not a file position.
  YamlView with_overrides(std::vector<std::string> paths) const;
  /// Short rendering of the node for error messages ("a mapping", "'abc'", ...).
  std::string describe() const;

 private:
  YamlView child(const YAML::Node& n, const std::string& path) const;
  std::string scalar_or_fail(const std::string& expected) const;
  /// The --set key `path` is under (or is), else null.
  const std::string* override_of(const std::string& path) const;

  YAML::Node node_;
  std::string file_;
  std::string path_;
  YAML::Mark fallback_;
  std::shared_ptr<const std::vector<std::string>> overridden_;  // paths given with --set
};

/// Joins a dotted key path: join_path("a", "b") == "a.b", join_path("", "b") == "b".
std::string join_path(const std::string& parent, const std::string& key);

}  // namespace probelab::sim
