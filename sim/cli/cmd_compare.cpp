// `probelab compare RUN_A RUN_B`: the first op whose captured values differ between two runs.
// Exit 0 when every matched capture is equal, 1 when they diverge, 2 on bad input.
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "sim/cli/commands.h"
#include "sim/run/run_compare.h"

namespace probelab::cli {

Command add_compare(CLI::App& app) {
  struct Args {
    std::string a, b;
    bool json = false;
    std::size_t max = 20;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("compare", "Compare two runs' dumps op by op and report the first divergent op");
  sub->add_option("RUN_A", a->a, "Output directory of the first run (or a directory of dump.json manifests)")->required();
  sub->add_option("RUN_B", a->b, "Output directory of the second run")->required();
  sub->add_flag("--json", a->json, "Print the comparison as JSON");
  sub->add_option("--max", a->max, "Divergent captures to list (default 20)");
  return [a] {
    const sim::RunComparison c = sim::compare_runs(a->a, a->b);
    if (a->json) {
      fmt::print("{}\n", c.to_json().dump(2));
    } else {
      fmt::print("{} captures matched, {} equal, {} differ; {} only in A, {} only in B\n", c.matched, c.equal,
                 c.diffs.size(), c.only_a.size(), c.only_b.size());
      for (std::size_t i = 0; i < c.diffs.size() && i < a->max; ++i) {
        const auto& d = c.diffs[i];
        fmt::print("  step {} rank {} {} {} ({}): {}{}\n", d.step, d.rank, d.op, d.edge, d.basis,
                   std::isnan(d.max_abs_diff) ? std::string("bits differ") : fmt::format("max |diff| {:.6g}", d.max_abs_diff),
                   d.note.empty() ? "" : "; " + d.note);
      }
      if (auto f = c.first())
        fmt::print("first divergent op: {} (step {}, rank {}, {} {})\n", f->op, f->step, f->rank, f->edge, f->tensor);
      else
        fmt::print("no divergence in the matched captures\n");
    }
    return c.diffs.empty() ? 0 : 1;
  };
}

}  // namespace probelab::cli
