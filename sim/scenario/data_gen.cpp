#include "sim/scenario/data_gen.h"

#include <algorithm>
#include <array>
#include <memory>
#include <span>
#include <vector>

#include "numerics/bulk.h"
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
  const bool normal = spec_.generator != "ones" && spec_.generator != "uniform";
  const graph::DType t = desc.dtype;
  if (normal && (t == graph::DType::F32 || t == graph::DType::F16 || t == graph::DType::BF16)) {
    // Straight into the tensor: FP32 samples in place; FP16/BF16 in pieces of whole Box-Muller
    // pairs (so the same values as one call), each converted as from_f32 does.
    graph::Tensor out = graph::Tensor::for_overwrite(graph::TensorDesc{t, desc.shape, graph::Format::ND});
    if (t == graph::DType::F32) {
      num::normal_samples(rng, spec_.mean, spec_.std, out.data<float>());
      return out;
    }
    constexpr std::size_t kPiece = 4096;
    std::array<float, kPiece> piece;
    const auto bits = out.data<std::uint16_t>();
    for (std::size_t i = 0; i < n; i += kPiece) {
      const std::span<float> v = std::span(piece).first(std::min(kPiece, n - i));
      num::normal_samples(rng, spec_.mean, spec_.std, v);
      if (t == graph::DType::F16) num::convert(v, std::span(reinterpret_cast<num::f16*>(bits.data() + i), v.size()));
      else num::convert(v, std::span(reinterpret_cast<num::bf16*>(bits.data() + i), v.size()));
    }
    return out;
  }
  const std::unique_ptr<float[]> buf(new float[n]);  // every element is set below
  const std::span<float> v(buf.get(), n);
  if (spec_.generator == "ones") {
    std::fill(v.begin(), v.end(), 1.0f);
  } else if (spec_.generator == "uniform") {
    for (auto& x : v) x = static_cast<float>(spec_.low + (spec_.high - spec_.low) * num::unit_interval(rng()));
  } else {
    num::normal_samples(rng, spec_.mean, spec_.std, v);
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
