#include "sim/run/process_pool.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <system_error>
#include <vector>

#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

namespace probelab::sim {

namespace {

// Running children, visible to the signal handler (lock-free atomics are async-signal-safe).
std::array<std::atomic<int>, ProcessPool::kMaxParallel> g_children{};
std::atomic<int> g_signal{0};

constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};

extern "C" void on_signal(int sig) {
  g_signal.store(sig);
  for (auto& c : g_children)
    if (const int pid = c.load(); pid > 0) ::kill(pid, SIGKILL);
}

// Signals the process ignored when run() began (nohup's SIGHUP): they stay ignored, here and in
// the children.
std::array<bool, kSignals.size()> g_ignored{};

// Installs the handler for the lifetime of one run() (no SA_RESTART: waitpid returns EINTR) and
// restores the process's own dispositions after it.
class SignalScope {
 public:
  SignalScope() {
    g_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < kSignals.size(); ++i) {
      ::sigaction(kSignals[i], nullptr, &old_[i]);
      g_ignored[i] = old_[i].sa_handler == SIG_IGN;
      if (!g_ignored[i]) ::sigaction(kSignals[i], &sa, nullptr);
    }
  }
  ~SignalScope() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  std::array<struct sigaction, kSignals.size()> old_{};
};

void track(pid_t pid) {
  for (auto& c : g_children) {
    int expected = 0;
    if (c.compare_exchange_strong(expected, pid)) return;
  }
}

void untrack(pid_t pid) {
  for (auto& c : g_children) {
    int expected = pid;
    if (c.compare_exchange_strong(expected, 0)) return;
  }
}

// In a fresh child: default signal dispositions, and death with the parent.
void enter_child(pid_t parent) {
  for (std::size_t i = 0; i < kSignals.size(); ++i) std::signal(kSignals[i], g_ignored[i] ? SIG_IGN : SIG_DFL);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(137);  // the parent died before prctl took effect
}

}  // namespace

std::string ChildStatus::describe() const {
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
  return fmt::format("exit code {}", exit_code);
}

void end_by_signal(int sig) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::signal(sig, SIG_DFL);
  ::raise(sig);
  ::_exit(128 + sig);  // not reached unless the signal is blocked
}

bool process_alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

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
  SignalScope signals;
  const int max_running = std::min(max_, kMaxParallel);
  std::map<pid_t, Running> running;
  std::size_t next = 0;
  const pid_t self = ::getpid();
  auto forget = [&](std::map<pid_t, Running>::iterator it) {
    untrack(it->first);
    if (it->second.pidfd >= 0) ::close(it->second.pidfd);
    return running.erase(it);
  };
  // A signal arrived: every child is being killed; reap them all, clean up, throw Interrupted.
  auto interrupted = [&] {
    const int sig = g_signal.load();
    on_signal(sig);
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      if (::waitpid(it->first, &status, 0) < 0 && errno == EINTR) continue;
      it = forget(it);
    }
    if (cleanup_) cleanup_();
    jobs_.clear();
    throw Interrupted{sig};
  };
  // Waits for one of this pool's children only (waitpid on each, never on any child): the process
  // may have children that are not the pool's -- a Python session embedding the runner -- and
  // reaping one of those would take its exit status from its owner.
  auto reap_one = [&] {
    for (;;) {
      if (g_signal.load() != 0) interrupted();
      for (auto it = running.begin(); it != running.end(); ++it) {
        int status = 0;
        const pid_t pid = ::waitpid(it->first, &status, WNOHANG);
        if (pid < 0 && errno == EINTR) break;  // a signal: checked above
        if (pid < 0) throw std::system_error(errno, std::generic_category(), "waitpid");
        if (pid == 0) continue;
        ChildStatus cs;
        if (WIFEXITED(status)) cs.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) cs.signal = WTERMSIG(status);
        const std::size_t index = it->second.index;
        forget(it);
        if (on_done) on_done(index, cs);
        return;
      }
      if (g_signal.load() != 0) continue;
      // None has ended yet: sleep until one does (pidfds) or a signal arrives (poll returns
      // EINTR; the handler's SIGKILLs also end the sleep), or poll every 2 ms without pidfds.
      std::vector<pollfd> fds;
      for (const auto& [pid, r] : running)
        if (r.pidfd >= 0) fds.push_back({r.pidfd, POLLIN, 0});
      const bool all = fds.size() == running.size();
      ::poll(fds.data(), fds.size(), all ? -1 : 2);
    }
  };
  while (next < jobs_.size() || !running.empty()) {
    while (next < jobs_.size() && static_cast<int>(running.size()) < max_running) {
      if (g_signal.load() != 0) interrupted();
      std::fflush(stdout);
      std::fflush(stderr);
      // Signals wait until the child is tracked (parent) or has default handlers (child).
      sigset_t block, old;
      sigemptyset(&block);
      for (int sig : kSignals) sigaddset(&block, sig);
      ::sigprocmask(SIG_BLOCK, &block, &old);
      const pid_t pid = ::fork();
      if (pid < 0) {
        const int e = errno;
        ::sigprocmask(SIG_SETMASK, &old, nullptr);
        throw std::system_error(e, std::generic_category(), "fork");
      }
      if (pid == 0) {
        enter_child(self);
        ::sigprocmask(SIG_SETMASK, &old, nullptr);
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
      track(pid);
      running.emplace(pid, Running{next++, open_pidfd(pid)});
      ::sigprocmask(SIG_SETMASK, &old, nullptr);
      if (g_signal.load() != 0) interrupted();
    }
    if (!running.empty()) reap_one();
  }
  jobs_.clear();
}

}  // namespace probelab::sim
