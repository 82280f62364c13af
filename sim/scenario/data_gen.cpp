#include "sim/scenario/data_gen.h"

#include <algorithm>
#include <array>
#include <span>
#include <vector>

#include "numerics/mt19937.h"
#include "numerics/normal.h"

namespace probelab::sim {

std::uint64_t mix_seed(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t stream_seed(std::uint64_t seed, const std::string& name, std::uint64_t step, std::uint64_t rank) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return mix_seed(mix_seed(mix_seed(seed ^ h) + step) + (rank << 1) + 1);
}

graph::Tensor DataGenerator::make_float(const std::string& name, const graph::TensorDesc& desc, std::uint32_t step,
                                        std::uint32_t rank) const {
  num::Mt19937_64 rng(stream_seed(spec_.seed, name, step, rank));
  const auto n = static_cast<std::size_t>(graph::numel(desc.shape));
  std::vector<float> v(n);
  if (spec_.generator == "ones") {
    std::fill(v.begin(), v.end(), 1.0f);
  } else if (spec_.generator == "uniform") {
    for (auto& x : v) x = static_cast<float>(spec_.low + (spec_.high - spec_.low) * num::unit_interval(rng()));
  } else {
    // Box-Muller: pair i gives elements 2i (cosine) and 2i + 1 (sine). In chunks of pairs, so that
    // the temporaries stay in a few cache-resident kilobytes whatever the tensor's size.
    const std::size_t pairs = (n + 1) / 2;
    constexpr std::size_t kChunk = 256;
    std::array<double, kChunk> u1, u2, c, s;
    std::array<std::uint64_t, 2 * kChunk> bits;
    for (std::size_t p0 = 0; p0 < pairs; p0 += kChunk) {
      const std::size_t m = std::min(kChunk, pairs - p0);
      rng.generate(std::span(bits).first(2 * m));
      for (std::size_t i = 0; i < m; ++i) {
        u1[i] = 1.0 - num::unit_interval(bits[2 * i]);
        u2[i] = num::unit_interval(bits[2 * i + 1]);
      }
      num::box_muller(std::span(u1).first(m), std::span(u2).first(m), spec_.mean, spec_.std, std::span(c).first(m),
                      std::span(s).first(m));
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t e = 2 * (p0 + i);
        v[e] = static_cast<float>(c[i]);
        if (e + 1 < n) v[e + 1] = static_cast<float>(s[i]);
      }
    }
  }
  return graph::Tensor::from_f32(desc.shape, v, desc.dtype);
}

graph::Tensor DataGenerator::make_input(const std::string& name, const graph::TensorDesc& desc, std::uint32_t step,
                                        std::uint32_t rank, const graph::InitSpec* init) const {
  const graph::TensorDesc nd{desc.dtype, desc.shape, graph::Format::ND};
  if (spec_.batches > 0) step %= spec_.batches;  // a data set of `batches` batches, seen in turn
  if (init) return graph::make_init(*init, nd, stream_seed(spec_.seed, name, step, rank));
  if (graph::is_float(desc.dtype)) return make_float(name, nd, step, rank);
  // 8-bit inputs are raw bytes (an image a quantized or preprocessing model reads): every value.
  if (desc.dtype == graph::DType::U8 || desc.dtype == graph::DType::I8) {
    const double lo = desc.dtype == graph::DType::U8 ? 0.0 : -128.0;
    return graph::make_init(graph::InitSpec{graph::InitSpec::Kind::RandInt, lo, lo + 256.0}, nd,
                            stream_seed(spec_.seed, name, step, rank));
  }
  return graph::Tensor(nd);
}

}  // namespace probelab::sim
