// Op definitions registered by name: attribute specs, shape inference, CPU reference kernels,
// gradient builders. One OpDef per op type; `probelab list` prints them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace probelab::graph {

struct AttrSpec {
  std::string name;
  bool required = false;
  std::optional<AttrValue> default_value;
  std::string doc;
};

/// Precision of a CPU reference run. F32 kernels read/write F32 tensors, F64 kernels F64 tensors.
enum class RefPrecision { F32, F64 };

class GradBuilder;  // graph/autodiff.h

struct OpDef {
  std::string type;   // "Conv2d"
  std::string doc;    // one line
  int min_inputs = 1;
  int max_inputs = 1;
  int num_outputs = 1;
  std::vector<AttrSpec> attrs;
  /// Output descs from input descs; throws GraphError naming the op on a mismatch.
  std::function<std::vector<TensorDesc>(const Op&, std::span<const TensorDesc>)> infer;
  /// Reference kernel: inputs are F32 (or F64) tensors in ND/NCHW layout; outputs are preallocated
  /// with the inferred shapes in the same precision. Integer inputs (indices) keep their dtype.
  std::function<void(const Op&, std::span<const Tensor* const>, std::span<Tensor>, RefPrecision)> reference;
  /// Adds the backward ops of `op` to the builder; empty when the op is not differentiable.
  std::function<void(GradBuilder&, const Op&)> gradient;
};

/// Registry of op types, keyed by type name, iterated in name order.
class OpRegistry {
 public:
  static OpRegistry& instance();
  void add(OpDef def);  // throws on a duplicate
  const OpDef* find(const std::string& type) const;
  const OpDef& get(const std::string& type) const;  // throws GraphError listing known types
  std::vector<std::string> types() const;
  const std::map<std::string, OpDef>& all() const { return defs_; }

 private:
  std::map<std::string, OpDef> defs_;
};

/// Runs one op's reference kernel on concrete inputs (any float dtype is converted to the
/// reference precision first). Returns the outputs in the reference precision.
std::vector<Tensor> run_reference(const Op& op, std::span<const Tensor* const> inputs, RefPrecision p);

/// Executes a whole graph on the CPU reference, in topological order. `feeds` gives inputs by
/// tensor name (initializers come from the graph). Returns every tensor's value by name.
std::map<std::string, Tensor> run_graph_reference(const Graph& g, const std::map<std::string, Tensor>& feeds,
                                                  RefPrecision p);

}  // namespace probelab::graph
