// `probelab perf RUN`: where a run's time went, from its report.json `perf` section: the top
// ops by time with their bound (compute, memory, communication, launch, capture) and the
// evidence, each step's critical path, utilization per rank and per link, and what-if estimates
// (HBM and link bandwidth x2, the top ops at full Cube rate: sim/run/perf_what_if.h; `what_if` in
// --json). Exit 0, or 2 when RUN is not a run directory with performance counters or --rank
// names no rank of it.
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "sim/cli/commands.h"
#include "sim/run/perf_summary.h"
#include "sim/run/perf_what_if.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::cli {

Command add_perf(CLI::App& app) {
  struct Args {
    std::string run;
    sim::PerfTextOptions opt;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("perf", "Where a run's time went: top ops by time with their bound and evidence, "
                                         "steps' critical paths, utilization per rank and per link");
  sub->add_option("RUN", a->run, "A run's output directory (probelab run --out DIR/<scenario>)")->required();
  sub->add_option("--top", a->opt.top, "Ops listed per rank (default 10)");
  sub->add_option("--rank", a->opt.rank, "Only this rank (default: every rank)")
      ->check(non_negative_integer());
  sub->add_flag("--json", a->json, "Print the report's perf section as JSON");
  return [a] {
    const nlohmann::json r = sim::read_perf_report(a->run);
    const std::size_t ranks = r.at("perf").contains("ranks") ? r["perf"]["ranks"].size() : 0;
    if (a->opt.rank >= 0 && static_cast<std::size_t>(a->opt.rank) >= ranks)
      throw sim::ScenarioError((std::filesystem::path(a->run) / "report.json").string(), 0, 0, "--rank",
                               fmt::format("a rank of this run, 0 to {} ({} rank(s))", ranks == 0 ? 0 : ranks - 1, ranks),
                               std::to_string(a->opt.rank));
    const nlohmann::json what_if = sim::perf_what_if(r);
    if (a->json) {
      nlohmann::json perf = r.at("perf");
      perf["what_if"] = what_if;
      fmt::print("{}\n", perf.dump(2));
    } else {
      fmt::print("{}{}", sim::perf_text(r, a->opt), sim::perf_what_if_text(what_if));
    }
    return 0;
  };
}

}  // namespace probelab::cli
