#include "probes/probe_config.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "graph/yaml_check.h"
#include "probes/detail/config_reader.h"
#include "probes/msprobe_config.h"

namespace probelab::probes {

ConfigError::ConfigError(std::string file, int line, std::string key, std::string reason)
    : std::runtime_error(line > 0 ? fmt::format("{}:{}: {}: {}", file, line, key, reason)
                                  : fmt::format("{}: {}: {}", file, key, reason)),
      file_(std::move(file)), key_(std::move(key)), reason_(std::move(reason)), line_(line) {}

std::string_view capture_mode_name(CaptureMode m) {
  switch (m) {
    case CaptureMode::Statistics: return "statistics";
    case CaptureMode::Full: return "full";
    case CaptureMode::Hash: return "hash";
  }
  return "?";
}

std::optional<CaptureMode> parse_capture_mode(std::string_view s) {
  if (s == "statistics" || s == "stats" || s == "summary") return CaptureMode::Statistics;
  if (s == "full" || s == "tensor" || s == "full_tensor") return CaptureMode::Full;
  if (s == "hash" || s == "md5" || s == "digest") return CaptureMode::Hash;
  return std::nullopt;
}

std::string_view direction_filter_name(DirectionFilter d) {
  switch (d) {
    case DirectionFilter::Forward: return "forward";
    case DirectionFilter::Backward: return "backward";
    case DirectionFilter::Optimizer: return "optimizer";
    case DirectionFilter::All: return "all";
  }
  return "?";
}

std::string_view action_name(Action a) {
  switch (a) {
    case Action::FullDump: return "full_dump";
    case Action::StatsDump: return "stats_dump";
    case Action::Break: return "break";
    case Action::EnableVerbose: return "enable_verbose";
    case Action::Stop: return "stop";
    case Action::Rewind: return "rewind";
  }
  return "?";
}

std::optional<Action> parse_action(std::string_view s) {
  for (Action a : {Action::FullDump, Action::StatsDump, Action::Break, Action::EnableVerbose, Action::Stop, Action::Rewind})
    if (action_name(a) == s) return a;
  return std::nullopt;
}

std::string RewindSpec::text() const {
  return fmt::format("rewind({}, {}, {})", full ? "full_dump" : "stats_dump", all_ops ? "all" : "implicated",
                     then_continue ? "continue" : "stop");
}

std::optional<RewindSpec> parse_rewind(std::string_view s) {
  if (s.rfind("rewind", 0) != 0) return std::nullopt;
  std::string_view rest = s.substr(6);
  RewindSpec spec;
  if (rest.empty()) return spec;
  if (rest.front() != '(' || rest.back() != ')') return std::nullopt;
  std::string args(rest.substr(1, rest.size() - 2));
  for (char& c : args)
    if (c == ',') c = ' ';
  std::istringstream in(args);
  std::string word;
  std::set<std::string> seen;
  while (in >> word) {
    if (!seen.insert(word).second) throw std::invalid_argument(fmt::format("rewind argument '{}' given twice", word));
    if (word == "full_dump") spec.full = true;
    else if (word == "stats_dump") spec.full = false;
    else if (word == "all") spec.all_ops = true;
    else if (word == "implicated") spec.all_ops = false;
    else if (word == "continue") spec.then_continue = true;
    else if (word == "stop") spec.then_continue = false;
    else
      throw std::invalid_argument(fmt::format("unknown rewind argument '{}' (expected full_dump or stats_dump, "
                                              "implicated or all, stop or continue)",
                                              word));
  }
  return spec;
}

void IntSet::add(std::int64_t lo, std::int64_t hi) {
  all_ = false;
  ranges_.emplace_back(lo, hi);
  std::sort(ranges_.begin(), ranges_.end());
}

bool IntSet::contains(std::int64_t v) const {
  if (all_) return true;
  for (auto [lo, hi] : ranges_)
    if (v >= lo && v <= hi) return true;
  return false;
}

std::string IntSet::str() const {
  if (all_) return "all";
  std::string s = "[";
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    if (i) s += ", ";
    s += ranges_[i].first == ranges_[i].second ? fmt::format("{}", ranges_[i].first)
                                               : fmt::format("{}-{}", ranges_[i].first, ranges_[i].second);
  }
  return s + "]";
}

bool WatchPoint::has_action(Action a) const {
  for (const auto& c : conditions)
    if (std::find(c.actions.begin(), c.actions.end(), a) != c.actions.end()) return true;
  return false;
}

CompareCriteria::CompareCriteria() {
  // CANN single-benchmark operator standard: MERE threshold per output dtype.
  mean_rel_err = {{graph::DType::F16, 0x1p-10}, {graph::DType::BF16, 0x1p-7}, {graph::DType::F32, 0x1p-13}};
}

// ---- parsing -----------------------------------------------------------------------------------
using detail::Reader;


ProbeConfig ProbeConfig::from_yaml(const YAML::Node& node, const std::string& source) {
  Reader r(source);
  ProbeConfig cfg;
  cfg.source = source;
  if (!node.IsDefined() || node.IsNull()) return cfg;
  if (node.IsScalar()) {  // a config file: next to the scenario, or relative to the working directory
    const std::filesystem::path f = node.as<std::string>();
    const std::filesystem::path beside = std::filesystem::path(source).parent_path() / f;
    // Non-throwing checks: a name the file system refuses (too long, ...) is a file not found.
    std::error_code ec;
    if (f.is_relative() && std::filesystem::exists(beside, ec)) return from_file(beside);
    if (std::filesystem::exists(f, ec)) return from_file(f);
    r.fail(node, "probes", fmt::format("config file '{}' not found (looked beside {} and in the working directory)",
                                       f.string(), source));
  }
  if (!node.IsMap()) r.fail(node, "probes", "expected a mapping, or the path of a config file");
  if (auto issue = graph::check_yaml_document(node)) throw ConfigError(source, issue->line, issue->key, issue->message);
  try {
    if (is_msprobe_config(node)) {
      MsprobeTranslation t = translate_msprobe(node, source);
      parse_sections(r, t.probes, cfg);
      cfg.format = "msprobe";
      cfg.mapping = std::move(t.mapping);
      cfg.translated = YAML::Dump(t.probes);
      cfg.load_warnings = std::move(t.warnings);
    } else {
      parse_sections(r, node, cfg);
    }
  } catch (const YAML::Exception& e) {
    throw ConfigError(source, e.mark.line + 1, "probes", e.msg);
  }
  return cfg;
}

ProbeConfig ProbeConfig::from_string(std::string_view text, const std::string& source) {
  if (auto issue = graph::check_yaml_text(text))
    throw ConfigError(source, issue->line, "<document>", fmt::format("expected {}, got {}", issue->expected, issue->message));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw ConfigError(source, e.mark.line + 1, "<document>", fmt::format("malformed YAML/JSON: {}", e.msg));
  }
  if (root.IsMap() && root["probes"] && root.size() == 1) return from_yaml(root["probes"], source);
  return from_yaml(root, source);
}

ProbeConfig ProbeConfig::from_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(file.string(), 0, "<file>", "cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_string(ss.str(), file.string());
}

}  // namespace probelab::probes
