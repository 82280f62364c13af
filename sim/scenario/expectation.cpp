#include "sim/scenario/expectation.h"

#include <stdexcept>

#include <fmt/format.h>

namespace probelab::sim {

void ExpectationCheck::validate(const ExpectationScope&, const YamlView&) const {}

ExpectationRegistry& ExpectationRegistry::instance() {
  static ExpectationRegistry* reg = [] {
    static ExpectationRegistry r;
    register_builtin_expectations(r);
    return &r;
  }();
  return *reg;
}

void ExpectationRegistry::add(ExpectationKind kind) {
  if (kinds_.count(kind.name)) throw std::logic_error(fmt::format("expectation kind '{}' registered twice", kind.name));
  std::string name = kind.name;
  kinds_.emplace(std::move(name), std::move(kind));
}

const ExpectationKind* ExpectationRegistry::find(const std::string& name) const {
  auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string, std::string>> expectation_kinds() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, k] : ExpectationRegistry::instance().all()) out.emplace_back(name, k.doc);
  return out;
}

const std::vector<std::string>& detection_kinds() {
  static const std::vector<std::string> k = {"overflow", "underflow", "invalid",   "nan_input", "inf_input",
                                             "nan",      "inf",       "condition", "integrity", "any"};
  return k;
}

Expectation parse_expectation(const YamlView& entry) {
  Expectation ex;
  ex.line = entry.mark().is_null() ? 0 : entry.mark().line + 1;
  std::vector<std::string> kinds;
  for (const auto& [k, _] : ExpectationRegistry::instance().all()) kinds.push_back(k);
  if (!entry.is_map() || entry.node().size() != 1)
    entry.fail("a one-key mapping naming the expectation kind (" + fmt::format("{}", fmt::join(kinds, ", ")) + ")",
               entry.describe());
  ex.kind = entry.keys().front();
  entry.expect_keys(kinds);
  YamlView body = entry.get(ex.kind).value_or(YamlView(YAML::Node(YAML::NodeType::Map), entry.file(),
                                                       join_path(entry.path(), ex.kind), entry.mark()));
  ex.check = ExpectationRegistry::instance().find(ex.kind)->parse(body);
  return ex;
}

ExpectationResult evaluate(const Expectation& e, const nlohmann::json& report) { return e.check->evaluate(report); }

}  // namespace probelab::sim
