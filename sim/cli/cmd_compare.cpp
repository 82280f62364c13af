// `probelab compare RUN_A RUN_B`: msprobe's compare table per tensor (sim/run/compare_table.h),
// printed and written as CSV and JSON, and — between two probelab runs — the first op whose
// captured values differ. Exit 0 when every matched tensor reaches the accuracy criteria, 1 when
// one does not (the runs differ), 2 on bad input: a missing directory, no manifest, a foreign
// manifest, or any damaged manifest or dump file (each is reported, naming its run and file).
// With --perf: latency-regression localization from the two runs' report.json `perf` sections
// (sim/run/perf_compare.h): exit 0 when B is not slower than A by more than --threshold percent,
// 1 when it is (the runs differ), 2 when a run has no report.json or no perf section.
#include <cmath>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "probes/dump_writer.h"
#include "sim/cli/commands.h"
#include "sim/run/compare_table.h"
#include "sim/run/perf_compare.h"
#include "sim/run/perf_summary.h"
#include "sim/run/run_compare.h"
#include "sim/run/runner.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::cli {

namespace {

std::string short_cell(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : std::string("N/A"); }

}  // namespace

Command add_compare(CLI::App& app) {
  struct Args {
    std::string a, b;
    bool json = false;
    std::size_t max = 20;
    std::string output = "compare_result";
    sim::TableOptions table;
    bool perf = false;
    double threshold = 1.0;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "compare", "Compare two dumps tensor by tensor (msprobe's compare table: Cosine, EucDist, MaxAbsErr, "
                 "MaxRelativeErr, error ratios, Accuracy Reached or Not) and report the first divergent op");
  sub->add_option("RUN_A", a->a, "NPU side: a run's output directory, a dump directory, or an msprobe dump_path")
      ->required();
  sub->add_option("RUN_B", a->b, "Bench side, the same kinds")->required();
  sub->add_flag("--json", a->json, "Print the table and the comparison as JSON");
  sub->add_option("--max", a->max, "Rows and divergent captures to print (default 20; the files have all)");
  sub->add_option("--output", a->output, "Directory for compare_result.csv and compare_result.json (default "
                                         "./compare_result)");
  sub->add_flag("--perf", a->perf, "Compare the runs' timing instead (report.json perf): which ops and collectives got "
                                   "slower in B, by how much, and why");
  sub->add_option("--threshold", a->threshold, "With --perf: B is a regression when its total cycles exceed A's by more "
                                               "than this percentage (default 1)")
      ->check(number_in(0, INFINITY, "a percentage >= 0"));
  // Thresholds: NaN or a value outside the range would silently pass or fail every tensor.
  const auto cosine = number_in(-1, 1, "a cosine from -1 to 1");
  const auto bound = number_in(0, INFINITY, "a number >= 0 (inf: no bound)");
  auto& c = a->table.criteria;
  sub->add_option("--cosine", c.cosine_min, "Not reached when Cosine < this and MaxAbsErr > --max-abs-err (0.99)")
      ->check(cosine);
  sub->add_option("--max-abs-err", c.max_abs_err, "See --cosine (0.001)")->check(bound);
  sub->add_option("--cosine-hard", c.cosine_hard_min, "Not reached when Cosine < this (0.9)")->check(cosine);
  sub->add_option("--max-abs-err-hard", c.max_abs_err_hard, "Not reached when MaxAbsErr > this (1.0)")->check(bound);
  sub->add_option("--stats-rtol", a->table.stats_rtol,
                  "Statistics-only rows: Warning when Max/Min/Mean/Norm differ by more than this, relatively (0.5)")
      ->check(bound);
  return [a] {
    if (a->perf) {
      const nlohmann::json c = sim::compare_perf(sim::read_perf_report(a->a), sim::read_perf_report(a->b), a->threshold);
      if (a->json)
        fmt::print("{}\n", c.dump(2));
      else
        fmt::print("{}", sim::compare_perf_text(c, a->max));
      return c.at("regression").get<bool>() ? 1 : 0;
    }
    sim::check_output_dir(a->output, "output directory", false, "--output");  // before any work
    // Damaged input: every damaged file is named, and no table is written (it would be incomplete).
    auto report_damage = [&](const sim::RunComparison& c) {
      for (const auto& d : c.damaged)
        fmt::print(stderr, "probelab: error: {} ({}): {}\n", d.run == "run A" ? a->a : d.run == "run B" ? a->b : d.run,
                   d.file, d.problem);
      fmt::print(stderr, "probelab: error: {} damaged dump file(s) or manifest(s); no comparison written\n",
                 c.damaged.size());
      return 2;
    };
    std::optional<sim::CompareTable> table;
    try {
      table = sim::build_compare_table(a->a, a->b, a->table);
    } catch (const sim::ScenarioError& e) {
      // The table stops at the first damaged file; between probelab runs, name them all.
      const bool damaged_file = e.expected().starts_with("a JSON dump manifest") || e.expected() == "a readable dump file";
      if (!damaged_file) throw;
      std::optional<sim::RunComparison> c;
      try {
        c = sim::compare_runs(a->a, a->b);
      } catch (const std::exception&) {
      }
      if (c && !c->damaged.empty()) return report_damage(*c);
      throw;
    }
    const sim::CompareTable& t = *table;
    std::optional<sim::RunComparison> c;
    if (!t.npu_msprobe && !t.bench_msprobe) c = sim::compare_runs(a->a, a->b);
    if (c && !c->damaged.empty()) return report_damage(*c);
    sim::check_output_dir(a->output, "output directory", true, "--output");
    const std::string csv = t.to_csv(), js = t.to_json().dump(1);
    probes::write_file_atomic(std::filesystem::path(a->output) / "compare_result.csv", std::as_bytes(std::span(csv.data(), csv.size())));
    probes::write_file_atomic(std::filesystem::path(a->output) / "compare_result.json", std::as_bytes(std::span(js.data(), js.size())));
    if (a->json) {
      nlohmann::json j = {{"table", t.to_json()}};
      if (c) j["comparison"] = c->to_json();
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print("{:<44} {:>9} {:>10} {:>10} {:>10} {:>7} {:>7}  {}\n", "NPU Name", "Cosine", "EucDist", "MaxAbsErr",
                 "MaxRelErr", "1/1000", "5/1000", "Accuracy Reached or Not");
      std::size_t shown = 0;
      for (const auto& r : t.rows) {
        if (shown++ >= a->max) break;
        fmt::print("{:<44} {:>9} {:>10} {:>10} {:>10} {:>7} {:>7}  {}{}\n",
                   fmt::format("s{} r{} {}", r.step, r.rank, r.npu_name), short_cell(r.cosine), short_cell(r.euc_dist),
                   short_cell(r.max_abs_err), short_cell(r.max_rel_err), short_cell(r.one_thousandth),
                   short_cell(r.five_thousandths), r.result, r.result == "Yes" || r.message.empty() ? "" : "  " + r.message);
      }
      if (t.rows.size() > a->max) fmt::print("  ... {} more rows\n", t.rows.size() - a->max);
      fmt::print("{} tensors compared: {} reached, {} not; {} only in A, {} only in B; table in {}/compare_result.csv\n",
                 t.rows.size(), t.reached(), t.not_reached(), t.only_a, t.only_b, a->output);
      if (c) {
        if (auto f = c->first())
          fmt::print("first divergent op: {} (step {}, rank {}, {} {})\n", f->op, f->step, f->rank, f->edge, f->tensor);
        else
          fmt::print("no divergence in the matched captures\n");
      }
    }
    return t.not_reached() == 0 ? 0 : 1;
  };
}

}  // namespace probelab::cli
