// The scenario loader: YAML text -> Scenario (parse_scenario), as `probelab run` reads a file.
// The scenario's model reference resolves against the repository's bundled models.
#include "fuzz/fuzz_util.h"
#include "sim/scenario/bad_input.h"
#include "sim/scenario/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace probelab;
  sim::LoadOptions opts;
  opts.source_root = PROBELAB_SOURCE_DIR;
  try {
    sim::parse_scenario(fuzz::text(data, size), fuzz::scratch_dir() / "scenario.yaml", opts);
  } catch (const std::exception& e) {
    if (!sim::is_bad_input(e)) fuzz::unclassified(e);
  }
  return 0;
}
