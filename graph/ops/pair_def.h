// The OpDef of an X -> Y op and of its backward (dY, X) -> dX, the pattern of the normalizations
// and pools computed from X alone (LRN, LpNormalization, GlobalLpPool, MeanVarianceNormalization);
// the caller adds infer, reference and gradient.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "graph/op_registry.h"

namespace probelab::graph::ops {

inline OpDef pair_def(std::string type, std::string doc, std::vector<AttrSpec> attrs, bool backward) {
  OpDef d;
  d.type = std::move(type);
  d.doc = std::move(doc);
  d.attrs = std::move(attrs);
  d.input_names = backward ? std::vector<std::string>{"dY", "X"} : std::vector<std::string>{"X"};
  d.output_names = {backward ? "dX" : "Y"};
  d.min_inputs = d.max_inputs = backward ? 2 : 1;
  d.backward = backward;
  return d;
}

}  // namespace probelab::graph::ops
