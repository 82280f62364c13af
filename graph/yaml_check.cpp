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

// Length of the UTF-8 sequence at s[i] (1-4), or 0 when it is not well-formed (overlong forms,
// surrogates and code points above U+10FFFF included).
constexpr const char* kText = "UTF-8 text holding one YAML document";

std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

bool blank_or_comment(std::string_view line) {
  const auto at = line.find_first_not_of(" \t\r");
  return at == std::string_view::npos || line[at] == '#';
}

bool marker(std::string_view line, std::string_view m) {  // "---" / "..." alone or followed by a space
  return line.substr(0, 3) == m && (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
}

}  // namespace

std::optional<YamlDocumentIssue> check_yaml_text(std::string_view text) {
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const int column = static_cast<int>(i - line_start) + 1;
    if (c == 0) return YamlDocumentIssue{"", line, column, "a NUL byte", kText};
    const std::size_t n = utf8_length(text, i);
    if (n == 0)
      return YamlDocumentIssue{"", line, column, fmt::format("the byte 0x{:02X}, which is not UTF-8", c), kText};
    if (c == '\n') line_start = i + 1, ++line;
    i += n;
  }
  // Document markers at the start of a line: "---" after content starts a second document, and
  // content after "..." is one.
  bool content = false, ended = false;
  line = 0;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t nl = text.find('\n', at);
    const std::string_view l = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    ++line;
    if (marker(l, "---")) {
      if (content || ended)
        return YamlDocumentIssue{"", line, 1, "a second YAML document", kText};
      content = !blank_or_comment(l.substr(3));
    } else if (marker(l, "...")) {
      ended = content || ended;
    } else if (!blank_or_comment(l) && l.front() != '%') {
      if (ended) return YamlDocumentIssue{"", line, 1, "content after the document end '...'", kText};
      content = true;
    }
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  return std::nullopt;
}

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
                                           max_nodes),
                               "a document of a configuration's size"};
    }
    if (node.IsMap()) {
      std::map<std::string, int> seen;  // scalar key -> line of its first occurrence
      std::vector<std::pair<YAML::Node, std::string>> children;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) continue;  // complex keys: the readers reject them as unknown keys
        const std::string& key = kv.first.Scalar();
        const YAML::Mark m = kv.first.Mark();
        const int line = m.is_null() ? 0 : m.line + 1;
        if (key == "<<" && kv.first.Tag() == "?")
          return YamlDocumentIssue{child_path(path, key), line, m.is_null() ? 0 : m.column + 1,
                                   "a merge key '<<' (YAML 1.1; not read here)", "the keys written out, without '<<'"};
        if (auto [it, fresh] = seen.emplace(key, line); !fresh)
          return YamlDocumentIssue{child_path(path, key), line, m.is_null() ? 0 : m.column + 1,
                                   it->second > 0 ? fmt::format("duplicate key '{}' (first given on line {})", key,
                                                                it->second)
                                                  : fmt::format("duplicate key '{}'", key),
                                   "each key once in a mapping"};
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
