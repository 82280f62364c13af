// Private: which ONNX node inputs the importer folds into attributes, and import-time evaluation
// of nodes whose inputs are all known (constant folding of shape subgraphs and constant masks).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace probelab::graph::onnx_detail {

/// Inputs of `op` (from `opset` on) that determine output shapes or are scalar parameters, and the
/// attribute each becomes: a list attribute (int64 list for integer tensors, float list for float
/// tensors) or, for `scalar`, one int64 or float value.
struct FoldInput {
  std::size_t pos;
  const char* attr;
  bool scalar = false;
};
struct FoldRule {
  const char* op;
  std::int64_t min_opset;
  std::vector<FoldInput> inputs;
};
/// The rule of an op type at an opset; nullptr when it folds no input.
const FoldRule* fold_rule(const std::string& op, std::int64_t opset);
bool is_folded(const FoldRule* rule, std::size_t pos);

/// A parameter that is the attribute `name` of `op` below `opset` and input `pos` from `opset` on
/// (Clip's min and max, Reshape's shape, the reductions' axes, ...), whether the importer folds
/// the input (FoldRule) or keeps it.
struct MovedParam {
  const char* op;
  std::int64_t opset;
  std::size_t pos;
  const char* name;
};
/// The parameter of `op` that attribute `attr` became, when a later opset made it an input.
const MovedParam* moved_attribute(const std::string& op, const std::string& attr);

/// The first opset at which input `pos` of `op` exists, and what it holds ("axes"), when a later
/// opset added it: the first fold rule of the op holding `pos`, or the MovedParam at `pos`;
/// nullopt when neither holds it.
struct InputSince {
  std::int64_t opset;
  std::string what;
};
std::optional<InputSince> input_since(const std::string& op, std::size_t pos);
/// Throws GraphError (prefixed with `where`) when `op` (straight from the model, before folding)
/// has the inputs or attributes of another opset than the model's `opset`: an input that only a
/// later opset has, or an attribute a later opset made an input (MovedParam) at an opset where it
/// is that input. The message names the model's opset and what the op takes there.
void check_input_opsets(const Op& op, std::int64_t opset, const std::string& where);

/// Attribute value of a folded input.
AttrValue folded_attr(const Tensor& t, bool scalar);

/// Evaluates `op` (a registered type) on known input values (nullptr for an omitted input). A
/// shape-only op (OpDef::shape_only) needs only the input descs. Returns the outputs in the dtypes
/// shape inference gives, or nullopt when an input value is unknown. Throws GraphError when the
/// op rejects its inputs.
std::optional<std::vector<Tensor>> evaluate_node(const Op& op, const std::vector<const Tensor*>& values,
                                                 const std::vector<TensorDesc>& descs);

}  // namespace probelab::graph::onnx_detail
