// The human-writable YAML model format. Example (scenarios/models/README.md documents it fully):
//
//   name: mlp                         # required; default scope prefix of every op
//   seed: 1                           # seeds every initialiser (default 0)
//   inputs:
//     - {name: x, shape: [4, 16]}                       # dtype defaults to float32
//     - {name: labels, shape: [4], dtype: int64, init: "randint(0, 10)"}  # quote commas inside {...}
//   weights:                                            # standalone weights / constants
//     - {name: proj, shape: [16, 16], init: xavier, seed: 7}
//     - {name: table, file: table.npy, trainable: false}  # path relative to this file
//   ops:                                                # "layers" is a synonym
//     - name: fc1
//       type: MatMul
//       inputs: [x]            # default: the previous op's first output (first op: first input)
//       weights:               # inline weights "<op>/<key>", appended to the inputs in this order
//         weight: {shape: [16, 32], init: kaiming}      # a bare list is a shape: `bias: [32]`
//       outputs: [h]           # default: "<op>" and "<op>:<i>" for further outputs
//       attrs: {transB: 0}
//       scope: mlp/block0/fc1  # default "<model name>/<op name>"
//       debug: {sample_rate: 0.5, capture: true}
//   outputs: [loss]                                     # default: the last op's outputs
//
// Weight keys: shape, dtype (default float32), init (graph/init.h; default kaiming for rank >= 2,
// zeros otherwise), seed (default derived from the model seed and the weight's name), file (.npy;
// then shape/dtype, if given, must agree), trainable (default true; false makes a Constant).
// Every error is a GraphError "<file>:<line>:<column>: <key>: <what was expected>"; unknown keys
// are errors. The graph is validated before it is returned.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "graph/graph.h"
#include "graph/init.h"

namespace probelab::graph {

struct ModelFile {
  Graph graph;
  std::string path;                              // as given to the loader
  std::uint64_t seed = 0;
  std::map<std::string, InitSpec> input_inits;   // how make_feeds() generates each graph input
};

ModelFile load_model_yaml(const std::string& path);
/// Parses YAML text; `path` names it in messages and its directory resolves .npy files.
ModelFile parse_model_yaml(const std::string& text, const std::string& path);

/// Input tensors for one run: each graph input filled by its `init` (default normal(0, 1) for
/// floats, zeros otherwise), seeded by derive_seed(seed, input name).
std::map<std::string, Tensor> make_feeds(const ModelFile& m, std::uint64_t seed);

}  // namespace probelab::graph
