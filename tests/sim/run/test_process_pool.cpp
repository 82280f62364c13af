// The process pool: every job in its own child, at most N at a time, exit codes and signals
// reported per job, children of the process that are not the pool's left alone, and a signal that
// kills the pool's children, runs the cleanup and reaches the caller as Interrupted.
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

TEST(ProcessPool, ASignalKillsTheChildrenAndThrowsInterrupted) {
  struct sigaction before {};
  ::sigaction(SIGTERM, nullptr, &before);
  const pid_t other = ::fork();  // not the pool's: it must survive and keep its status
  ASSERT_GE(other, 0);
  if (other == 0) {
    ::sleep(3);
    ::_exit(7);
  }
  ProcessPool pool(2);
  for (int i = 0; i < 4; ++i)
    pool.submit([i] {
      if (i == 0) ::kill(::getppid(), SIGTERM);
      ::pause();  // until killed: only the pool's SIGKILL ends these
      return 0;
    });
  bool cleaned = false;
  pool.set_interrupt_cleanup([&] { cleaned = true; });
  int finished = 0;
  try {
    pool.run([&](std::size_t, const ChildStatus&) { ++finished; });
    ADD_FAILURE() << "run() returned after SIGTERM";
  } catch (const Interrupted& i) {
    EXPECT_EQ(i.signal, SIGTERM);
  }
  EXPECT_TRUE(cleaned);
  EXPECT_EQ(finished, 0);  // the killed children are not reported as results
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), 0) << "the pool left a child unreaped";  // only `other` is left
  struct sigaction after {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);  // the process's own disposition is back
  int status = 0;
  ASSERT_EQ(::waitpid(other, &status, 0), other);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

}  // namespace
}  // namespace probelab::sim
