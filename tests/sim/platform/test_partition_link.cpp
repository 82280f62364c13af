// The coordinator's window rule (decide_window): where a window ends, and what it grants.
#include <gtest/gtest.h>

#include "sim/platform/partition_link.h"

namespace probelab::sim {
namespace {

TEST(PartitionWindow, AWindowEndsOnTheLastCellBoundaryWithinTheLookahead) {
  // Cells of 450 ns (the network's smallest link latency), 1000 ns between partitions: from an
  // event at 1,234 ns the window may run to 2,234 ns; it stops at 1,800 ns, the cell boundary
  // before, so the network's cell [1350, 1800) is never cut between two windows.
  EXPECT_EQ(window_end(1'234'000, 1'000'000, 450'000), 1'800'000u);
  // On a boundary: the whole lookahead when it is a multiple of the cell.
  EXPECT_EQ(window_end(900'000, 900'000, 450'000), 1'800'000u);
  // Always past the event (lookahead >= cell): here the first boundary after it.
  EXPECT_EQ(window_end(449'999, 450'000, 450'000), 450'000u);
  for (std::uint64_t next = 0; next < 5'000'000; next += 7'919) {
    const std::uint64_t end = window_end(next, 1'000'000, 450'000);
    EXPECT_GT(end, next);
    EXPECT_LE(end, next + 1'000'000);
    EXPECT_EQ(end % 450'000, 0u);
  }
  // Without cells (no lookahead in the network), or a cell longer than the lookahead: next + lookahead.
  EXPECT_EQ(window_end(1'234'000, 1'000'000, 0), 2'234'000u);
  EXPECT_EQ(window_end(1'234'000, 400'000, 450'000), 1'634'000u);
  EXPECT_EQ(window_end(kNever, 1'000'000, 450'000), kNever);
}

TEST(PartitionWindow, TheGrantsEndTheirWindowOnACellBoundary) {
  std::vector<WindowReport> reports(2);
  reports[0].next_ps = 5'000'000;
  reports[1].next_ps = 3'100'000;
  const std::vector<WindowGrant> g = decide_window(reports, 1'000'000, 450'000);
  ASSERT_EQ(g.size(), 2u);
  for (const WindowGrant& w : g) {
    EXPECT_FALSE(w.stop);
    EXPECT_EQ(w.until_ps, 4'050'000u);  // 3,100 + 1,000 ns, down to a multiple of 450 ns
  }
}

// A host's synchronize timeout (a hang) stops every partition as a deadlock: each then reports
// what its ranks are blocked in; no error. A host failing otherwise stops them with no deadlock;
// nothing pending while a host runs is a deadlock that carries the old message too (for the
// partitions that have no blocked collective to report).
TEST(PartitionWindow, AHostTimeoutStopsEveryPartitionAsADeadlock) {
  std::vector<WindowReport> reports(2);
  reports[0].next_ps = 5'000'000;
  reports[1].timed_out = true;
  for (const WindowGrant& w : decide_window(reports, 1'000'000, 450'000)) {
    EXPECT_TRUE(w.stop);
    EXPECT_TRUE(w.deadlock);
    EXPECT_TRUE(w.error.empty()) << w.error;
  }
  reports[0].hosts_done = reports[1].hosts_done = true;  // every host returned, some by their timeout
  for (const WindowGrant& w : decide_window(reports, 1'000'000, 450'000)) EXPECT_TRUE(w.deadlock);
  reports[1].failed = true;
  for (const WindowGrant& w : decide_window(reports, 1'000'000, 450'000)) {
    EXPECT_TRUE(w.stop);
    EXPECT_FALSE(w.deadlock);
  }
  std::vector<WindowReport> idle(2);
  idle[0].running = " host3";
  for (const WindowGrant& w : decide_window(idle, 1'000'000, 450'000)) {
    EXPECT_TRUE(w.stop);
    EXPECT_TRUE(w.deadlock);
    EXPECT_NE(w.error.find("host3"), std::string::npos) << w.error;
  }
  idle[0].hosts_done = idle[1].hosts_done = true;
  for (const WindowGrant& w : decide_window(idle, 1'000'000, 450'000)) EXPECT_FALSE(w.deadlock);
}

}  // namespace
}  // namespace probelab::sim
