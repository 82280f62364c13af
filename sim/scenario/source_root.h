// Locating the repository root (the directory holding scenarios/): bundled models and the
// bundled scenario suite are found relative to it.
#pragma once

#include <filesystem>

namespace probelab::sim {

/// Order: $PROBELAB_SOURCE_DIR; the directory above the running executable (build/probelab ->
/// ..) and the executable's own directory; the current directory and its parents. The first
/// directory containing scenarios/ wins; when none does, the current directory is returned.
std::filesystem::path find_source_root();

}  // namespace probelab::sim
