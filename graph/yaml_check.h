// Checks of a parsed YAML document that yaml-cpp does not make, run by every loader of a YAML
// file (models, probe configs, scenarios, campaign faults) before it reads any key:
//  - a key given twice in one mapping (yaml-cpp keeps both pairs and lookups return the first,
//    so the second would be silently ignored);
//  - a document that expands, through anchors and aliases, to more nodes than any configuration
//    needs (a "billion laughs" document would otherwise exhaust memory or time downstream).
// yaml-cpp itself limits the nesting depth while parsing, so the walk here is shallow; it is
// iterative all the same.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace YAML {
class Node;
}

namespace probelab::graph {

struct YamlDocumentIssue {
  std::string key;       // dotted path of the offending key ("probes.capture.overrun", "ops[2].name")
  int line = 0;          // 1-based position of the offending node (0: unknown)
  int column = 0;
  std::string message;   // what is wrong, e.g. "duplicate key 'steps' (first given on line 3)"
};

/// The first problem found walking `root` in document order, or nullopt. `max_nodes` bounds
/// the nodes visited (aliases counted at every use).
std::optional<YamlDocumentIssue> check_yaml_document(const YAML::Node& root, std::size_t max_nodes = 1'000'000);

}  // namespace probelab::graph
