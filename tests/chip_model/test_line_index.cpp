// The L2 model's line index (line_index.h) against std::map: inserts, finds and erasures in random
// order, with keys dense within one 128-line stretch, spread over a few stretches, and sparse up to
// 2^40 (a new stretch almost every time; the one-entry cache always stale).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "chip_model/line_index.h"

namespace pc = probelab::chip;

TEST(LineIndex, EmptyFindsNothing) {
  const pc::LineIndex idx;
  EXPECT_EQ(idx.find(0), pc::LineIndex::kNone);
  EXPECT_EQ(idx.size(), 0u);
}

TEST(LineIndex, AgreesWithAnOrderedMapThroughInsertsAndErasures) {
  std::mt19937_64 rng(3);
  for (const std::uint64_t spread : {40ull, 1000ull, 1ull << 40}) {
    pc::LineIndex idx;
    std::map<std::uint64_t, std::uint32_t> ref;
    std::uniform_int_distribution<std::uint64_t> key(0, spread);
    for (std::uint32_t step = 0; step < 60000; ++step) {
      const std::uint64_t k = key(rng);
      const auto it = ref.find(k);
      ASSERT_EQ(idx.find(k), it == ref.end() ? pc::LineIndex::kNone : it->second) << "key " << k << " step " << step;
      // Grow to about 700 keys, then hover there: erasures as frequent as inserts.
      if (it == ref.end() && (ref.size() < 700 || rng() % 2)) {
        idx.insert(k, step);
        ref[k] = step;
      } else if (it != ref.end()) {
        idx.erase(k);
        ref.erase(it);
      }
      ASSERT_EQ(idx.size(), ref.size());
    }
    for (std::uint64_t k = 0; k <= std::min<std::uint64_t>(spread, 5000); ++k) {
      const auto it = ref.find(k);
      EXPECT_EQ(idx.find(k), it == ref.end() ? pc::LineIndex::kNone : it->second) << "key " << k;
    }
  }
}
