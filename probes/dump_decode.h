// `probelab dump decode`: turns a run's dumps into files numpy reads as they are. Which files need
// it (see dump.json): an entry with "compression": "zstd" (file name ending .npy.zst; numpy cannot
// open it) and an entry with "encoding": "xor_delta" (a valid .npy whose elements are the XOR of
// the bit patterns against the previous capture named in "delta_base": numpy reads it without
// complaint and returns wrong numbers). Entries with compression "none" and encoding "raw" are
// plain .npy already.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::probes {

struct DecodeSummary {
  std::uint64_t manifests = 0, files = 0;
  std::uint64_t decompressed = 0;  // were zstd
  std::uint64_t undeltaed = 0;     // were xor_delta
  std::vector<std::filesystem::path> out_dirs;  // one per manifest
  nlohmann::json to_json() const;
};

/// Decodes every dump.json manifest found under `dir` (recursively; `dir` may be a run's output
/// directory, a dump directory or a rank's): each entry's file is read back (checksums verified,
/// decompressed, delta undone) and written as a plain .npy under `out` (default: <manifest
/// dir>/decoded; with `out`, <out>/<manifest dir relative to dir>), the same relative names
/// without ".zst", with a dump.json whose entries say compression none and encoding raw (so the
/// decoded dumps compare like the originals). Throws ConfigError naming the manifest and entry
/// for a missing directory, no manifest, a manifest that is not probelab's, or a corrupt file,
/// and DumpError (check_manifest) for a manifest that was edited (manifest_crc32 mismatch, a
/// field of the wrong type); every manifest and output directory is checked before anything is
/// written, and a file that cannot be decoded removes what the call wrote before it.
DecodeSummary decode_dumps(const std::filesystem::path& dir, const std::optional<std::filesystem::path>& out = {});

}  // namespace probelab::probes
