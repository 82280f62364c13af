// Typed reading of YAML config nodes with errors naming file, line (YAML mark), key and reason.
// Internal to the probe config parser (probe_config.cpp, config_sections.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "graph/graph.h"
#include "graph/user_regex.h"
#include "probes/probe_config.h"

namespace probelab::probes::detail {

class Reader {
 public:
  explicit Reader(std::string source) : src_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Node& n, const std::string& key, const std::string& reason) const {
    int line = n.IsDefined() ? n.Mark().line + 1 : 0;
    if (line <= 0) line = 0;
    throw ConfigError(src_, line, key, reason);
  }

  void check_keys(const YAML::Node& map, const std::string& path, std::initializer_list<std::string_view> allowed) const {
    if (!map.IsMap()) fail(map, path, "expected a mapping");
    for (auto it = map.begin(); it != map.end(); ++it) {
      std::string k = it->first.as<std::string>();
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        std::string list;
        for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail(it->first, join(path, k), fmt::format("unknown key (expected one of: {})", list));
      }
    }
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  std::string str(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, key, "expected a string");
    return n.as<std::string>();
  }
  /// The value of the option named by string `n`; otherwise fails with
  /// "unknown <what> 'x' (expected a, b or c)".
  template <class T>
  T choice(const YAML::Node& n, const std::string& key, std::string_view what,
           std::initializer_list<std::pair<std::string_view, T>> options) const {
    const std::string s = str(n, key);
    std::string list;
    std::size_t i = 0;
    for (const auto& [name, value] : options) {
      if (name == s) return value;
      if (i > 0) list += i + 1 == options.size() ? " or " : ", ";
      list += name;
      ++i;
    }
    fail(n, key, fmt::format("unknown {} '{}' (expected {})", what, s, list));
  }
  bool boolean(const YAML::Node& n, const std::string& key) const {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) fail(n, key, "expected true or false");
    return v;
  }
  double number(const YAML::Node& n, const std::string& key) const {
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v)) fail(n, key, "expected a number");
    if (std::isnan(v)) fail(n, key, "expected a number, got NaN");  // .inf may disable a bound; NaN means nothing
    return v;
  }
  double rate(const YAML::Node& n, const std::string& key) const {
    double v = number(n, key);
    if (!(v >= 0.0 && v <= 1.0)) fail(n, key, fmt::format("sample rate {} is outside [0, 1]", v));
    return v;
  }
  std::int64_t integer(const YAML::Node& n, const std::string& key, std::int64_t lo, std::int64_t hi) const {
    std::int64_t v = 0;
    if (!n.IsScalar() || !YAML::convert<std::int64_t>::decode(n, v)) fail(n, key, "expected an integer");
    if (v < lo || v > hi) fail(n, key, fmt::format("{} is outside [{}, {}]", v, lo, hi));
    return v;
  }
  std::vector<std::string> strings(const YAML::Node& n, const std::string& key) const {
    std::vector<std::string> out;
    if (n.IsScalar()) {
      out.push_back(n.as<std::string>());
    } else if (n.IsSequence()) {
      for (std::size_t i = 0; i < n.size(); ++i) out.push_back(str(n[i], fmt::format("{}[{}]", key, i)));
    } else {
      fail(n, key, "expected a string or a list of strings");
    }
    return out;
  }

  /// [1, "4-6", 9] or "all" or a single integer.
  IntSet intset(const YAML::Node& n, const std::string& key) const {
    IntSet s;
    if (n.IsScalar() && n.as<std::string>() == "all") return s;
    auto one = [&](const YAML::Node& e, const std::string& k) {
      std::string t = e.as<std::string>();
      auto dash = t.find('-', 1);
      try {
        std::size_t used = 0;
        if (dash == std::string::npos) {
          long long v = std::stoll(t, &used);
          if (used != t.size() || v < 0) throw std::invalid_argument(t);
          s.add(v, v);
        } else {
          std::size_t u1 = 0, u2 = 0;
          long long lo = std::stoll(t.substr(0, dash), &u1);
          long long hi = std::stoll(t.substr(dash + 1), &u2);
          if (u1 != dash || u2 != t.size() - dash - 1 || lo < 0 || hi < lo) throw std::invalid_argument(t);
          s.add(lo, hi);
        }
      } catch (const std::exception&) {
        fail(e, k, fmt::format("'{}' is not a non-negative integer or an ascending range \"a-b\"", t));
      }
    };
    if (n.IsScalar()) {
      one(n, key);
    } else if (n.IsSequence()) {
      if (n.size() == 0) fail(n, key, "empty list (omit the key, or use \"all\")");
      for (std::size_t i = 0; i < n.size(); ++i) {
        if (!n[i].IsScalar()) fail(n[i], fmt::format("{}[{}]", key, i), "expected an integer or \"a-b\"");
        one(n[i], fmt::format("{}[{}]", key, i));
      }
    } else {
      fail(n, key, "expected a list of integers and \"a-b\" ranges, or \"all\"");
    }
    return s;
  }

  CaptureMode mode(const YAML::Node& n, const std::string& key) const {
    auto m = parse_capture_mode(str(n, key));
    if (!m) fail(n, key, fmt::format("unknown capture mode '{}' (expected statistics, full or hash)", n.as<std::string>()));
    return *m;
  }

  DirectionFilter direction(const YAML::Node& n, const std::string& key) const {
    std::string s = str(n, key);
    for (auto d : {DirectionFilter::Forward, DirectionFilter::Backward, DirectionFilter::Optimizer, DirectionFilter::All})
      if (direction_filter_name(d) == s) return d;
    fail(n, key, fmt::format("unknown direction '{}' (expected forward, backward, optimizer or all)", s));
  }

  std::string regex(const YAML::Node& n, const std::string& key) const {
    std::string r = str(n, key);
    try {
      graph::compile_user_regex(r);
    } catch (const graph::GraphError& e) {
      fail(n, key, fmt::format("invalid regex '{}': {}", r.size() > 80 ? r.substr(0, 80) + "..." : r, e.what()));
    }
    return r;
  }

  void glob(const YAML::Node& n, const std::string& key, const std::string& g) const {
    try {
      graph::glob_match(g, "");
    } catch (const std::exception& e) {
      fail(n, key, fmt::format("invalid glob '{}': {}", g, e.what()));
    }
  }

  Expr expr(const YAML::Node& n, const std::string& key, const std::string& text) const {
    try {
      return Expr::parse(text);
    } catch (const ExprError& e) {
      fail(n, key, fmt::format("bad expression '{}': {}", text, e.what()));
    }
  }

  /// Action names; `rewind(...)` fills `rewind` (when given) with its arguments.
  std::vector<Action> actions(const YAML::Node& n, const std::string& key, RewindSpec* rewind = nullptr) const {
    std::vector<Action> out;
    auto names = strings(n, key);
    for (std::size_t i = 0; i < names.size(); ++i)
      out.push_back(action(n.IsSequence() ? n[i] : n, key, names[i], rewind));
    return out;
  }

  Action action(const YAML::Node& n, const std::string& key, const std::string& name, RewindSpec* rewind) const {
    std::optional<RewindSpec> rw;
    try {
      rw = parse_rewind(name);
    } catch (const std::invalid_argument& e) {
      fail(n, key, e.what());
    }
    if (rw) {
      if (rewind) *rewind = *rw;
      return Action::Rewind;
    }
    auto a = parse_action(name);
    if (!a)
      fail(n, key,
           fmt::format("unknown action '{}' (expected full_dump, stats_dump, break, enable_verbose, stop or rewind(...))",
                       name));
    return *a;
  }

  const std::string& source() const { return src_; }

 private:
  std::string src_;
};

/// Parses the probes section rooted at `root` into `cfg` (see probe_config.h for the schema).
void parse_sections(const Reader& r, const YAML::Node& root, ProbeConfig& cfg);

}  // namespace probelab::probes::detail
