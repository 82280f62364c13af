// Reverse-mode autodiff over the graph IR and the optimizer step: from a forward graph and a scalar
// loss tensor to a complete training-step graph.
//
// Naming (what watch points select):
//   - the gradient of tensor T (dLoss/dT) is the tensor "T/gradient". A conv op "conv3" with weight
//     "conv3/weight" and output "conv3/out" (or "conv3:0") gets "conv3/weight/gradient" and
//     "conv3/out/gradient", so the tensor glob `conv*/gradient` selects the gradients flowing out
//     of every conv's output and into its parameters (`*` also matches '/').
//   - when T has several consumers, each contributes a partial "T/gradient/<consumer>:<input>"
//     and Add ops "T/gradient/add<k>" sum them into "T/gradient"; a single contribution is
//     written straight to "T/gradient". The loss seed "L/gradient" is a constant of ones.
//   - the backward ops of forward op X are named "X/grad" (main op) and "X/grad/<step>" (helpers),
//     with direction Backward and grad_of = "X"; their intermediates are "X/grad/<step>:<i>".
//   - optimizer ops are named "P/update" (direction Optimizer, type SgdUpdate or AdamUpdate) and
//     write "P/updated"; optimizer state lives in initializers "P/velocity" (SGD momentum),
//     "P/adam_m", "P/adam_v" (kind State), updated into "<state>/updated".
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace probelab::graph {

std::string gradient_name(const std::string& tensor);  // "T/gradient"
std::string updated_name(const std::string& tensor);   // "T/updated"

/// Handed to OpDef::gradient functions while the backward graph is built. Backward ops are staged
/// here and added to the graph in a valid topological order once every gradient is known.
class GradBuilder {
 public:
  /// `wants` are the tensors whose gradients are requested; `loss` must be a scalar float tensor.
  GradBuilder(const Graph& g, const std::string& loss, std::set<std::string> wants);

  const Graph& graph() const { return g_; }
  const TensorDesc& desc(const std::string& tensor) const { return g_.tensor(tensor).desc; }

  /// Gradient tensor of output `i` of `op`, or "" when no gradient reaches it.
  std::string dy(const Op& op, std::size_t i = 0) const;
  /// Whether input `i` of `op` needs a gradient. Every gradient function must produce a
  /// contribution (via dx/emit_to_input) for every input for which this is true, except inputs
  /// that are not differentiable (indices, labels, BatchNorm running statistics).
  bool needs(const Op& op, std::size_t i) const;
  /// Name of the tensor the gradient contribution of `op` to its input `i` must be written to.
  std::string dx(const Op& op, std::size_t i);
  /// Name of an intermediate of op's backward: "<op>/grad/<what>:0".
  static std::string temp(const Op& op, const std::string& what);

  /// Stages backward op "<fwd>/grad" (step "") or "<fwd>/grad/<step>".
  void emit(const Op& fwd, const std::string& step, std::string type, std::vector<std::string> inputs,
            std::vector<std::string> outputs, Attrs attrs = {});
  /// Stages `type` producing a gradient of shape `produced` and, when it differs from the shape of
  /// input `i`, a SumToShape reducing it. The contribution goes to dx(fwd, i).
  void emit_to_input(const Op& fwd, std::size_t i, const Shape& produced, const std::string& step, std::string type,
                     std::vector<std::string> inputs, Attrs attrs = {});
  /// Contributes tensor `src` (of shape `shape`) to the gradient of input `i`: an Identity when the
  /// shapes agree, a SumToShape when `src` is broadcast relative to the input.
  void reduce_to_input(const Op& fwd, std::size_t i, const std::string& src, const Shape& shape,
                       const std::string& step);

  // --- driver (used by append_backward) -----------------------------------------------------
  /// Runs the gradient functions in reverse topological order and adds the backward ops to `out`
  /// (a copy of the forward graph). Returns tensor -> gradient tensor for every wanted tensor that
  /// receives a gradient.
  std::map<std::string, std::string> build(Graph& out);

 private:
  struct Partial {
    std::string tensor;
    std::string name;
  };
  void finalize(const std::string& tensor);
  void stage(Op op);

  const Graph& g_;
  std::string loss_;
  std::set<std::string> wants_;
  std::set<std::string> requires_;  // tensors on a path from a wanted tensor
  std::map<std::string, std::string> grad_;  // finalized gradients
  std::map<std::string, std::vector<std::string>> partials_;
  std::vector<Op> staged_;
};

struct BackwardOptions {
  /// Gradients are computed for every Weight tensor, plus graph inputs when this is true.
  bool input_gradients = false;
};

/// Adds the backward ops of `loss` to `g` (in place). Returns tensor -> gradient tensor for every
/// weight (and input, if requested) that the loss depends on. Throws GraphError when the loss is
/// not a scalar float tensor or an op on the path has no gradient definition.
std::map<std::string, std::string> append_backward(Graph& g, const std::string& loss, const BackwardOptions& opts = {});

struct OptimizerConfig {
  enum class Kind { Sgd, Adam } kind = Kind::Sgd;
  double lr = 0.01;
  double momentum = 0.0;       // SGD; > 0 adds a velocity state per parameter
  double weight_decay = 0.0;   // L2 term added to the gradient
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam
  std::int64_t step = 1;       // Adam bias-correction step of the first training step (1-based)
};

/// Adds optimizer update ops for `params` (param -> gradient tensor) to `g`; marks the updated
/// parameters and states as graph outputs.
void append_optimizer(Graph& g, const std::map<std::string, std::string>& params, const OptimizerConfig& cfg);

/// Forward ops, backward ops and optimizer ops of one training step; the loss, every updated
/// parameter/state and the running statistics of training-mode BatchNormalization ops are graph
/// outputs.
Graph build_training_graph(const Graph& forward, const std::string& loss_tensor, const OptimizerConfig& cfg = {});

/// After a step has run: copies every "<init>/updated" value into initializer <init> (converted to
/// its dtype), copies the running_mean/running_var outputs of training-mode BatchNormalization ops
/// into their input_mean/input_var initializers, and advances the step attribute of AdamUpdate
/// ops. Returns the number of updated initializers.
std::size_t commit_training_step(Graph& g, const std::map<std::string, Tensor>& values);

}  // namespace probelab::graph
