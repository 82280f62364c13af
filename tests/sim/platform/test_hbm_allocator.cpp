// The host-side HBM allocator: first fit, alignment, coalescing, exhaustion.
#include <gtest/gtest.h>

#include "sim/platform/hbm_allocator.h"

namespace probelab::sim {
namespace {

TEST(HbmAllocator, FirstFitAlignedAndCoalescing) {
  HbmAllocator a(4096, 4096 + (1 << 20));
  const auto x = a.alloc(100);
  const auto y = a.alloc(1000, 4096);
  const auto z = a.alloc(64);
  EXPECT_EQ(x, 4096u);
  EXPECT_EQ(y % 4096, 0u);
  EXPECT_GT(y, x);
  EXPECT_EQ(z, x + 128);  // fits in the gap before y (first fit)
  a.free(x);
  a.free(z);
  EXPECT_EQ(a.alloc(192), 4096u);  // the gap coalesced back
  a.free(y);
  EXPECT_THROW(a.free(y), std::invalid_argument);
  EXPECT_THROW(a.alloc(0), std::invalid_argument);
  EXPECT_THROW(a.alloc(64, 48), std::invalid_argument);
}

TEST(HbmAllocator, ExhaustionNamesTheRequest) {
  HbmAllocator a(64, 64 + 1024);
  a.alloc(1000);
  try {
    a.alloc(100);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("100 bytes requested"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.used_bytes(), 1024u);
  EXPECT_EQ(a.peak_bytes(), 1024u);
}

TEST(HbmAllocator, SameSequenceSameAddresses) {
  auto run = [] {
    HbmAllocator a(4096, 1 << 24);
    std::vector<std::uint64_t> v;
    for (int i = 0; i < 50; ++i) {
      v.push_back(a.alloc(static_cast<std::size_t>(64 + i * 37), i % 3 ? 64 : 512));
      if (i % 4 == 3) a.free(v[static_cast<std::size_t>(i - 2)]);
    }
    return v;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace probelab::sim
