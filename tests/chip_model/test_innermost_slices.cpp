// The innermost enclosing slice of many times at once (trace flows, anomaly ISR lookups) against
// the definition applied time by time: nested, overlapping, touching and tied slices, queries in
// any order; and Trace::slices_at keeping to its pid and track.
#include <gtest/gtest.h>

#include <random>

#include "chip_model/innermost_slices.h"
#include "chip_model/trace.h"

namespace pc = probelab::chip;

namespace {

// The definition: latest start, then shortest, then lowest index, among the slices containing t.
std::size_t by_definition(const std::vector<pc::SliceSpan>& s, std::uint64_t t) {
  std::size_t best = pc::kNoSlice;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i].start_ps > t || t > s[i].start_ps + s[i].dur_ps) continue;
    if (best == pc::kNoSlice || s[i].start_ps > s[best].start_ps ||
        (s[i].start_ps == s[best].start_ps && s[i].dur_ps < s[best].dur_ps))
      best = i;
  }
  return best;
}

TEST(InnermostSlices, AgreesWithTheDefinitionOnRandomSlices) {
  std::mt19937_64 rng(17);
  std::size_t found = 0, none = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = rng() % 40, q = 1 + rng() % 60;
    std::vector<pc::SliceSpan> spans;
    for (std::size_t i = 0; i < n; ++i) {
      // A small time range so that starts, ends and durations tie often; some long slices.
      const std::uint64_t start = rng() % 50, dur = (rng() % 4 == 0) ? rng() % 60 : rng() % 6;
      spans.push_back({start, dur});
      if (rng() % 5 == 0) spans.push_back(spans.back());  // an exact duplicate: the first one wins
    }
    std::vector<std::uint64_t> ts;
    for (std::size_t i = 0; i < q; ++i) ts.push_back(rng() % 120);
    const std::vector<std::size_t> got = pc::innermost_slices(spans, ts);
    ASSERT_EQ(got.size(), ts.size());
    for (std::size_t i = 0; i < q; ++i) {
      ASSERT_EQ(got[i], by_definition(spans, ts[i])) << "trial " << trial << " t " << ts[i];
      (got[i] == pc::kNoSlice ? none : found) += 1;
    }
  }
  // Both outcomes are exercised.
  EXPECT_GT(found, 1000u);
  EXPECT_GT(none, 100u);
}

TEST(InnermostSlices, EndpointsAreInsideAndEmptyInputsAnswerNothing) {
  const std::vector<pc::SliceSpan> s{{10, 5}, {12, 0}};
  EXPECT_EQ(pc::innermost_slices(s, {10, 15, 16, 12, 9}), (std::vector<std::size_t>{0, 0, pc::kNoSlice, 1, pc::kNoSlice}));
  EXPECT_EQ(pc::innermost_slices({}, {3}), std::vector<std::size_t>{pc::kNoSlice});
  EXPECT_TRUE(pc::innermost_slices(s, {}).empty());
}

TEST(TraceSlicesAt, AnswersFromItsPidAndTrackOnly) {
  pc::Trace t(true);
  t.complete(7, "isr", "outer", "irq", 100, 100);
  t.complete(7, "isr", "inner", "irq", 150, 10);
  t.complete(7, "other", "elsewhere", "irq", 140, 50);  // another track
  t.complete(8, "isr", "rank 1", "irq", 140, 50);       // another pid
  t.instant(7, "isr", "mark", "irq", 155);              // not a slice
  const auto got = t.slices_at("isr", {{7, 155}, {7, 120}, {8, 150}, {7, 300}, {9, 150}});
  ASSERT_EQ(got.size(), 5u);
  ASSERT_TRUE(got[0] && got[1] && got[2]);
  EXPECT_EQ(got[0]->name, "inner");
  EXPECT_EQ(got[1]->name, "outer");
  EXPECT_EQ(got[2]->name, "rank 1");
  EXPECT_FALSE(got[3]);
  EXPECT_FALSE(got[4]);
}

}  // namespace
