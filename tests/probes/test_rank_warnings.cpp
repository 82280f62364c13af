// log::warn_rank: a warning every rank of a process gives prints once, naming the first rank and
// counting the others, in a deterministic order.
#include <string>

#include <gtest/gtest.h>

#include "probes/log.h"

namespace probelab::probes {
namespace {

// stderr of `body` followed by flush_rank_warnings(). Messages are process-wide: each test uses
// its own.
template <class F>
std::string stderr_of(F body) {
  testing::internal::CaptureStderr();
  body();
  log::flush_rank_warnings();
  return testing::internal::GetCapturedStderr();
}

TEST(RankWarnings, EveryRankGivingTheSameWarningPrintsItOnce) {
  const std::string err = stderr_of([] {
    for (std::uint32_t r = 0; r < 16; ++r) log::warn_rank("runtime", r, 16, "same on all");
    for (std::uint32_t r = 0; r < 16; ++r) log::warn_rank("runtime", r, 16, "same on all");  // a second step
  });
  EXPECT_EQ(err, "[probes:runtime] warning: rank 0: same on all (and 15 more ranks)\n");
}

TEST(RankWarnings, ItPrintsOnceEveryRankGaveIt) {
  testing::internal::CaptureStderr();
  for (std::uint32_t r = 0; r < 3; ++r) log::warn_rank("runtime", r, 4, "three of four");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  const std::string err = stderr_of([] { log::warn_rank("runtime", 3, 4, "three of four"); });
  EXPECT_EQ(err, "[probes:runtime] warning: rank 0: three of four (and 3 more ranks)\n");
}

TEST(RankWarnings, SeveralWarningsPerRankKeepTheirOrderAndCounts) {
  const std::string err = stderr_of([] {
    for (std::uint32_t r = 2; r < 5; ++r) {  // a process holding ranks 2-4 of 8
      log::warn_rank("runtime", r, 8, "first of a rank");
      log::warn_rank("runtime", r, 8, "second of a rank");
    }
  });
  EXPECT_EQ(err,
            "[probes:runtime] warning: rank 2: first of a rank (and 2 more ranks)\n"
            "[probes:runtime] warning: rank 2: second of a rank (and 2 more ranks)\n");
}

TEST(RankWarnings, ANewWarningOfARankThatMovedOnPrintsTheHeldOnes) {
  testing::internal::CaptureStderr();
  log::warn_rank("runtime", 0, 8, "step 0 of two ranks");
  log::warn_rank("runtime", 1, 8, "step 0 of two ranks");
  log::warn_rank("runtime", 0, 8, "step 1 of rank 0");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "[probes:runtime] warning: rank 0: step 0 of two ranks (and 1 more rank)\n");
  EXPECT_EQ(stderr_of([] {}), "[probes:runtime] warning: rank 0: step 1 of rank 0\n");
}

TEST(RankWarnings, ASingleRankPrintsAtOnceAndChannelsAreApart) {
  testing::internal::CaptureStderr();
  log::warn_rank("runtime", 0, 1, "alone");
  log::warn_rank("drain", 0, 1, "alone");
  log::warn_rank("runtime", 0, 1, "alone");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "[probes:runtime] warning: rank 0: alone\n[probes:drain] warning: rank 0: alone\n");
}

}  // namespace
}  // namespace probelab::probes
