// `probelab dump decode DIR [--out OUT] [--json]`: plain .npy files from a run's zstd and
// XOR-delta dumps (probes/dump_decode.h). Exit 0 when every file decoded, 2 on bad input (no
// manifest, a foreign manifest, a corrupt file).
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "probes/dump_decode.h"
#include "sim/cli/commands.h"
#include "sim/run/runner.h"

namespace probelab::cli {

Command add_dump(CLI::App& app) {
  struct Args {
    std::string dir, out;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* dump = app.add_subcommand("dump", "Work with a run's dumps (dump.json manifests and .npy files)");
  dump->require_subcommand(1);
  auto* dec = dump->add_subcommand(
      "decode", "Write plain .npy files (numpy reads them as they are) for zstd-compressed (.npy.zst) and "
                "XOR-delta encoded dumps, with a dump.json of raw entries");
  dec->add_option("DIR", a->dir, "A run's output directory, a dump directory or a rank's (searched for dump.json)")
      ->required();
  dec->add_option("--out", a->out, "Write under OUT (mirroring DIR) instead of <each dump dir>/decoded");
  dec->add_flag("--json", a->json, "Print the result as JSON");
  return [a] {
    if (!a->out.empty()) sim::check_output_dir(a->out, "output directory", false);  // nothing made yet
    const auto s = probes::decode_dumps(a->dir, a->out.empty() ? std::nullopt : std::optional<std::filesystem::path>(a->out));
    if (a->json) {
      fmt::print("{}\n", s.to_json().dump(2));
    } else {
      fmt::print("decoded {} file(s) of {} manifest(s): {} were zstd, {} were XOR deltas\n", s.files, s.manifests,
                 s.decompressed, s.undeltaed);
      for (const auto& d : s.out_dirs) fmt::print("  {}\n", d.string());
    }
    return 0;
  };
}

}  // namespace probelab::cli
