// Building and running single ops on the CPU reference in tests.
#pragma once

#include <string>
#include <vector>

#include "graph/op_registry.h"

namespace probelab::graph::testing {

/// An op named "t" of `type` reading "in0".."in<n_in-1>" and writing "out0".."out<n_out-1>".
inline Op make_op(std::string type, std::size_t n_in, Attrs attrs = {}, std::size_t n_out = 1) {
  Op op;
  op.name = std::string(1, 't');  // (not from a literal: GCC 12 reports a false -Wrestrict there)
  op.type = std::move(type);
  for (std::size_t i = 0; i < n_in; ++i) op.inputs.push_back("in" + std::to_string(i));
  for (std::size_t i = 0; i < n_out; ++i) op.outputs.push_back("out" + std::to_string(i));
  op.attrs = std::move(attrs);
  return op;
}

inline std::vector<Tensor> run(const Op& op, const std::vector<const Tensor*>& in, RefPrecision p = RefPrecision::F32) {
  return run_reference(op, in, p);
}

/// The GraphError message of running `op` on `in` (shape inference included), "no error" if none.
inline std::string error_of(const Op& op, const std::vector<const Tensor*>& in) {
  try {
    run(op, in);
  } catch (const GraphError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace probelab::graph::testing
