#include "sim/scenario/source_root.h"

#include <cstdlib>
#include <system_error>

namespace probelab::sim {

namespace fs = std::filesystem;

namespace {

bool has_scenarios(const fs::path& p) {
  std::error_code ec;
  return !p.empty() && fs::is_directory(p / "scenarios", ec);
}

}  // namespace

fs::path find_source_root() {
  if (const char* env = std::getenv("PROBELAB_SOURCE_DIR"); env && *env && has_scenarios(env)) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty(); p = p.parent_path()) {
      if (has_scenarios(p)) return p;
      if (p == p.parent_path()) break;
    }
  }
  fs::path cwd = fs::current_path(ec);
  if (!ec) {
    for (fs::path p = cwd; !p.empty(); p = p.parent_path()) {
      if (has_scenarios(p)) return p;
      if (p == p.parent_path()) break;
    }
  }
  return ec ? fs::path(".") : cwd;
}

}  // namespace probelab::sim
