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

#include "sim/campaign/campaign_comm.h"
#include "sim/campaign/campaign_outcome.h"
#include "sim/campaign/campaign_runner.h"
#include "sim/campaign/campaign_trials.h"
#include "sim/scenario/prepared_run.h"
#include "tests/sim/sim_test_util.h"

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

// The link src sends on towards dst, as trials and hang reports name it.
std::string link_of(std::uint32_t src, std::uint32_t dst) {
  return src / 4 == dst / 4 ? fmt::format("link r{} hccs->r{}", src, dst) : fmt::format("link r{} nic.tx", src);
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

// Start cycles (and queueing) of every transfer each link carried in the fault-free run, from its
// trace: ranks are processes, links their threads ("hccs->r2", "nic.tx").
std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint64_t>>> link_transfers(const std::filesystem::path& trace,
                                                                                            double mhz) {
  std::ifstream in(trace);
  const json t = json::parse(in);
  const json& events = t.is_object() ? t["traceEvents"] : t;
  std::map<std::pair<int, int>, std::string> threads;
  for (const auto& e : events)
    if (e.value("name", "") == "thread_name") threads[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint64_t>>> out;
  for (const auto& e : events) {
    if (e.value("cat", "") != "link" || e.value("ph", "") != "X") continue;
    const int pid = e["pid"].get<int>();
    const std::string link = fmt::format("link r{} {}", pid, threads.at({pid, e["tid"].get<int>()}));
    const auto start = static_cast<std::uint64_t>(std::llround(e["ts"].get<double>() * mhz));
    const auto queued = static_cast<std::uint64_t>(std::llround(e["args"].value("queued_ps", 0.0) * mhz / 1e6));
    out[link].emplace_back(start, queued);
  }
  return out;
}

TEST(CampaignLinkDown, TheJobHangsExactlyWhenTheDeadLinkCarriesAMessageAfterItDies) {
  TempDir dir;
  CampaignOptions o;
  o.scenario = dir.write("camp.yaml", kScenario);
  o.load.source_root = test::source_root();
  o.trials = 24;
  o.jobs = 2;
  o.out = dir.path() / "out";
  Campaign c(o);
  c.prepare();
  auto comm = make_campaign_comm();
  const json summary = c.run(*comm);
  const json& n = summary["overall"]["outcomes"];
  for (const char* bad : {"crash", "hang", "sdc", "tolerated", "mislocalized", "top3", "detected"})
    EXPECT_EQ(n[bad], 0) << bad << ": " << summary.dump(2);
  EXPECT_EQ(n["not_fired"], 0) << "every cycle is drawn inside the run";

  const PreparedRun run = prepare(dir, kScenario);
  const auto transfers = link_transfers(o.out / "golden" / "run-0" / "trace.json", run.chip.clock_mhz);
  ASSERT_GT(transfers.size(), 8u);
  // A death within this many cycles of a transfer's start (or while it queued) is too close to
  // call from the trace's nanosecond timestamps: such trials are not checked.
  constexpr std::uint64_t kMargin = 8;
  std::size_t hung = 0, finished = 0, unused = 0, after_last = 0;
  std::ifstream in(o.out / "trials.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json t = json::parse(line);
    const json& d = t["descriptor"];
    const auto src = d["src"].get<std::uint32_t>(), dst = d["dst"].get<std::uint32_t>();
    const auto cycle = d["cycle"].get<std::uint64_t>();
    std::vector<std::string> dead = {link_of(src, dst)};
    if (d["both_directions"].get<bool>()) dead.push_back(link_of(dst, src));
    bool carries = false, close = false, used = false;
    for (const auto& link : dead) {
      auto it = transfers.find(link);
      if (it == transfers.end()) continue;
      used = true;
      for (const auto& [start, queued] : it->second) {
        carries = carries || start >= cycle;
        close = close || (start + kMargin >= cycle && start <= cycle + queued + kMargin);
      }
    }
    if (close) continue;
    const std::string outcome = t["outcome"];
    if (carries) {
      ++hung;
      EXPECT_EQ(outcome, "top1") << line;
      EXPECT_EQ(t["cause_correct"], true) << line;
      const std::string first = t["observation"]["hang_links"].at(0);
      EXPECT_NE(std::find(dead.begin(), dead.end(), first), dead.end()) << line;
      EXPECT_GT(t["latency_cycles"].get<std::uint64_t>(), 0u) << line;
    } else {
      ++finished;
      (used ? after_last : unused) += 1;
      EXPECT_EQ(outcome, "masked") << line;
    }
  }
  fmt::print("[link_down] {} hung, {} finished ({} on unused links, {} after the last transfer)\n", hung, finished, unused, after_last);
  EXPECT_GE(hung + finished, 22u) << "trials too close to a transfer to check: " << 24 - hung - finished;
  EXPECT_GT(hung, 0u);
  EXPECT_GT(unused, 0u) << "no trial on a link the collectives never use";
  EXPECT_GT(after_last, 0u) << "no trial on a used link after its last transfer";
}

}  // namespace
}  // namespace probelab::sim
