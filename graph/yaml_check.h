// Checks of a YAML text and of its parsed document that yaml-cpp does not make, run by every
// loader of a YAML file (models, probe configs, scenarios, campaign faults, --set values).
// The text (check_yaml_text, before parsing): UTF-8 without NUL bytes (every name and value ends up
// in JSON reports, which hold UTF-8 only), and one document (yaml-cpp reads the first document of a
// text and drops the rest without a word). The document (check_yaml_document, before any key is
// read):
//  - a key given twice in one mapping (yaml-cpp keeps both pairs and lookups return the first,
//    so the second would be silently ignored);
//  - a merge key `<<` (YAML 1.1 only; yaml-cpp keeps it as an ordinary key named "<<");
//  - a document that expands, through anchors and aliases, to more nodes than any configuration
//    needs (a "billion laughs" document would otherwise exhaust memory or time downstream).
// yaml-cpp itself limits the nesting depth while parsing, so the walk here is shallow; it is
// iterative all the same.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace YAML {
class Node;
}

namespace probelab::graph {

struct YamlDocumentIssue {
  std::string key;       // dotted path of the offending key ("probes.capture.overrun", "ops[2].name")
  int line = 0;          // 1-based position of the offending node (0: unknown)
  int column = 0;
  std::string message;   // what is wrong, e.g. "duplicate key 'steps' (first given on line 3)"
  std::string expected;  // what was expected instead, e.g. "each key once in a mapping"
};

/// The first problem of `text` as a configuration text (invalid UTF-8, a NUL byte, a second YAML
/// document), at its line and column (1-based; key empty), or nullopt.
std::optional<YamlDocumentIssue> check_yaml_text(std::string_view text);

/// The first problem found walking `root` in document order, or nullopt. `max_nodes` bounds
/// the nodes visited (aliases counted at every use).
std::optional<YamlDocumentIssue> check_yaml_document(const YAML::Node& root, std::size_t max_nodes = 1'000'000);

}  // namespace probelab::graph
