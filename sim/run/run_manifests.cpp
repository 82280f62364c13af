#include "sim/run/run_manifests.h"

#include <algorithm>

#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

namespace fs = std::filesystem;

namespace {

// Depth-first; `in_run`: an ancestor (or the root) is a run directory.
void walk(const fs::path& dir, bool in_run, int depth, std::vector<fs::path>& out, std::error_code& ec) {
  std::vector<fs::path> subdirs;
  std::error_code ignored;  // a file that cannot be inspected counts as absent
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    if (ec) return;
    if (fs::is_directory(st)) subdirs.push_back(it->path());
    else if (it->path().filename() == "dump.json" && it->is_regular_file(ignored)) out.push_back(it->path());
  }
  if (ec) return;
  const bool has_manifest = fs::exists(dir / "dump.json", ignored);
  for (const fs::path& sub : subdirs) {
    const std::string name = sub.filename().string();
    if (depth == 0 && name == "variants") continue;
    if (name == "decoded" && has_manifest) continue;
    const bool run = fs::is_regular_file(sub / "report.json", ignored);
    if (run && in_run) continue;
    walk(sub, in_run || run, depth + 1, out, ec);
    if (ec) return;
  }
}

}  // namespace

std::vector<fs::path> run_manifests(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw ScenarioError(root.string(), 0, 0, "", "a run output directory or a dump directory", "not a directory");
  std::vector<fs::path> files;
  std::error_code ignored;
  walk(root, fs::is_regular_file(root / "report.json", ignored), 0, files, ec);
  if (ec) throw ScenarioError(root.string(), 0, 0, "", "a readable run output directory", ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace probelab::sim
