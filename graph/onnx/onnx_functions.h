// Private: model-local functions (ModelProto.functions: what PyTorch's
// export_modules_as_functions and its dynamo exporter write for submodules) inlined before import.
#pragma once

#include <onnx/onnx_pb.h>

namespace probelab::graph::onnx_detail {

/// Replaces every call of a function the model defines by the function's body, in the main graph
/// and its subgraphs (If branches), calls inside bodies too, then drops the definitions. A body
/// node is named "<call>/<its name or index>"; the body's own values are renamed the same way,
/// its formal inputs and outputs become the call's actual ones (an input the call leaves out:
/// none), and an attribute that refers to one of the function's (`ref_attr_name`) takes the call's
/// value or is left out when the call gives none. Throws GraphError naming the function for a
/// recursion deeper than 32 calls, a body that imports another version of the default opset than
/// the model, or a body node holding a subgraph (its outer-scope names are not renamed).
void inline_local_functions(onnx::ModelProto& m);

}  // namespace probelab::graph::onnx_detail
