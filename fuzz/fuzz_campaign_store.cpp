// The campaign store: trials.jsonl bytes -> finished trials (load_trials, as --resume reads it),
// then the summary statistics over them.
#include <algorithm>

#include "fuzz/fuzz_util.h"
#include "sim/campaign/campaign_stats.h"
#include "sim/campaign/campaign_store.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace probelab;
  const auto path = fuzz::scratch_dir() / "trials.jsonl";
  fuzz::write_file(path, fuzz::text(data, size));
  const sim::LoadedTrials t = sim::load_trials(path);  // must not throw on content
  (void)t.warnings(path.string());
  sim::CampaignInfo info;
  info.scenario = "fuzz";
  for (const auto& r : t.records) info.trials = std::max<std::uint64_t>(info.trials, std::min<std::uint64_t>(r.index, 1u << 20) + 1);
  (void)sim::campaign_summary(info, t.records).dump();
  return 0;
}
