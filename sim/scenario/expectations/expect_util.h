// Helpers shared by the expectation kinds in this folder: validated globs and sites, matching
// report entries, one-line renderings for expected/actual, bounds on counters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/scenario/expectation.h"

namespace probelab::sim::expect {

using nlohmann::json;

/// A non-empty, syntactically valid op/tensor glob.
std::string glob_checked(const YamlView& v);
std::optional<std::string> opt_glob(const YamlView& m, const char* key);
std::optional<std::int64_t> opt_int(const YamlView& m, const char* key, std::int64_t min = 0);

/// A kind's body where `kind: true` stands for `kind: {}` (an empty mapping at the same place).
YamlView body_or_empty(const YamlView& given);

/// Rejects `key` (a step or rank) at or beyond `limit`: "a step below steps (3)".
void check_site(const YamlView& entry, const std::string& kind, const char* key, std::optional<std::int64_t> v,
                std::int64_t limit, const char* what);

bool matches(const std::optional<std::string>& glob, const json& v);
bool matches_int(const std::optional<std::int64_t>& want, const json& v);
/// Whether anomaly `a` is of detection kind `want` (nan = invalid or nan_input; inf = inf_input
/// or a latched value of +-inf; any).
bool kind_matches(const std::string& want, const json& a);
std::string anomaly_str(const json& a);

/// `j[key]`, or null; never throws.
const json& field(const json& j, const char* key);
/// The array under `key`, or an empty array (a reference either way: nothing is copied).
const json& items(const json& j, const char* key);

/// `key` of the main run's report, or of variant `variant`'s entry in report.variants; nullptr
/// when the report has no such variant.
const json* run_field(const json& r, const std::optional<std::string>& variant, const char* key);
/// "" or " of variant <name>", for messages.
std::string variant_suffix(const std::optional<std::string>& variant);

/// "a; b; c; ... (N in all)" of the first `max` entries rendered by f; "none" when empty.
template <class F>
std::string list_str(const json& arr, F&& f, std::size_t max = 4) {
  if (!arr.is_array() || arr.empty()) return "none";
  std::string s;
  for (std::size_t i = 0; i < arr.size() && i < max; ++i) s += (i ? "; " : "") + f(arr[i]);
  if (arr.size() > max) s += fmt::format("; ... ({} in all)", arr.size());
  return s;
}

/// A bound on a counter: `value <cmp> n`.
struct CountBound {
  std::string cmp = "==";  // == >= <= > <
  std::uint64_t n = 0;
  bool holds(std::uint64_t v) const;
  std::string str() const;  // "== 0", ">= 1"
};
/// "N" or ">= N", "<= N", "> N", "< N".
CountBound parse_bound(const YamlView& v);

/// A bound on a measured value: `value <cmp> x` (x finite).
struct ValueBound {
  std::string cmp = "==";  // == >= <= > <
  double x = 0.0;
  bool holds(double v) const;
  std::string str() const;  // "== 0", ">= 1.5"
};
/// "X" (exactly X) or ">= X", "<= X", "> X", "< X", "== X".
ValueBound parse_value_bound(const YamlView& v);

/// Optional fields into a params() object, skipping unset ones.
template <class T>
void put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

}  // namespace probelab::sim::expect
