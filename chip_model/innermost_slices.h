// Which slice encloses a time: the question trace flows ask for every flow point and every
// anomaly. Answered for many times at once by one sweep, O((n + q) log n), so that a run's cost
// stays linear in its steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace probelab::chip {

struct SliceSpan {
  std::uint64_t start_ps, dur_ps;
};

inline constexpr std::size_t kNoSlice = std::numeric_limits<std::size_t>::max();

/// For each query time (any order), the index in `spans` of the innermost span enclosing it
/// (start <= t <= start + dur): the latest start, then the shortest, then the lowest index;
/// kNoSlice where none does.
std::vector<std::size_t> innermost_slices(const std::vector<SliceSpan>& spans, const std::vector<std::uint64_t>& queries);

}  // namespace probelab::chip
