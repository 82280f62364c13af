// `probelab campaign SCENARIO --trials N [--jobs J] [--seed S] [--out DIR] [--resume]`: a
// fault-injection campaign scoring the probe runtime (sim/campaign/campaign_runner.h). Under
// `mpirun -np K` the trials are split over the ranks and rank 0 writes the results.
// Exit 0 when the campaign completed, 1 when it did not, 2 on bad input (nothing is run then), 3 on an
// internal error.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "sim/scenario/bad_input.h"
#include "sim/campaign/campaign_runner.h"
#include "sim/campaign/campaign_stats.h"
#include "sim/cli/commands.h"
#include "sim/scenario/source_root.h"

namespace probelab::cli {

namespace {

struct CampaignArgs {
  std::string scenario;
  std::optional<std::uint64_t> trials, seed;
  int jobs = 1;
  std::string out;
  bool resume = false;
  std::vector<std::string> sets, faults;
  bool json = false;
};

std::string duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const auto t = static_cast<long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

// The progress line: wall-clock rate and ETA are for display only.
class ProgressLine {
 public:
  ProgressLine() : tty_(::isatty(2)), t0_(std::chrono::steady_clock::now()) {}
  void operator()(const sim::CampaignProgress& p) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const std::uint64_t fresh = p.done - p.resumed;
    const double rate = el > 0 ? static_cast<double>(fresh) / el : 0.0;
    const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : -1;
    const int width = 24;
    const auto filled = p.total ? static_cast<int>(width * p.done / p.total) : width;
    const std::string bar = std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(width - filled), '.');
    const std::string line = fmt::format("[{}] {}/{} trials  {:.1f}/min  ETA {}  {}", bar, p.done, p.total, rate * 60,
                                         duration(eta), p.last);
    if (tty_) {
      fmt::print(stderr, "\r\033[K{}", line);
    } else if (p.done == p.total || p.done >= next_) {
      fmt::print(stderr, "{}\n", line);
      next_ = p.done + std::max<std::uint64_t>(1, p.total / 20);
    }
    std::fflush(stderr);
  }
  void end() const {
    if (tty_) fmt::print(stderr, "\n");
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point t0_;
  std::uint64_t next_ = 0;
};

int campaign(const CampaignArgs& a) {
  std::unique_ptr<sim::CampaignComm> comm = sim::make_campaign_comm();
  const bool root = comm->rank() == 0;
  try {
    sim::CampaignOptions o;
    o.scenario = a.scenario;
    o.load.source_root = sim::find_source_root();
    for (const auto& s : a.sets) o.load.sets.push_back(sim::parse_set(s));
    o.faults = a.faults;
    o.trials = a.trials;
    o.seed = a.seed;
    o.jobs = a.jobs;
    o.out = a.out;
    o.resume = a.resume;
    sim::Campaign c(o);
    c.prepare();
    if (root)
      fmt::print(stderr, "campaign {}: {} trials, seed {}, {} job(s){} -> {}\n", c.name(), c.trials(), c.seed(), a.jobs,
                 comm->size() > 1 ? fmt::format(" on each of {} MPI ranks", comm->size()) : "", c.out_dir().string());
    ProgressLine line;
    const nlohmann::json summary = c.run(*comm, [&line](const sim::CampaignProgress& p) { line(p); });
    if (!root) return 0;
    line.end();
    if (a.json)
      fmt::print("{}\n", summary.dump(2));
    else
      fmt::print("{}\nresults in {} (summary.html: the same as a page)\n", sim::campaign_summary_text(summary),
                 c.out_dir().string());
    std::fflush(stdout);
    return summary.value("complete", false) ? 0 : 1;
  } catch (const std::exception& e) {
    if (comm->size() <= 1) throw;
    // One failing rank ends the job (the others would wait for it forever).
    const int code = sim::is_bad_input(e) ? 2 : 3;
    fmt::print(stderr, "probelab: rank {}: {}: {}\n", comm->rank(), code == 2 ? "error" : "internal error", e.what());
    std::fflush(stderr);
    comm->abort(code);
  }
  return 1;  // not reached: abort() ends the job
}

}  // namespace

Command add_campaign(CLI::App& app) {
  auto a = std::make_shared<CampaignArgs>();
  auto* sub = app.add_subcommand(
      "campaign",
      "Run a fault-injection campaign on a scenario and score the probe runtime (coverage, localization, SDC, "
      "latency, false positives, 95% Wilson intervals); under mpirun the trials are split across ranks");
  sub->add_option("SCENARIO", a->scenario, "Scenario file with a `campaign:` fault model (or use --fault)")->required();
  sub->add_option("--trials,-n", a->trials, "Number of trials (default: campaign.trials; 0: only the clean runs)")
      ->check(CLI::Range(0, 100000000));
  sub->add_option("--jobs,-j", a->jobs, "Worker processes at a time (per MPI rank)")->check(CLI::Range(1, 256));
  sub->add_option("--seed", a->seed, "Campaign seed: the trial list derives from it alone (default: campaign.seed, "
                                     "else the scenario seed)")
      ->check(non_negative_integer());
  sub->add_option("--out", a->out, "Output directory (default out/campaign/<scenario name>)");
  sub->add_flag("--resume", a->resume, "Continue an interrupted campaign in --out: finished trials are kept, the "
                                       "others run");
  sub->add_option("--fault", a->faults, "A fault entry as YAML, e.g. '{kind: nan, ops: [\"attn/*\"]}'; replaces the "
                                        "scenario's fault list; repeatable");
  sub->add_option("--set", a->sets, "Override a scenario key (e.g. campaign.sampling=per_op); repeatable");
  sub->add_flag("--json", a->json, "Print summary.json instead of the text summary");
  return [a] { return campaign(*a); };
}

}  // namespace probelab::cli
