// Runs jobs in forked child processes (SystemC elaborates one design per process, so every
// simulation gets its own process), at most `max_parallel` at a time, started in submission
// order. The parent must be single-threaded and must not have elaborated SystemC itself.
//
// Children never outlive the parent: each asks the kernel for SIGKILL when its parent dies
// (PR_SET_PDEATHSIG), so a `kill -9` of probelab ends its workers too. While run() waits,
// SIGINT, SIGTERM and SIGHUP (those the process does not ignore) kill (SIGKILL) and reap every
// running child, run the cleanup given to set_interrupt_cleanup() and throw Interrupted: the
// process that embeds the pool decides what the signal means (the CLI ends by it, the Python
// module raises KeyboardInterrupt for SIGINT).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace probelab::sim {

/// Thrown by ProcessPool::run() after a signal interrupted it (children reaped, cleanup run).
/// Not a std::exception, so that no handler of errors takes it for one on its way out.
struct Interrupted {
  int signal = 0;
};

/// Ends the process by `sig` with its default action (stdout and stderr flushed).
[[noreturn]] void end_by_signal(int sig);

struct ChildStatus {
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // the signal that killed the child, 0 if it exited
  bool ok() const { return signal == 0 && exit_code == 0; }
  std::string describe() const;  // "exit code 3" / "killed by signal 11 (Segmentation fault)"
};

class ProcessPool {
 public:
  /// Runs in the child; its return value is the child's exit code. The child ends with _exit()
  /// right after (no static destructors, no atexit handlers of the parent).
  using Job = std::function<int()>;
  using Done = std::function<void(std::size_t index, const ChildStatus& status)>;

  explicit ProcessPool(int max_parallel) : max_(max_parallel < 1 ? 1 : max_parallel) {}

  /// Queues a job; returns its index.
  std::size_t submit(Job job);
  /// Runs in the parent when a signal interrupts run(), after the children are reaped (e.g. to
  /// remove scratch directories); then run() throws Interrupted.
  void set_interrupt_cleanup(std::function<void()> cleanup) { cleanup_ = std::move(cleanup); }
  /// Starts every queued job and waits for all of them; `on_done` is called in the parent as
  /// each child ends (completion order). Throws std::system_error when fork fails, Interrupted
  /// after a signal.
  void run(const Done& on_done);

  /// Most children running at once (the parallelism is clamped to it).
  static constexpr int kMaxParallel = 256;

 private:
  int max_;
  std::vector<Job> jobs_;
  std::function<void()> cleanup_;
};

/// Whether process `pid` exists (kill(pid, 0)); used to tell scratch directories of a live
/// process from leftovers of a killed one.
bool process_alive(int pid);

}  // namespace probelab::sim
