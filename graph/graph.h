// The workload graph: tensors, ops, topological order, lookup, selection, validation.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "graph/op.h"
#include "graph/tensor.h"

namespace probelab::graph {

struct OpDef;  // graph/op_registry.h

/// Every IR error: names the graph/op/tensor concerned and what was expected.
class GraphError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// "Conv 'conv1'" — how messages name an op.
std::string op_label(const Op& op);

/// Throws GraphError "<op label>: <message>".
template <class... A>
[[noreturn]] void fail(const Op& op, fmt::format_string<A...> f, A&&... a) {
  throw GraphError(fmt::format("{}: {}", op_label(op), fmt::format(f, std::forward<A>(a)...)));
}

/// Role of a tensor in the graph.
enum class TensorKind : std::uint8_t {
  Input,        // fed by the data generator / user
  Weight,       // trainable initializer
  Constant,     // non-trainable initializer
  Activation,   // produced by a forward op
  Gradient,     // produced by a backward op (named "<tensor>/gradient")
  State,        // optimizer state (momentum, Adam moments)
  Output,       // graph output (also produced by an op)
};
std::string_view tensor_kind_name(TensorKind k);

struct TensorInfo {
  std::string name;
  TensorDesc desc;
  TensorKind kind = TensorKind::Activation;
};

/// A graph snapshot. Ops are stored in insertion order; ids equal their index in ops().
class Graph {
 public:
  Graph() = default;
  explicit Graph(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // --- construction -------------------------------------------------------------------------
  /// Declares a tensor; throws GraphError on a duplicate name.
  void add_tensor(TensorInfo t);
  /// Declares an initializer (Weight/Constant) with its value.
  void add_initializer(const std::string& name, Tensor value, TensorKind kind = TensorKind::Weight);
  /// Appends an op (its id is assigned here) and returns it. Throws GraphError on a duplicate op
  /// name, an output that already has a producer or is an input/initializer, and - when the type is
  /// registered - on wrong input/output counts, missing/unknown/mistyped attributes, and when shape
  /// inference rejects the inputs (only run once all input descs are known). Output tensors not yet
  /// declared are declared with descs from shape inference (left empty when inference could not
  /// run yet; infer_shapes() fills them) as Activations (Gradients for backward ops; Output when
  /// already marked as a graph output).
  Op& add_op(Op op);
  void mark_output(const std::string& tensor);
  void mark_input(const std::string& tensor);
  /// Rebuilds ids and the name/producer indexes after ops() was edited in place (ops reordered,
  /// renamed or erased). Throws GraphError on duplicate op names or tensors with two producers.
  void reindex();

  // --- access -------------------------------------------------------------------------------
  const std::vector<Op>& ops() const { return ops_; }
  std::vector<Op>& ops() { return ops_; }
  const Op& op(std::uint32_t id) const;
  const Op* find_op(const std::string& name) const;
  const TensorInfo* find_tensor(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // throws GraphError
  TensorInfo& tensor(const std::string& name);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, Tensor>& initializers() const { return initializers_; }
  std::map<std::string, Tensor>& initializers() { return initializers_; }
  const std::vector<std::string>& inputs() const { return inputs_; }
  const std::vector<std::string>& outputs() const { return outputs_; }
  /// Nodes of the source model the importer evaluated into constants (shape subgraphs, constant
  /// masks, If with a known condition), as "name (Type)" in model order; empty for built graphs.
  const std::vector<std::string>& import_folded() const { return import_folded_; }
  void add_import_folded(std::string node) { import_folded_.push_back(std::move(node)); }

  /// The op producing `tensor`, or nullptr for inputs/initializers.
  const Op* producer(const std::string& tensor) const;
  /// Ops reading `tensor`, in id order.
  std::vector<const Op*> consumers(const std::string& tensor) const;

  /// Op ids in a deterministic topological order (Kahn's algorithm, ties broken by id).
  /// Throws GraphError naming the ops on a cycle.
  std::vector<std::uint32_t> topo_order() const;

  // --- selection ----------------------------------------------------------------------------
  /// Ops whose name matches a shell glob (`*`, `?`, `[a-z]`, `[4-6]`), in id order.
  std::vector<const Op*> select_ops(const std::string& glob) const;
  /// Tensors whose name matches a glob (e.g. `conv*/gradient`), in name order.
  std::vector<const TensorInfo*> select_tensors(const std::string& glob) const;
  /// Ops whose scope path matches an ECMAScript regex (whole match). Throws GraphError on a bad regex.
  std::vector<const Op*> select_scope(const std::string& regex) const;

  // --- checking -----------------------------------------------------------------------------
  /// Runs shape inference over the graph in topological order, filling/overwriting the descs of
  /// every op output. Throws GraphError (naming the op) on unknown types or mismatches.
  void infer_shapes();
  /// Full validation: dangling or duplicate names, single producer per tensor, cycles, unknown op
  /// types, attribute specs, dtype/shape agreement with shape inference. Throws GraphError.
  void validate() const;

 /// "graph '<name>'" for messages.
  std::string label() const;

 private:
  /// Output descs of `op` from the registry when its type and all input descs are known; empty
  /// otherwise. Throws GraphError when the inference itself rejects the inputs.
  std::vector<TensorDesc> try_infer(const Op& op) const;
  /// Input/output counts and attributes of `op` against its type. Throws GraphError.
  void check_signature(const Op& op, const OpDef& def) const;

  std::string name_;
  std::vector<Op> ops_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, Tensor> initializers_;
  std::vector<std::string> inputs_;
  std::vector<std::string> outputs_;
  std::vector<std::string> import_folded_;
  std::map<std::string, std::uint32_t> op_index_;
  std::map<std::string, std::uint32_t> producer_;
};

/// Shell-style glob match used for watch points and selection: `*` matches any run of characters
/// including '/', `?` one character, `[...]` a class with ranges and `!`/`^` negation.
/// Throws GraphError on a malformed pattern (e.g. an unclosed '[').
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace probelab::graph
