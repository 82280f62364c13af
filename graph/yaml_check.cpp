#include "graph/yaml_check.h"

#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace probelab::graph {

namespace {

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

}  // namespace

std::optional<YamlDocumentIssue> check_yaml_document(const YAML::Node& root, std::size_t max_nodes) {
  std::vector<std::pair<YAML::Node, std::string>> todo;
  todo.emplace_back(root, "");
  std::size_t visited = 0;
  while (!todo.empty()) {
    auto [node, path] = std::move(todo.back());
    todo.pop_back();
    if (++visited > max_nodes) {
      const YAML::Mark m = node.Mark();
      return YamlDocumentIssue{path, m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1,
                               fmt::format("the document expands to more than {} nodes (through anchors and "
                                           "aliases?); no configuration needs that many",
                                           max_nodes)};
    }
    if (node.IsMap()) {
      std::map<std::string, int> seen;  // scalar key -> line of its first occurrence
      std::vector<std::pair<YAML::Node, std::string>> children;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) continue;  // complex keys: the readers reject them as unknown keys
        const std::string& key = kv.first.Scalar();
        const YAML::Mark m = kv.first.Mark();
        const int line = m.is_null() ? 0 : m.line + 1;
        if (auto [it, fresh] = seen.emplace(key, line); !fresh)
          return YamlDocumentIssue{child_path(path, key), line, m.is_null() ? 0 : m.column + 1,
                                   it->second > 0 ? fmt::format("duplicate key '{}' (first given on line {})", key,
                                                                it->second)
                                                  : fmt::format("duplicate key '{}'", key)};
        children.emplace_back(kv.second, child_path(path, key));
      }
      // Visit in document order: the stack pops the last pushed first.
      for (auto it = children.rbegin(); it != children.rend(); ++it) todo.push_back(std::move(*it));
    } else if (node.IsSequence()) {
      for (std::size_t i = node.size(); i-- > 0;) todo.emplace_back(node[i], fmt::format("{}[{}]", path, i));
    }
  }
  return std::nullopt;
}

}  // namespace probelab::graph
