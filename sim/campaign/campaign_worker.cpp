#include "sim/campaign/campaign_worker.h"

#include <csignal>
#include <cstdlib>

#include <fcntl.h>
#include <unistd.h>

namespace probelab::sim {

namespace fs = std::filesystem;

void enter_worker(const fs::path& log, unsigned timeout_s) {
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  fs::create_directories(log.parent_path());
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
  }
  if (timeout_s) ::alarm(timeout_s);
}

std::string status_of(const ChildStatus& st) {
  if (st.signal == SIGALRM) return "hang";
  return "crash";
}

}  // namespace probelab::sim
