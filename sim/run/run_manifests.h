// The dump.json manifests `compare` reads from a directory: a run's own dumps, not those of what
// was later written inside the run directory.
//
// A run directory holds report.json. Below it, a directory that holds its own report.json is
// another run (`replay`'s replay.step<K>/, `query`'s query/, a rewind's stage) and is not read;
// neither is `variants/` directly under the root, nor a `decoded/` directory beside a dump.json
// (`dump decode`'s default output, the same captures again). A root that is not a run directory
// (a dump directory, a directory of runs, an msprobe dump_path) is searched the same way: each
// run found in it contributes its own dumps. Symbolic links to directories are not followed.
#pragma once

#include <filesystem>
#include <vector>

namespace probelab::sim {

/// Sorted paths of the dump.json files under `root` as described above; throws ScenarioError
/// when `root` is not a directory or cannot be read.
std::vector<std::filesystem::path> run_manifests(const std::filesystem::path& root);

}  // namespace probelab::sim
