// Test helper: builds small FP64 graphs op by op with seeded random weights.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "tests/graph/grad_check.h"

namespace probelab::graph::testing {

class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name, std::uint64_t seed = 7) : g(std::move(name)), rng(seed) {}

  /// A trainable weight with values uniform in [-scale, scale].
  std::string weight(const std::string& name, const Shape& s, double scale = 0.5) {
    g.add_initializer(name, random_f64(s, rng, -scale, scale), TensorKind::Weight);
    return name;
  }
  std::string constant(const std::string& name, Tensor value) {
    g.add_initializer(name, std::move(value), TensorKind::Constant);
    return name;
  }
  std::string input(const std::string& name, const Shape& s, DType dt = DType::F64) {
    g.add_tensor({name, TensorDesc{dt, s, Format::ND}, TensorKind::Input});
    g.mark_input(name);
    return name;
  }
  /// Adds op `name` and returns its first output, named "<name>/out" unless given.
  std::string op(const std::string& type, const std::string& name, std::vector<std::string> inputs, Attrs attrs = {},
                 std::vector<std::string> outputs = {}) {
    Op o;
    o.name = name;
    o.type = type;
    o.scope = "model/" + name;
    o.inputs = std::move(inputs);
    o.outputs = outputs.empty() ? std::vector<std::string>{name + "/out"} : std::move(outputs);
    o.attrs = std::move(attrs);
    g.add_op(o);
    return o.outputs[0];
  }

  Graph g;
  std::mt19937_64 rng;
};

}  // namespace probelab::graph::testing
