// Weight and input initialisers of the model files, e.g. "kaiming", "normal(0.02)", "uniform(-1, 1)".
//
// Spellings (numbers are plain decimals):
//   zeros | ones | constant(v)            every element = 0 / 1 / v
//   normal(std) | normal(mean, std)       Gaussian
//   uniform(a, b)                         uniform in [a, b)
//   kaiming                               normal(0, sqrt(2 / fan_in))             (He et al.)
//   xavier                                uniform(-l, l), l = sqrt(6 / (fan_in + fan_out)) (Glorot)
//   randint(lo, hi)                       integers uniform in [lo, hi) (e.g. class labels)
//   arange                                0, 1, 2, ... (row-major)
// Fans: rank 1 [n]: fan_in = fan_out = n; rank 2 [k, n] (a MatMul weight, X @ W): fan_in = k,
// fan_out = n; rank >= 3 [o, i, k...] (a Conv weight): fan_in = i * prod(k), fan_out = o * prod(k).
// Values are drawn in FP64 from the mt19937_64 sequence (num::Mt19937_64, the same outputs as
// std::mt19937_64) seeded with the given seed (uniform bits mapped by
// this code, normal by Box-Muller with numerics' own log and cosine, num::box_muller, so the values
// do not depend on the standard library) and rounded once to the target dtype.
#pragma once

#include <cstdint>
#include <string>

#include "graph/tensor.h"

namespace probelab::graph {

struct InitSpec {
  enum class Kind : std::uint8_t { Zeros, Ones, Constant, Normal, Uniform, Kaiming, Xavier, RandInt, Arange };
  Kind kind = Kind::Zeros;
  double a = 0.0;  // constant value, normal mean, uniform/randint low
  double b = 0.0;  // normal std, uniform/randint high
};

/// Parses a spelling above; throws GraphError("init '<text>': ...") when malformed.
InitSpec parse_init(const std::string& text);
/// The canonical spelling, e.g. "normal(0, 0.02)".
std::string init_str(const InitSpec& s);
/// A tensor of `desc` (ND layout) filled as `spec` says.
Tensor make_init(const InitSpec& spec, const TensorDesc& desc, std::uint64_t seed);
/// Seed of a named tensor derived from a model seed (splitmix64 of the seed and the FNV-1a hash of
/// the name), so adding a weight does not change the others.
std::uint64_t derive_seed(std::uint64_t model_seed, const std::string& name);

}  // namespace probelab::graph
