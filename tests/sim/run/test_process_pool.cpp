// The process pool: every job in its own child, at most N at a time, exit codes and signals
// reported per job, and children of the process that are not the pool's left alone.
#include <csignal>
#include <map>
#include <set>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "sim/run/process_pool.h"

namespace probelab::sim {
namespace {

TEST(ProcessPool, ReportsEachJobsExitCodeAndSignal) {
  ProcessPool pool(2);
  for (int i = 0; i < 5; ++i) pool.submit([i] { return i; });
  pool.submit([] {
    ::raise(SIGKILL);
    return 0;
  });
  std::map<std::size_t, ChildStatus> done;
  pool.run([&](std::size_t index, const ChildStatus& st) { done[index] = st; });
  ASSERT_EQ(done.size(), 6u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(done[static_cast<std::size_t>(i)].exit_code, i);
    EXPECT_EQ(done[static_cast<std::size_t>(i)].signal, 0);
  }
  EXPECT_EQ(done[5].signal, SIGKILL);
  EXPECT_FALSE(done[5].ok());
}

TEST(ProcessPool, LeavesOtherChildrenToTheirOwner) {
  // A child of this process that is not the pool's ends while the pool waits: its exit status
  // must still be there for whoever started it (a Python session's subprocess, say).
  const pid_t other = ::fork();
  ASSERT_GE(other, 0);
  if (other == 0) ::_exit(7);
  ProcessPool pool(1);
  pool.submit([] {
    ::usleep(200000);
    return 0;
  });
  std::set<std::size_t> done;
  pool.run([&](std::size_t index, const ChildStatus& st) {
    EXPECT_TRUE(st.ok());
    done.insert(index);
  });
  EXPECT_EQ(done, std::set<std::size_t>{0});
  int status = 0;
  ASSERT_EQ(::waitpid(other, &status, 0), other);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

}  // namespace
}  // namespace probelab::sim
