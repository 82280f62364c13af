// The probe results a partition sends to the process that writes the report
// (sim/run/probe_codec.h) come back field for field: statistics with every field set to its own
// value, in a sync sample, a trigger and a dump entry, survive the round trip bit for bit.
#include <cstring>

#include <gtest/gtest.h>

#include "sim/run/probe_codec.h"

namespace probelab::sim {
namespace {

spec::CaptureStats distinct_stats() {
  static_assert(sizeof(spec::CaptureStats) % sizeof(double) == 0);
  spec::CaptureStats s;
  unsigned char bytes[sizeof s];
  for (std::size_t i = 0; i < sizeof s; i += sizeof(double)) {
    // Each 8-byte field its own value: as a double 1.5 + i (small uint64 fields get a count).
    const double d = 1.5 + static_cast<double>(i);
    std::memcpy(bytes + i, &d, sizeof d);
  }
  std::memcpy(&s, bytes, sizeof s);
  s.count = 7, s.nan_count = 1, s.inf_count = 2, s.zero_count = 3;
  return s;
}

void expect_same(const spec::CaptureStats& a, const spec::CaptureStats& b) {
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "a statistics field was lost on the way (probe_codec.cpp)";
}

TEST(ProbeCodec, EveryStatisticsFieldSurvivesTheRoundTrip) {
  const spec::CaptureStats s = distinct_stats();
  ProbeRankResults in;
  probes::SyncSample smp;
  smp.rank = 3, smp.step = 2, smp.group = 1, smp.op = "x/allreduce", smp.order = 9, smp.tensor = "x", smp.index = 0;
  smp.stats = s;
  in.samples.push_back(smp);
  probes::RuntimeReport rep;
  rep.rank = 3;
  probes::TriggerEvent t;
  t.stats = s;
  rep.triggers.push_back(t);
  rep.dump_entries = 4321;
  in.reports.push_back(rep);

  const ProbeRankResults out = decode_probe_results(encode_probe_results(in));
  ASSERT_EQ(out.samples.size(), 1u);
  ASSERT_TRUE(out.samples[0].stats.has_value());
  expect_same(*out.samples[0].stats, s);
  EXPECT_EQ(out.samples[0].group, 1u);
  EXPECT_EQ(out.samples[0].order, 9u);
  ASSERT_EQ(out.reports.size(), 1u);
  ASSERT_EQ(out.reports[0].triggers.size(), 1u);
  ASSERT_TRUE(out.reports[0].triggers[0].stats.has_value());
  expect_same(*out.reports[0].triggers[0].stats, s);
  EXPECT_EQ(out.reports[0].dump_entries, 4321u);
}

}  // namespace
}  // namespace probelab::sim
