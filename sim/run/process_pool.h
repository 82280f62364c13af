// Runs jobs in forked child processes (SystemC elaborates one design per process, so every
// simulation gets its own process), at most `max_parallel` at a time, started in submission
// order. The parent must be single-threaded and must not have elaborated SystemC itself.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace probelab::sim {

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
  /// Starts every queued job and waits for all of them; `on_done` is called in the parent as
  /// each child ends (completion order). Throws std::system_error when fork fails.
  void run(const Done& on_done);

 private:
  int max_;
  std::vector<Job> jobs_;
};

}  // namespace probelab::sim
