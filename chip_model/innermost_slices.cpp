#include "chip_model/innermost_slices.h"

#include <algorithm>
#include <numeric>
#include <queue>

namespace probelab::chip {

std::vector<std::size_t> innermost_slices(const std::vector<SliceSpan>& spans, const std::vector<std::uint64_t>& queries) {
  std::vector<std::size_t> by_start(spans.size()), by_time(queries.size());
  std::iota(by_start.begin(), by_start.end(), std::size_t{0});
  std::iota(by_time.begin(), by_time.end(), std::size_t{0});
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](std::size_t a, std::size_t b) { return spans[a].start_ps < spans[b].start_ps; });
  std::stable_sort(by_time.begin(), by_time.end(), [&](std::size_t a, std::size_t b) { return queries[a] < queries[b]; });
  // The top of the heap is the innermost span among those started: latest start, shortest, lowest index.
  auto worse = [&](std::size_t a, std::size_t b) {
    const SliceSpan &x = spans[a], &y = spans[b];
    if (x.start_ps != y.start_ps) return x.start_ps < y.start_ps;
    if (x.dur_ps != y.dur_ps) return x.dur_ps > y.dur_ps;
    return a > b;
  };
  std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(worse)> open(worse);
  std::vector<std::size_t> out(queries.size(), kNoSlice);
  std::size_t next = 0;
  for (const std::size_t q : by_time) {
    const std::uint64_t t = queries[q];
    for (; next < by_start.size() && spans[by_start[next]].start_ps <= t; ++next) open.push(by_start[next]);
    // A span ended before t ends before every later query too.
    while (!open.empty() && spans[open.top()].start_ps + spans[open.top()].dur_ps < t) open.pop();
    if (!open.empty()) out[q] = open.top();
  }
  return out;
}

}  // namespace probelab::chip
