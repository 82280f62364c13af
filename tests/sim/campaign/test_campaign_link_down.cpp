// Campaigns of dead links (link_down): trials draw a link its sender has at a cycle over the whole
// run, a trial is scored on the job's hang report, and — checked against the fault-free run's
// trace, not against the hang report — the job hangs exactly when the dead link would have carried
// a message after it died, and the report then names that link first.
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sim/campaign/campaign_outcome.h"
#include "sim/campaign/campaign_trials.h"
#include "sim/scenario/prepared_run.h"
#include "tests/sim/campaign/campaign_fixture.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

// Eight ranks in two servers of four, hierarchical all-reduce: HCCS rings inside the servers (a
// chip sends to one of its three mesh neighbours only), every NIC between them.
const char* kScenario = R"(name: linkcamp
model: mlp_loss_scaled
mode: training
ranks: 8
steps: 2
seed: 8
cluster: {chips_per_server: 4, exec_timeout_ms: 5}
training:
  loss: model
  optimizer: {type: sgd, lr: 5.0e-5}
  allreduce: {algorithm: hierarchical, inter_algorithm: ring, accumulation: fp32}
campaign:
  trials: 24
  seed: 11
  golden_runs: 1
  faults:
    - kind: link_down
      choose: {both_directions: [false, true]}
)";

PreparedRun prepare(const TempDir& dir, const std::string& text) {
  LoadOptions o;
  o.source_root = test::source_root();
  return prepare_run(load_scenario(dir.write("camp.yaml", text), o));
}

std::vector<TrialSpec> trials_of(const PreparedRun& run, std::uint64_t n, std::uint64_t span) {
  TrialSpace s;
  s.executed = &run.workload.snapshots.fused;
  s.steps = 2;
  s.ranks = 8;
  s.cycle_span = span;
  s.first_link = trial_first_link(run);
  return TrialGenerator(*run.scenario.campaign, s).trials(11, n);
}

// The link src sends on towards dst (servers of `per_server` chips), as trials and hang reports
// name it.
std::string link_of(std::uint32_t src, std::uint32_t dst, std::uint32_t per_server = 4) {
  return src / per_server == dst / per_server ? fmt::format("link r{} hccs->r{}", src, dst)
                                              : fmt::format("link r{} nic.tx", src);
}

TEST(CampaignLinkDown, TrialsDrawALinkTheSenderHasAtACycleOfTheRun) {
  TempDir dir;
  const PreparedRun run = prepare(dir, kScenario);
  std::set<std::string> links;
  std::size_t both = 0;
  for (const TrialSpec& t : trials_of(run, 200, 1000)) {
    const json d = t.descriptor_json();
    const auto src = d["src"].get<std::uint32_t>(), dst = d["dst"].get<std::uint32_t>();
    ASSERT_NE(src, dst);
    ASSERT_LT(dst, 8u);
    EXPECT_LT(d["cycle"].get<std::uint64_t>(), 1000u) << d.dump();
    EXPECT_TRUE(t.hang_scored);
    EXPECT_FALSE(t.perf);
    EXPECT_EQ(t.truth_cause, "link_down");
    EXPECT_EQ(t.rank, src);
    std::set<std::string> truth = {link_of(src, dst)};
    if (d["both_directions"].get<bool>()) {
      truth.insert(link_of(dst, src));
      ++both;
    }
    EXPECT_EQ(std::set<std::string>(t.truth_ops.begin(), t.truth_ops.end()), truth) << d.dump();
    links.insert(link_of(src, dst));
  }
  // 12 HCCS links per server and 8 NICs: 32 distinct first links; 200 draws reach most of them.
  EXPECT_GE(links.size(), 28u);
  EXPECT_GT(both, 60u);
  EXPECT_LT(both, 140u);
  // `set` fixes what the trial would draw.
  const PreparedRun fixed = prepare(dir, std::string(kScenario) + "      set: {cycle: 7}\n");
  for (const TrialSpec& t : trials_of(fixed, 20, 1000)) EXPECT_EQ(t.descriptor_json()["cycle"], 7);
}

TEST(CampaignLinkDown, OneChipHasNoLinkToDraw) {
  TempDir dir;
  const PreparedRun run = prepare(dir, kScenario);
  TrialSpace s;
  s.executed = &run.workload.snapshots.fused;
  s.ranks = 1;
  try {
    TrialGenerator g(*run.scenario.campaign, s);
    FAIL() << "a dead link drawn on one chip";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("campaign.faults[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ranks with a link to another chip (the scenario has 1 rank(s))"), std::string::npos)
        << e.what();
  }
}

TEST(CampaignLinkDown, AJobHangIsScoredOnTheLinksItLost) {
  TrialSpec spec;
  spec.kind = "link_down";
  spec.hang_scored = true;
  spec.truth_ops = {"link r5 nic.tx"};
  spec.truth_cause = "link_down";
  json sim = {{"status", "hang"},
              {"error", "job hang: ..."},
              {"injections", json::array({{{"fired", true}, {"proof", json::array({{{"cycle", 1000}}})}}})},
              {"hang",
               {{"cycle", 90000},
                {"lost", json::array({{{"link", "r5 nic.tx"}, {"src", 5}, {"dst", 1}},
                                      {{"link", "r5 nic.tx"}, {"src", 5}, {"dst", 1}},
                                      {{"link", "r1 nic.tx"}, {"src", 1}, {"dst", 5}}})}}}};
  TrialRecord r = make_record(spec, observe(sim, OutputCheck{}));
  EXPECT_EQ(r.outcome, Outcome::Top1);
  EXPECT_EQ(r.cause_correct, true);
  EXPECT_EQ(r.latency_cycles, 89000u);
  EXPECT_EQ(r.obs.suspects, (std::vector<std::vector<std::string>>{{"link r5 nic.tx"}, {"link r1 nic.tx"}}));
  // The record's observation reads back the same.
  EXPECT_EQ(TrialRecord::from_json(r.to_json()).to_json(), r.to_json());
  // Lost second, or not at all: top-3, mislocalized.
  spec.truth_ops = {"link r1 nic.tx"};
  EXPECT_EQ(make_record(spec, observe(sim, OutputCheck{})).outcome, Outcome::Top3);
  spec.truth_ops = {"link r2 nic.tx"};
  EXPECT_EQ(make_record(spec, observe(sim, OutputCheck{})).outcome, Outcome::Mislocalized);
  // The observation a worker stores keeps the hang for the scoring in the parent.
  const TrialObservation back = TrialObservation::from_json(observe(sim, OutputCheck{}).to_json());
  EXPECT_TRUE(back.job_hang);
  EXPECT_EQ(back.hang_links, (std::vector<std::string>{"link r5 nic.tx", "link r1 nic.tx"}));
  EXPECT_EQ(back.hang_cycle, 90000u);
  // Any other trial whose job hangs is a hang, as before; a worker killed by its timeout too.
  TrialSpec nan;
  nan.kind = "nan";
  nan.truth_ops = {"fc1"};
  EXPECT_EQ(make_record(nan, observe(sim, OutputCheck{})).outcome, Outcome::Hang);
  TrialObservation killed;
  killed.status = "hang";
  EXPECT_EQ(make_record(spec, killed).outcome, Outcome::Hang);
  // A dead link that lost nothing: the job finished, nothing flagged, outputs untouched.
  sim = {{"status", "ok"}, {"injections", json::array({{{"fired", true}, {"proof", json::array()}}})}};
  OutputCheck same;
  same.within = true;
  EXPECT_EQ(make_record(spec, observe(sim, same)).outcome, Outcome::Masked);
}

// The transfers each link carried in the fault-free run, from its trace (ranks are processes,
// links their threads: "hccs->r2", "nic.tx"): a slice's start and end cycles, how long its first
// message queued, and how many messages it merges (back-to-back transfers share one slice).
struct Slice {
  std::uint64_t start = 0, end = 0, queued = 0, transfers = 1;
};
std::map<std::string, std::vector<Slice>> link_transfers(const std::filesystem::path& trace, double mhz) {
  std::ifstream in(trace);
  const json t = json::parse(in);
  const json& events = t.is_object() ? t["traceEvents"] : t;
  std::map<std::pair<int, int>, std::string> threads;
  for (const auto& e : events)
    if (e.value("name", "") == "thread_name") threads[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
  std::map<std::string, std::vector<Slice>> out;
  auto cycles = [mhz](double us) { return static_cast<std::uint64_t>(std::llround(us * mhz)); };
  for (const auto& e : events) {
    if (e.value("cat", "") != "link" || e.value("ph", "") != "X") continue;
    const int pid = e["pid"].get<int>();
    const std::string link = fmt::format("link r{} {}", pid, threads.at({pid, e["tid"].get<int>()}));
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    out[link].push_back({cycles(ts), cycles(ts + dur), cycles(e["args"].value("queued_ps", 0.0) / 1e6),
                         e["args"].value("transfers", std::uint64_t{1})});
  }
  return out;
}

// What the trace says of a campaign's trials against what the campaign scored.
struct Checked {
  std::size_t trials = 0, hung = 0, finished = 0, unused = 0, after_last = 0;
};

// Runs `trials` trials of `scenario` (servers of `chips_per_server`) and checks every trial the
// fault-free run's trace decides: the job hangs, naming a dead link first, exactly when a transfer
// on a dead link starts after its death; otherwise it finishes with its outputs untouched.
Checked check_against_trace(const std::string& scenario, std::uint32_t chips_per_server, std::uint64_t trials) {
  TempDir dir;
  const std::filesystem::path out = dir.path() / "out";
  const json summary = test::run_campaign(dir.write("camp.yaml", scenario), out, 2, trials);
  const json& n = summary["overall"]["outcomes"];
  for (const char* bad : {"crash", "hang", "sdc", "tolerated", "mislocalized", "top3", "detected"})
    EXPECT_EQ(n[bad], 0) << bad << ": " << summary.dump(2);
  EXPECT_EQ(n["not_fired"], 0) << "every cycle is drawn inside the run";

  const PreparedRun run = prepare(dir, scenario);
  const auto transfers = link_transfers(out / "golden" / "run-0" / "trace.json", run.chip.clock_mhz);
  EXPECT_GT(transfers.size(), 4u);
  // A death within this many cycles of a slice's start (or while its first message queued), or
  // inside a slice of several transfers (a later one may start after it), cannot be called from
  // the trace: such trials are not checked.
  constexpr std::uint64_t kMargin = 8;
  Checked k;
  std::ifstream in(out / "trials.jsonl");
  for (std::string line; std::getline(in, line);) {
    ++k.trials;
    const json t = json::parse(line);
    const json& d = t["descriptor"];
    const auto src = d["src"].get<std::uint32_t>(), dst = d["dst"].get<std::uint32_t>();
    const auto cycle = d["cycle"].get<std::uint64_t>();
    std::vector<std::string> dead = {link_of(src, dst, chips_per_server)};
    if (d["both_directions"].get<bool>()) dead.push_back(link_of(dst, src, chips_per_server));
    EXPECT_EQ(std::set<std::string>(dead.begin(), dead.end()),
              std::set<std::string>(t["truth_ops"].begin(), t["truth_ops"].end())) << line;
    bool carries = false, unclear = false, used = false;
    for (const auto& link : dead) {
      auto it = transfers.find(link);
      if (it == transfers.end()) continue;
      used = true;
      for (const Slice& x : it->second) {
        if (x.start + kMargin >= cycle && x.start <= cycle + x.queued + kMargin) unclear = true;
        else if (x.start >= cycle) carries = true;
        else if (x.transfers > 1 && cycle <= x.end) unclear = true;
      }
    }
    if (unclear) continue;
    const std::string outcome = t["outcome"];
    if (carries) {
      ++k.hung;
      EXPECT_EQ(outcome, "top1") << line;
      EXPECT_EQ(t["cause_correct"], true) << line;
      const std::string first = t["observation"]["hang_links"].at(0);
      EXPECT_NE(std::find(dead.begin(), dead.end(), first), dead.end()) << line;
      EXPECT_GT(t["latency_cycles"].get<std::uint64_t>(), 0u) << line;
    } else {
      ++k.finished;
      (used ? k.after_last : k.unused) += 1;
      EXPECT_EQ(outcome, "masked") << line;
    }
  }
  fmt::print("[link_down] {} hung, {} finished ({} on unused links, {} after the last transfer), {} not checked\n", k.hung,
             k.finished, k.unused, k.after_last, k.trials - k.hung - k.finished);
  EXPECT_EQ(k.trials, trials);
  EXPECT_GE(k.hung + k.finished, trials * 3 / 4) << "too many trials the trace cannot decide";
  return k;
}

TEST(CampaignLinkDown, TheJobHangsExactlyWhenTheDeadLinkCarriesAMessageAfterItDies) {
  const Checked k = check_against_trace(kScenario, 4, 32);
  EXPECT_GT(k.hung, 0u);
  EXPECT_GT(k.unused, 0u) << "no trial on a link the collectives never use";
  EXPECT_GT(k.after_last, 0u) << "no trial on a used link after its last transfer";
}

// Elsewhere: 32 ranks in four servers of eight on a two-level fat tree, ZeRO-1 over a binary-tree
// all-reduce (reduce-scatter and all-gather over the tree's links only).
TEST(CampaignLinkDown, OnAFatTreeUnderZero1TheSameHolds) {
  const std::string scenario = R"(name: linkcamp_ft
model: mlp_loss_scaled
mode: training
ranks: 32
steps: 2
seed: 4
cluster: {chips_per_server: 8, switch: fat_tree, servers_per_leaf: 2, spines: 2, oversubscription: 2, exec_timeout_ms: 5}
training:
  loss: model
  optimizer: {type: sgd, lr: 5.0e-5}
  sharding: zero1
  allreduce: {algorithm: tree, accumulation: fp32}
campaign:
  trials: 24
  seed: 3
  golden_runs: 1
  faults:
    - kind: link_down
      choose: {both_directions: [false, true]}
)";
  const Checked k = check_against_trace(scenario, 8, 24);
  EXPECT_GT(k.hung, 0u);
  EXPECT_GT(k.unused, 0u);
}

}  // namespace
}  // namespace probelab::sim
