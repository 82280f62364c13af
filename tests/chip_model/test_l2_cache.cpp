// The shared L2's residency model (l2_cache.h): hits and misses per line, LRU replacement,
// write-allocate with write-back of dirty victims. No SystemC.
#include <gtest/gtest.h>

#include "chip_model/l2_cache.h"

namespace pc = probelab::chip;

namespace {
constexpr std::uint64_t L = pc::L2Cache::kLineBytes;
}

TEST(L2Cache, FirstReadMissesSecondHitsPartialLinesCountTheirBytes) {
  pc::L2Cache c(64 * L);
  auto a = c.read(100, 3 * L);  // touches 4 lines, 3 * L bytes
  EXPECT_EQ(a.miss_bytes, 3 * L);
  EXPECT_EQ(a.fetched_bytes, 4 * L);  // whole lines come from HBM
  EXPECT_EQ(a.hit_bytes, 0u);
  a = c.read(100, 3 * L);
  EXPECT_EQ(a.hit_bytes, 3 * L);
  EXPECT_EQ(a.miss_bytes, 0u);
  EXPECT_EQ(c.resident_bytes(), 4 * L);
  a = c.read(0, 100);  // same line as byte 100: resident
  EXPECT_EQ(a.hit_bytes, 100u);
}

TEST(L2Cache, LeastRecentlyUsedLineIsReplacedAndDirtyVictimsAreWrittenBack) {
  pc::L2Cache c(4 * L);
  c.write(0, 2 * L);       // lines 0, 1 dirty
  c.read(2 * L, 2 * L);    // lines 2, 3 clean; full
  EXPECT_EQ(c.dirty_bytes(), 2 * L);
  c.read(0, 1);            // line 0 becomes most recent; LRU order now 1, 2, 3, 0
  auto a = c.read(4 * L, L);  // evicts line 1 (dirty)
  ASSERT_EQ(a.writebacks.size(), 1u);
  EXPECT_EQ(a.writebacks[0], L);
  a = c.read(5 * L, L);    // evicts line 2 (clean): no write-back
  EXPECT_TRUE(a.writebacks.empty());
  EXPECT_EQ(c.read(0, L).hit_bytes, L);       // line 0 survived
  EXPECT_EQ(c.read(L, L).miss_bytes, L);      // line 1 did not
  EXPECT_EQ(c.resident_bytes(), 4 * L);
}

TEST(L2Cache, WritesAllocateWithoutFetchAndStayDirtyUntilEvicted) {
  pc::L2Cache c(2 * L);
  auto a = c.write(0, 2 * L);
  EXPECT_EQ(a.written_bytes, 2 * L);
  EXPECT_EQ(a.miss_bytes, 0u);
  EXPECT_EQ(c.read(0, 2 * L).hit_bytes, 2 * L);  // what was written is read back from the L2
  a = c.write(2 * L, 2 * L);                     // streams past the capacity: both victims dirty
  EXPECT_EQ(a.writebacks.size(), 2u);
  EXPECT_EQ(c.dirty_bytes(), 2 * L);
}

TEST(L2Cache, NoCapacityMeansEveryReadMissesAndEveryWriteGoesThrough) {
  pc::L2Cache c(0);
  EXPECT_EQ(c.read(0, 4 * L).miss_bytes, 4 * L);
  EXPECT_EQ(c.read(0, 4 * L).miss_bytes, 4 * L);
  EXPECT_EQ(c.write(0, 2 * L).writebacks.size(), 2u);
  EXPECT_EQ(c.resident_bytes(), 0u);
}

TEST(L2Cache, LookupHitsResidentLinesWithoutAllocatingMisses) {
  pc::L2Cache c(8 * L);
  c.write(0, 2 * L);  // lines 0, 1 dirty
  auto a = c.lookup(L / 2, 3 * L);  // lines 0..3: 1.5 lines resident
  EXPECT_EQ(a.hit_bytes, L + L / 2);
  EXPECT_EQ(a.miss_bytes, 3 * L - (L + L / 2));
  EXPECT_EQ(a.fetched_bytes, 0u);
  EXPECT_EQ(c.resident_bytes(), 2 * L);  // nothing allocated
  EXPECT_TRUE(c.dirty(0));                // still the only current copy
  EXPECT_FALSE(c.resident(2 * L));
}

TEST(L2Cache, InvalidateDropsLinesAndWritesBackOnlyPartlyOverwrittenDirtyOnes) {
  pc::L2Cache c(8 * L);
  c.write(0, 3 * L);    // lines 0, 1, 2 dirty
  c.read(3 * L, L);     // line 3 clean
  auto a = c.invalidate(L / 2, 3 * L);  // line 0 partly, 1 and 2 wholly, line 3 partly (clean)
  EXPECT_EQ(a.invalidated_bytes, 4 * L);
  ASSERT_EQ(a.writebacks.size(), 1u);  // line 0: its first half is still the newest data
  EXPECT_EQ(a.writebacks[0], 0u);
  EXPECT_EQ(c.resident_bytes(), 0u);
  EXPECT_EQ(c.dirty_bytes(), 0u);
  a = c.read(0, 4 * L);  // everything comes from HBM again
  EXPECT_EQ(a.hit_bytes, 0u);
}
