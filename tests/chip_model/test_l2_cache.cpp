// The shared L2's residency model (l2_cache.h): hits and misses per line, LRU replacement,
// write-allocate with write-back of dirty victims. No SystemC.
#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <random>

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

namespace {

// The contract of l2_cache.h written the plain way (a list in recency order and an ordered map),
// to hold the model to over long random call sequences.
class PlainL2 {
 public:
  explicit PlainL2(std::uint64_t lines) : capacity_(lines) {}
  pc::L2Cache::Access access(std::uint64_t addr, std::uint64_t bytes, int op) {  // 0 read 1 write 2 lookup 3 invalidate
    pc::L2Cache::Access a;
    if (bytes == 0) return a;
    for (std::uint64_t line = addr / L; line <= (addr + bytes - 1) / L; ++line) {
      const std::uint64_t lo = std::max(addr, line * L), hi = std::min(addr + bytes, (line + 1) * L);
      const auto it = dirty_.find(line);
      const bool here = it != dirty_.end();
      if (op == 2) {
        (here ? a.hit_bytes : a.miss_bytes) += hi - lo;
      } else if (op == 3) {
        if (!here) continue;
        if (it->second && !(addr <= line * L && addr + bytes >= (line + 1) * L)) a.writebacks.push_back(line * L);
        a.invalidated_bytes += L;
        order_.remove(line);
        dirty_.erase(it);
      } else {
        if (op == 1) a.written_bytes += hi - lo;
        else if (here) a.hit_bytes += hi - lo;
        else a.miss_bytes += hi - lo, a.fetched_bytes += L;
        if (here) {
          order_.remove(line);
          order_.push_front(line);
          it->second = it->second || op == 1;
        } else if (capacity_ == 0) {
          if (op == 1) a.writebacks.push_back(line * L);
        } else {
          if (dirty_.size() >= capacity_) {
            const std::uint64_t victim = order_.back();
            order_.pop_back();
            if (dirty_[victim]) a.writebacks.push_back(victim * L);
            dirty_.erase(victim);
          }
          order_.push_front(line);
          dirty_[line] = op == 1;
        }
      }
    }
    return a;
  }
  std::uint64_t resident_bytes() const { return dirty_.size() * L; }
  std::uint64_t dirty_bytes() const {
    std::uint64_t n = 0;
    for (const auto& [line, d] : dirty_) n += d ? L : 0;
    return n;
  }
  const std::map<std::uint64_t, bool>& lines() const { return dirty_; }

 private:
  std::uint64_t capacity_;
  std::list<std::uint64_t> order_;
  std::map<std::uint64_t, bool> dirty_;
};

}  // namespace

TEST(L2Cache, AgreesWithThePlainModelOverRandomCallSequences) {
  std::mt19937_64 rng(7);
  for (const std::uint64_t lines : {0ull, 1ull, 3ull, 17ull, 64ull, 300ull}) {
    pc::L2Cache c(lines * L);
    PlainL2 ref(lines);
    // Addresses from two regions far apart (distinct index homes) and a dense one that overflows the cache.
    std::uniform_int_distribution<int> op_of(0, 9), region(0, 2);
    std::uniform_int_distribution<std::uint64_t> off(0, 600 * L), len(0, 9 * L);
    for (int step = 0; step < 4000; ++step) {
      const int r = op_of(rng);
      const int op = r < 4 ? 0 : r < 7 ? 1 : r < 9 ? 2 : 3;
      const std::uint64_t addr = std::uint64_t{1} << (20 + 8 * region(rng)) | off(rng), bytes = len(rng);
      const pc::L2Cache::Access got = op == 0 ? c.read(addr, bytes)
                                      : op == 1 ? c.write(addr, bytes)
                                      : op == 2 ? c.lookup(addr, bytes)
                                                : c.invalidate(addr, bytes);
      const pc::L2Cache::Access want = ref.access(addr, bytes, op);
      ASSERT_EQ(got.hit_bytes, want.hit_bytes) << lines << " lines, call " << step;
      ASSERT_EQ(got.miss_bytes, want.miss_bytes) << lines << " lines, call " << step;
      ASSERT_EQ(got.fetched_bytes, want.fetched_bytes) << lines << " lines, call " << step;
      ASSERT_EQ(got.written_bytes, want.written_bytes) << lines << " lines, call " << step;
      ASSERT_EQ(got.invalidated_bytes, want.invalidated_bytes) << lines << " lines, call " << step;
      ASSERT_EQ(got.writebacks, want.writebacks) << lines << " lines, call " << step;
      ASSERT_EQ(c.resident_bytes(), ref.resident_bytes()) << lines << " lines, call " << step;
      ASSERT_EQ(c.dirty_bytes(), ref.dirty_bytes()) << lines << " lines, call " << step;
    }
    for (const auto& [line, d] : ref.lines()) {
      EXPECT_TRUE(c.resident(line * L));
      EXPECT_EQ(c.dirty(line * L), d);
    }
  }
}
