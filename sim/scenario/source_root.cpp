#include "sim/scenario/source_root.h"

#include <cstdlib>
#include <optional>
#include <system_error>

namespace probelab::sim {

namespace fs = std::filesystem;

namespace {

bool has_scenarios(const fs::path& p) {
  std::error_code ec;
  return !p.empty() && fs::is_directory(p / "scenarios", ec);
}

/// `start` or its nearest ancestor holding scenarios/.
std::optional<fs::path> upwards(const fs::path& start) {
  for (fs::path p = start; !p.empty(); p = p.parent_path()) {
    if (has_scenarios(p)) return p;
    if (p == p.parent_path()) break;
  }
  return std::nullopt;
}

}  // namespace

fs::path resolve_source_root(const fs::path& env, const fs::path& exe, const fs::path& built_from,
                             const fs::path& cwd) {
  if (has_scenarios(env)) return env;
  if (!exe.empty())
    if (auto p = upwards(exe.parent_path())) return *p;
  if (has_scenarios(built_from)) return built_from;
  if (auto p = upwards(cwd)) return *p;
  return cwd.empty() ? fs::path(".") : cwd;
}

fs::path find_source_root() {
  const char* env = std::getenv("PROBELAB_SOURCE_DIR");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::error_code ec_cwd;
  const fs::path cwd = fs::current_path(ec_cwd);
#ifdef PROBELAB_CONFIGURED_SOURCE_DIR
  const fs::path built_from = PROBELAB_CONFIGURED_SOURCE_DIR;
#else
  const fs::path built_from;
#endif
  return resolve_source_root(env ? fs::path(env) : fs::path(), ec ? fs::path() : exe, built_from,
                             ec_cwd ? fs::path() : cwd);
}

}  // namespace probelab::sim
