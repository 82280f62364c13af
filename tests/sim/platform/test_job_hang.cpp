// find_hang (job_hang.h): when a run that stopped is a job hang, and when and how it was noticed.
#include <gtest/gtest.h>

#include "sim/platform/job_hang.h"

namespace probelab::sim {
namespace {

chip::BlockedCollective blocked(std::uint32_t rank, std::uint64_t since_ps) {
  chip::BlockedCollective b;
  b.rank = rank;
  b.since_ps = since_ps;
  b.collective = "allreduce ring count 16";
  b.waits_for = rank ^ 1;
  return b;
}

TEST(JobHang, BlockedRanksWithoutAnotherFailureAreAHang) {
  std::vector<HostEnd> hosts = {{0, true, true, false, 900, "r0 stream 0: no task completed"},
                                {1, false, false, false, 0, ""},
                                {2, true, false, false, 300, ""},
                                {3, true, true, false, 700, "r3 stream 0: no task completed"}};
  const auto h = find_hang(hosts, {blocked(3, 50), blocked(1, 80), blocked(0, 60)}, false);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->time_ps, 700u);  // the first timeout, r3's
  EXPECT_EQ(h->noticed_by, "r3 stream 0: no task completed");
  EXPECT_EQ(h->waiting, (std::vector<std::uint32_t>{0, 1, 3}));  // r2 returned
  ASSERT_EQ(h->blocked.size(), 3u);
  EXPECT_EQ(h->blocked[0].rank, 0u);  // by rank
  EXPECT_EQ(h->blocked[2].rank, 3u);

  // Noticed when nothing was left to simulate: the last progress (an arrival or a return).
  hosts[0].timed_out = hosts[3].timed_out = false;
  hosts[0].finished = hosts[3].finished = false;
  const auto idle = find_hang(hosts, {blocked(1, 80), blocked(0, 60)}, false);
  ASSERT_TRUE(idle.has_value());
  EXPECT_EQ(idle->time_ps, 300u);  // r2 returned after the two arrived
  EXPECT_TRUE(idle->noticed_by.empty());
}

TEST(JobHang, AnotherFailureOrNoBlockedCollectiveIsNoHang) {
  const std::vector<HostEnd> timeout = {{0, true, true, false, 900, "timeout"}, {1, false, false, false, 0, ""}};
  EXPECT_FALSE(find_hang(timeout, {}, false).has_value());                // waits for something else
  EXPECT_FALSE(find_hang(timeout, {blocked(0, 1)}, true).has_value());   // a chip's task failed
  const std::vector<HostEnd> failed = {{0, true, false, true, 900, "kernel error"}, {1, false, false, false, 0, ""}};
  EXPECT_FALSE(find_hang(failed, {blocked(1, 1)}, false).has_value());
  const std::vector<HostEnd> done = {{0, true, false, false, 900, ""}, {1, true, false, false, 950, ""}};
  EXPECT_FALSE(find_hang(done, {blocked(1, 1)}, false).has_value());     // every program returned
}

}  // namespace
}  // namespace probelab::sim
