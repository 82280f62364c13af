// Deterministic input data of a scenario: every (input tensor, step, rank) gets its own stream
// seeded from the data seed, so ranks of a data-parallel job see different shards and a replay
// sees the same bytes. An input with an initialiser (the model file's `init`, or the labels of a
// cross-entropy loss: randint(0, classes)) is drawn by graph::make_init with that stream's seed;
// other float inputs follow the scenario's generator (normal: Box-Muller over the mt19937_64
// sequence with numerics' own log and sincos, num::box_muller; uniform in [low, high); ones); other
// integer inputs are zeros. `data.inputs` gives any input an initialiser of its own (token ids:
// randint(0, vocab)), which wins over the model file's. With `batches: N` the data set has N
// batches and step s sees batch s mod N (`batches: 1`: the same batch every step, so the losses of
// a training run change only through the weights).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "graph/init.h"
#include "graph/tensor.h"
#include "sim/scenario/scenario.h"

namespace probelab::sim {

/// splitmix64 finaliser, the seed mixer used throughout the harness.
std::uint64_t mix_seed(std::uint64_t x);
/// Seed of the stream for one tensor (FNV-1a of the name mixed with the other parts).
std::uint64_t stream_seed(std::uint64_t seed, const std::string& name, std::uint64_t step, std::uint64_t rank);

class DataGenerator {
 public:
  explicit DataGenerator(DataSpec spec) : spec_(std::move(spec)) {}

  /// FP32 values (logical layout) of `desc` for a float input, converted to desc.dtype.
  graph::Tensor make_float(const std::string& name, const graph::TensorDesc& desc, std::uint32_t step,
                           std::uint32_t rank) const;
  /// The value of input `name` at (step, rank); `init` may be null. Without one: float inputs from
  /// the data spec, int8 / uint8 inputs uniform over all 256 values (raw bytes such as an image),
  /// other integer inputs zero.
  graph::Tensor make_input(const std::string& name, const graph::TensorDesc& desc, std::uint32_t step,
                           std::uint32_t rank, const graph::InitSpec* init) const;

 private:
  DataSpec spec_;
};

}  // namespace probelab::sim
