#include "sim/run/process_pool.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <system_error>

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

void ProcessPool::run(const Done& on_done) {
  std::map<pid_t, std::size_t> running;
  std::size_t next = 0;
  auto reap_one = [&] {
    int status = 0;
    pid_t pid;
    do {
      pid = ::waitpid(-1, &status, 0);
    } while (pid < 0 && errno == EINTR);
    if (pid < 0) throw std::system_error(errno, std::generic_category(), "waitpid");
    auto it = running.find(pid);
    if (it == running.end()) return;  // not ours
    ChildStatus cs;
    if (WIFEXITED(status)) cs.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) cs.signal = WTERMSIG(status);
    const std::size_t index = it->second;
    running.erase(it);
    if (on_done) on_done(index, cs);
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
      running.emplace(pid, next++);
    }
    if (!running.empty()) reap_one();
  }
  jobs_.clear();
}

}  // namespace probelab::sim
