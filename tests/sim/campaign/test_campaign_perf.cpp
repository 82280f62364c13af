// Campaigns of performance faults: trials name the slowed component the way perf findings do,
// a degraded link is always one its sender has (a ring neighbour, or the NIC towards another
// server), and a trial is scored on the run's perf findings, not on the precision diagnosis.
#include <set>

#include <gtest/gtest.h>

#include "sim/campaign/campaign_outcome.h"
#include "sim/campaign/campaign_trials.h"
#include "sim/scenario/prepared_run.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

PreparedRun prepare(const TempDir& dir, const std::string& text) {
  LoadOptions o;
  o.source_root = test::source_root();
  return prepare_run(load_scenario(dir.write("camp.yaml", text), o));
}

std::string perf_campaign(const std::string& topology) {
  return R"(name: perfcamp
model: mlp
mode: training
ranks: 8
steps: 1
seed: 3
)" + topology + R"(
campaign:
  trials: 80
  seed: 9
  sampling: per_kind
  faults:
    - kind: hbm_channel_degraded
      choose: {channel: ["0-31"], fraction: [0.5]}
    - kind: link_degraded
      choose: {fraction: [0.25]}
    - kind: straggler
      choose: {slowdown: [2]}
    - kind: launch_delay
      choose: {delay_ns: [3000]}
)";
}

std::vector<TrialSpec> trials_of(const PreparedRun& run, std::uint64_t n) {
  TrialSpace s;
  s.executed = &run.workload.snapshots.fused;
  s.steps = 1;
  s.ranks = static_cast<std::uint32_t>(run.scenario.ranks);
  s.first_link = trial_first_link(run);
  return TrialGenerator(*run.scenario.campaign, s).trials(9, n);
}

TEST(CampaignPerf, DegradedLinksAreRingNeighboursAndTruthsNameTheComponent) {
  TempDir dir;
  const PreparedRun run = prepare(dir, perf_campaign("chip: {overrides: {link_count: 2}}"));
  std::set<std::string> kinds;
  std::set<std::pair<std::uint32_t, std::uint32_t>> links;
  for (const TrialSpec& t : trials_of(run, 80)) {
    kinds.insert(t.kind);
    EXPECT_TRUE(t.perf) << t.kind;
    ASSERT_EQ(t.truth_ops.size(), 1u);
    const json d = t.descriptor_json();
    if (t.kind == "link_degraded") {
      const auto src = d["src"].get<std::uint32_t>(), dst = d["dst"].get<std::uint32_t>();
      EXPECT_TRUE(dst == (src + 1) % 8 || src == (dst + 1) % 8) << d.dump();
      EXPECT_EQ(t.truth_ops[0], fmt::format("link r{} hccs->r{}", src, dst));
      EXPECT_EQ(t.truth_cause, "link");
      links.insert({src, dst});
    } else if (t.kind == "hbm_channel_degraded") {
      EXPECT_EQ(t.truth_ops[0], fmt::format("hbm_channel r{} ch{}", d["rank"].get<int>(), d["channel"].get<int>()));
    } else if (t.kind == "straggler") {
      EXPECT_EQ(t.truth_ops[0], fmt::format("straggler r{}", d["rank"].get<int>()));
    } else {
      EXPECT_EQ(t.truth_ops[0], fmt::format("launch r{}", d["rank"].get<int>()));
      EXPECT_EQ(t.truth_cause, "launch");
    }
  }
  EXPECT_EQ(kinds.size(), 4u);
  EXPECT_GE(links.size(), 8u) << "20 link trials over the 16 ring links";
}

TEST(CampaignPerf, ALinkToAnotherServerIsTheSendersNic) {
  TempDir dir;
  const PreparedRun run = prepare(dir, perf_campaign("cluster: {chips_per_server: 4}"));
  std::size_t nic = 0, hccs = 0;
  for (const TrialSpec& t : trials_of(run, 80)) {
    if (t.kind != "link_degraded") continue;
    const json d = t.descriptor_json();
    const auto src = d["src"].get<std::uint32_t>(), dst = d["dst"].get<std::uint32_t>();
    if (src / 4 == dst / 4) {
      ++hccs;
      EXPECT_EQ(t.truth_ops[0], fmt::format("link r{} hccs->r{}", src, dst));
    } else {
      ++nic;
      EXPECT_EQ(t.truth_ops[0], fmt::format("link r{} nic.tx", src));
    }
  }
  EXPECT_GT(nic, 0u);
  EXPECT_GT(hccs, 0u);
}

TEST(CampaignPerf, TrialsAreScoredOnPerfFindings) {
  TrialSpec spec;
  spec.kind = "link_degraded";
  spec.perf = true;
  spec.truth_ops = {"link r3 nic.tx"};
  spec.truth_cause = "link";
  json sim = {{"status", "ok"},
              {"injections", json::array({{{"fired", true}, {"proof", json::array()}}})},
              {"perf", {{"findings", json::array({{{"cause", "straggler"}, {"rank", 2}},
                                                  {{"cause", "link"}, {"rank", 3}, {"link", "r3 nic.tx"}}})}}}};
  OutputCheck out;
  out.within = true;
  TrialRecord r = make_record(spec, observe(sim, out));
  EXPECT_EQ(r.outcome, Outcome::Top3);
  EXPECT_EQ(r.rank, 2u);
  EXPECT_EQ(r.cause_correct, false);
  sim["perf"]["findings"].erase(0);
  r = make_record(spec, observe(sim, out));
  EXPECT_EQ(r.outcome, Outcome::Top1);
  EXPECT_EQ(r.cause_correct, true);
  // No finding: the fault went unnoticed (outputs are untouched by a performance fault).
  sim["perf"]["findings"] = json::array();
  r = make_record(spec, observe(sim, out));
  EXPECT_EQ(r.outcome, Outcome::Masked);
  // A precision alarm does not localize a performance fault.
  sim["anomalies"] = json::array({{{"kind", "nan"}, {"op", "fc1"}, {"role", "source"}}});
  r = make_record(spec, observe(sim, out));
  EXPECT_EQ(r.outcome, Outcome::Masked);
  // And a clean run with a perf finding is a false positive of a perf campaign only.
  sim.erase("anomalies");
  sim["perf"]["findings"] = json::array({{{"cause", "launch"}, {"rank", 0}}});
  const TrialObservation o = observe(sim, out);
  EXPECT_TRUE(flags_anything(o, true));
  EXPECT_FALSE(flags_anything(o, false));
  EXPECT_EQ(perf_component(sim["perf"]["findings"][0]), "launch r0");
}

}  // namespace
}  // namespace probelab::sim
