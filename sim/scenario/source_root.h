// Locating the repository root (the directory holding scenarios/): bundled models and the
// bundled scenario suite are found relative to it.
#pragma once

#include <filesystem>

namespace probelab::sim {

/// Order: $PROBELAB_SOURCE_DIR; the directory above the running executable (build/probelab ->
/// ..) and the executable's own directory, up to the file system's root; the source tree the
/// executable was configured from (a build directory outside the tree: cmake -B /elsewhere); the
/// current directory and its parents. The first directory containing scenarios/ wins; when none
/// does, the current directory is returned.
std::filesystem::path find_source_root();

/// The search of find_source_root() over given places (it passes $PROBELAB_SOURCE_DIR,
/// /proc/self/exe, the configured source directory and the current directory); an empty place is
/// skipped. Returns `cwd` (or "." when it is empty) when no place holds scenarios/.
std::filesystem::path resolve_source_root(const std::filesystem::path& env, const std::filesystem::path& exe,
                                          const std::filesystem::path& built_from,
                                          const std::filesystem::path& cwd);

}  // namespace probelab::sim
