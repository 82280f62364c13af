// Ops of the workload IR: typed attributes, debug options, provenance.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "graph/dtype.h"

namespace probelab::graph {

using AttrValue = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>,
                               std::vector<double>, std::vector<std::string>>;
using Attrs = std::map<std::string, AttrValue>;
/// "int", "float", "string", "int list", "float list", "string list".
std::string_view attr_value_type_name(const AttrValue& v);
/// The value as written in a model file: 3, 0.5, "same", [1, 1], ["a", "b"].
std::string attr_value_str(const AttrValue& v);

/// Which pass of a training step an op belongs to (watch points filter on it).
enum class Direction : std::uint8_t { Forward, Backward, Optimizer };
std::string_view direction_name(Direction d);

/// Per-op debug options (the article's `debug_options` field of an op prototype).
struct DebugOptions {
  std::optional<double> sample_rate;  // overrides the probe config's rate for this op
  bool capture = true;                // false: never insert capture probes here
};

/// One node. Tensors are referenced by name; each output tensor has exactly one producer.
struct Op {
  std::uint32_t id = 0;         // dense, stable within one graph snapshot (index in Graph::ops())
  std::string name;             // unique in the graph, e.g. "layer4/conv2"
  std::string type;             // registered op type, e.g. "Conv2d"
  std::string scope;            // scope path, e.g. "model/layer4/conv2"
  std::vector<std::string> inputs;   // tensor names; "" marks an omitted optional input
  std::vector<std::string> outputs;  // tensor names
  Attrs attrs;
  DebugOptions debug;
  Direction direction = Direction::Forward;
  /// For a fused op: the names of the ops (in the snapshot it was fused from) that it replaced, in
  /// execution order. Empty otherwise.
  std::vector<std::string> fused_from;
  /// For a fused op: the replaced ops themselves (inputs/outputs renamed so that the body reads the
  /// fused op's inputs and writes its outputs; intermediates are named "<fused op>/<inner op>:<i>").
  /// Lets the device kernel and the reference comparison decompose the fused op without the
  /// snapshot it came from.
  std::vector<Op> fused_body;
  /// For a backward op: the forward op it differentiates. Empty otherwise.
  std::string grad_of;

  // Typed attribute access; throw GraphError naming op and attribute when missing or mistyped.
  std::int64_t attr_int(const std::string& key) const;
  std::int64_t attr_int(const std::string& key, std::int64_t def) const;
  double attr_float(const std::string& key) const;
  double attr_float(const std::string& key, double def) const;
  std::string attr_str(const std::string& key) const;
  std::string attr_str(const std::string& key, const std::string& def) const;
  std::vector<std::int64_t> attr_ints(const std::string& key) const;
  std::vector<std::int64_t> attr_ints(const std::string& key, std::vector<std::int64_t> def) const;
  /// attr_float accepts an int value, attr_floats an int list; an empty list of any type matches
  /// every list accessor.
  std::vector<double> attr_floats(const std::string& key) const;
  std::vector<double> attr_floats(const std::string& key, std::vector<double> def) const;
  std::vector<std::string> attr_strs(const std::string& key) const;
  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
};

}  // namespace probelab::graph
