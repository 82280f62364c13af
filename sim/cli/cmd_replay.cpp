// `probelab replay RUN --from-step K [--set key=value ...]`: resume a saved run at step K from its
// checkpoint with the same or other settings and compare with the original (sim/run/replay.h).
// Exit 0 when steps K.. are bit-identical to the original, 1 when they differ, 2 on bad input.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/cli/commands.h"
#include "sim/run/replay.h"

namespace probelab::cli {

Command add_replay(CLI::App& app) {
  struct Args {
    std::string run, out;
    std::uint32_t from_step = 0;
    std::vector<std::string> sets;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("replay", "Resume a saved run at a checkpointed step, with other probes or settings, "
                                           "and compare it with the original bit for bit");
  sub->add_option("RUN", a->run, "Output directory of a run whose scenario sets checkpoints: {every: N}")->required();
  sub->add_option("--from-step", a->from_step, "Step to resume at (a step with a checkpoint)")->required();
  sub->add_option("--set", a->sets, "Override a scenario key for the replay (key=value), repeatable");
  sub->add_option("--out", a->out, "Output root of the replay (default RUN/replay.step<K>)");
  sub->add_flag("--json", a->json, "Print replay.json");
  return [a] {
    sim::ReplayOptions o;
    o.from_step = a->from_step;
    o.out_root = a->out;
    for (const auto& s : a->sets) o.sets.push_back(sim::parse_set(s));
    const sim::ReplayResult r = sim::replay_run(a->run, o, progress_to_stderr);
    const auto& j = r.report;
    if (a->json) {
      fmt::print("{}\n", j.dump(2));
    } else {
      const auto& c = j["compared"];
      fmt::print("replayed steps {}..{} of {} from the step-{} checkpoint into {}\n", a->from_step,
                 j["steps"].get<int>() - 1, a->run, a->from_step, r.out_dir.string());
      fmt::print("compared {} losses, {} outputs, {} tensors of later checkpoints: {}\n", c["losses"].get<std::size_t>(),
                 c["outputs"].get<std::size_t>(), c["checkpoint_tensors"].get<std::size_t>(),
                 r.identical ? "bit-identical" : fmt::format("{} differ", j["differences"].size()));
      for (std::size_t i = 0; i < j["differences"].size() && i < 10; ++i) fmt::print("  {}\n", j["differences"][i].dump());
    }
    return r.identical ? 0 : 1;
  };
}

}  // namespace probelab::cli
