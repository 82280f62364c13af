// Magnitudes of a tensor's finite elements and where its non-finite ones are, in one pass over
// FP32, FP16 or BF16 storage (AVX2, eight elements per step). The result is, bit for bit, that of
// the scalar loop over the elements widened to double in index order:
//   non-finite: count it, list its index (the first `listed`);
//   finite: max_abs = max(max_abs, |v|); min = (first ? v : (v < min ? v : min)); ++count;
//           sq_lanes[index mod 8] += v * v (one rounded double addition per element, in index
//           order within its lane: eight independent sums instead of one chain of dependent
//           additions, which cost four cycles an element);
//   sum_sq = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) over sq_lanes, after every call.
// In particular min keeps the first of equal minima (-0 or +0, whichever comes first). The square
// of an FP32, FP16 or BF16 value is exact in double, so only the additions round.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "numerics/types.h"

namespace probelab::num {

struct FiniteMoments {
  std::uint64_t elements = 0;  // every element seen
  std::uint64_t count = 0;     // finite ones
  double max_abs = 0, min = 0, sum_sq = 0;
  std::array<double, 8> sq_lanes{};  // the squares by element index mod 8 (sum_sq is their sum)
  std::uint64_t nonfinite_count = 0;
  std::vector<std::uint64_t> nonfinite;  // indices, ascending, at most `listed`
};

/// Adds x's elements to m as the elements m.elements, m.elements + 1, ... (so consecutive calls
/// accumulate like one call over the concatenation); lists at most `listed` non-finite indices.
void accumulate(FiniteMoments& m, std::span<const float> x, std::size_t listed);
void accumulate(FiniteMoments& m, std::span<const f16> x, std::size_t listed);
void accumulate(FiniteMoments& m, std::span<const bf16> x, std::size_t listed);
/// The scalar loop itself, over doubles (FP64 tensors, integers widened).
void accumulate(FiniteMoments& m, std::span<const double> x, std::size_t listed);

}  // namespace probelab::num
