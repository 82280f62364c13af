#include "sim/run/process_pool.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <system_error>
#include <vector>

#include <poll.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

namespace probelab::sim {

std::string ChildStatus::describe() const {
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
  return fmt::format("exit code {}", exit_code);
}

std::size_t ProcessPool::submit(Job job) {
  jobs_.push_back(std::move(job));
  return jobs_.size() - 1;
}

namespace {

/// A descriptor that becomes readable when `pid` ends (pidfd, Linux >= 5.3); -1 where there is none.
int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

struct Running {
  std::size_t index = 0;
  int pidfd = -1;
};

}  // namespace

void ProcessPool::run(const Done& on_done) {
  std::map<pid_t, Running> running;
  std::size_t next = 0;
  // Waits for one of this pool's children only (waitpid on each, never on any child): the process
  // may have children that are not the pool's -- a Python session embedding the runner -- and
  // reaping one of those would take its exit status from its owner.
  auto reap_one = [&] {
    for (;;) {
      for (auto it = running.begin(); it != running.end(); ++it) {
        int status = 0;
        const pid_t pid = ::waitpid(it->first, &status, WNOHANG);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) throw std::system_error(errno, std::generic_category(), "waitpid");
        if (pid == 0) continue;
        ChildStatus cs;
        if (WIFEXITED(status)) cs.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) cs.signal = WTERMSIG(status);
        const std::size_t index = it->second.index;
        if (it->second.pidfd >= 0) ::close(it->second.pidfd);
        running.erase(it);
        if (on_done) on_done(index, cs);
        return;
      }
      // None has ended yet: sleep until one does (pidfds), or poll every 2 ms without them.
      std::vector<pollfd> fds;
      for (const auto& [pid, r] : running)
        if (r.pidfd >= 0) fds.push_back({r.pidfd, POLLIN, 0});
      const bool all = fds.size() == running.size();
      ::poll(fds.data(), fds.size(), all ? -1 : 2);
    }
  };
  while (next < jobs_.size() || !running.empty()) {
    while (next < jobs_.size() && static_cast<int>(running.size()) < max_) {
      std::fflush(stdout);
      std::fflush(stderr);
      const pid_t pid = ::fork();
      if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
      if (pid == 0) {
        int rc = 70;
        try {
          rc = jobs_[next]();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "probelab: child process: %s\n", e.what());
        } catch (...) {
          std::fprintf(stderr, "probelab: child process: unknown exception\n");
        }
        std::fflush(stdout);
        std::fflush(stderr);
        ::_exit(rc);
      }
      running.emplace(pid, Running{next++, open_pidfd(pid)});
    }
    if (!running.empty()) reap_one();
  }
  jobs_.clear();
}

}  // namespace probelab::sim
