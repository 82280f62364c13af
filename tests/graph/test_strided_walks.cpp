// The strided walks of the op kernels against their definitions: gather_strided (the copy behind
// Transpose, Slice and Einsum's permutes: element k of the output, at output index i, is source
// element base + sum_d i_d * st_d) and for_each_broadcast (every binary op's numpy broadcasting:
// output element k, at index i, reads a and b at i with their size-1 dimensions held at 0).
#include <array>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

std::vector<std::byte> by_definition(const std::vector<std::byte>& src, const Shape& shape,
                                     const std::vector<std::int64_t>& st, std::int64_t base, std::size_t es) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  std::vector<std::byte> out(static_cast<std::size_t>(n) * es);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t rest = k, off = base;
    for (std::size_t d = shape.size(); d-- > 0;) {
      off += (rest % shape[d]) * st[d];
      rest /= shape[d];
    }
    std::memcpy(out.data() + k * static_cast<std::int64_t>(es), src.data() + off * static_cast<std::int64_t>(es), es);
  }
  return out;
}

TEST(GatherStrided, AgreesWithTheDefinitionOverRandomLayouts) {
  std::mt19937_64 rng(7);
  const std::size_t sizes[] = {1, 2, 3, 4, 8, 12};
  int rows_of_stride_one = 0, strided = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const std::size_t es = sizes[rng() % 6];
    const std::size_t rank = rng() % 5;  // 0 (a scalar) to 4 dimensions
    Shape shape(rank);
    for (auto& d : shape) d = static_cast<std::int64_t>(rng() % 5);  // zero-sized dimensions too
    if (trial % 3 == 0)
      for (auto& d : shape) d = std::max<std::int64_t>(d, 1);
    // Strides: a permutation of a dense layout, a slice step, a broadcast (0) or a reversal.
    std::vector<std::int64_t> st(rank);
    std::int64_t span = 1;
    for (std::size_t d = rank; d-- > 0;) {
      const std::uint64_t kind = rng() % 4;
      st[d] = kind == 0 ? 0 : kind == 1 ? span : kind == 2 ? span * 2 : -span;
      span *= std::max<std::int64_t>(shape[d], 1) * 2;
    }
    if (rank > 0 && rng() % 2) st[rank - 1] = 1;
    // The lowest and highest element read, so that the source holds both.
    std::int64_t lo = 0, hi = 0;
    for (std::size_t d = 0; d < rank; ++d) {
      const std::int64_t ext = st[d] * (std::max<std::int64_t>(shape[d], 1) - 1);
      (ext < 0 ? lo : hi) += ext;
    }
    const std::int64_t base = -lo;
    std::vector<std::byte> src(static_cast<std::size_t>(hi - lo + 1) * es);
    for (auto& b : src) b = static_cast<std::byte>(rng());
    const std::vector<std::byte> want = by_definition(src, shape, st, base, es);
    std::vector<std::byte> got(want.size() + es, std::byte{0x5a});  // one guard element
    gather_strided(src, got, shape, st, base, es);
    if (!want.empty()) {  // (memcmp must not see an empty vector's null data)
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size())) << "trial " << trial;
    }
    for (std::size_t i = want.size(); i < got.size(); ++i) ASSERT_EQ(got[i], std::byte{0x5a}) << "trial " << trial;
    if (rank > 0 && !want.empty()) (st[rank - 1] == 1 ? rows_of_stride_one : strided)++;
  }
  EXPECT_GT(rows_of_stride_one, 50);
  EXPECT_GT(strided, 50);
}

TEST(ForEachBroadcast, VisitsEveryElementInOrderWithTheOperandsOffsets) {
  std::mt19937_64 rng(11);
  int calls_checked = 0;
  for (int trial = 0; trial < 800; ++trial) {
    const std::size_t rank = rng() % 5;
    Shape out(rank);
    for (auto& d : out) d = static_cast<std::int64_t>(rng() % 4) + (trial % 4 == 0 ? 0 : 1);
    // Each operand: a suffix of the output's dimensions, each kept or broadcast (1).
    auto operand = [&] {
      Shape s(out.begin() + static_cast<std::ptrdiff_t>(rng() % (rank + 1)), out.end());
      for (auto& d : s)
        if (rng() % 3 == 0) d = 1;
      return s;
    };
    const Shape a = operand(), b = operand();
    std::vector<std::array<std::int64_t, 3>> got;
    for_each_broadcast(out, a, b, [&](std::int64_t oa, std::int64_t ob, std::int64_t k) { got.push_back({oa, ob, k}); });
    std::int64_t n = 1;
    for (std::int64_t d : out) n *= d;
    ASSERT_EQ(got.size(), static_cast<std::size_t>(n)) << "trial " << trial;
    auto offset = [&](const Shape& s, std::int64_t k) {  // s's element read by output element k
      std::int64_t rest = k, off = 0, stride = 1;
      for (std::size_t d = rank; d-- > 0;) {
        const std::int64_t i = rest % out[d];
        rest /= out[d];
        const std::size_t back = rank - 1 - d;
        if (back >= s.size()) continue;
        const std::int64_t sd = s[s.size() - 1 - back];
        off += (sd == 1 ? 0 : i) * stride;
        stride *= sd;
      }
      return off;
    };
    for (std::int64_t k = 0; k < n; ++k) {
      const auto& [oa, ob, kk] = got[static_cast<std::size_t>(k)];
      ASSERT_EQ(kk, k) << "trial " << trial;
      ASSERT_EQ(oa, offset(a, k)) << "trial " << trial << " element " << k;
      ASSERT_EQ(ob, offset(b, k)) << "trial " << trial << " element " << k;
      ++calls_checked;
    }
  }
  EXPECT_GT(calls_checked, 5000);
}

}  // namespace
}  // namespace probelab::graph::ops
