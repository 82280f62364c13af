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

TEST(ProbeCodec, EveryEdgeObservationFieldSurvivesTheRoundTrip) {
  // A partition's evidence reaches the diagnosis of the whole job through this codec: the
  // magnitudes of a captured edge are what shows that an update wrote a value its inputs cannot
  // produce (data corruption, not an overflow of the op that read it). They were left out once,
  // and a 2-process run blamed the MatMul.
  probes::EdgeObservation o;
  o.has_stats = true;
  o.nan_count = 2;
  o.inf_count = 3;
  o.count = 64;
  o.hash = 0x1234'5678'9abc'def0ull;
  o.max_abs = 40000.0;
  o.l2 = 40000.25;
  o.min = -1.5;
  o.cycle = 777;
  probes::RuntimeReport rep;
  rep.observations[{0, 12, false, 0}] = o;
  probes::EdgeObservation bare;  // no statistics: the optionals stay empty
  bare.hash = 9;
  rep.observations[{1, 12, true, 1}] = bare;
  ProbeRankResults in;
  in.reports.push_back(rep);
  const ProbeRankResults out = decode_probe_results(encode_probe_results(in));
  ASSERT_EQ(out.reports.size(), 1u);
  ASSERT_EQ(out.reports[0].observations.size(), 2u);
  const probes::EdgeObservation& r = out.reports[0].observations.at({0, 12, false, 0});
  EXPECT_TRUE(r.has_stats);
  EXPECT_EQ(r.nan_count, 2u);
  EXPECT_EQ(r.inf_count, 3u);
  EXPECT_EQ(r.count, 64u);
  EXPECT_EQ(r.hash, o.hash);
  EXPECT_EQ(r.max_abs, o.max_abs);
  EXPECT_EQ(r.l2, o.l2);
  EXPECT_EQ(r.min, o.min);
  EXPECT_EQ(r.cycle, 777u);
  const probes::EdgeObservation& b = out.reports[0].observations.at({1, 12, true, 1});
  EXPECT_FALSE(b.max_abs.has_value());
  EXPECT_FALSE(b.l2.has_value());
  EXPECT_FALSE(b.min.has_value());
  EXPECT_EQ(b.hash, std::optional<std::uint64_t>(9));
}

}  // namespace
}  // namespace probelab::sim
