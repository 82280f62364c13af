// The campaign's fault model and trial list: parsed with positioned errors, resolved against the
// executed graph, and derived from the seed alone (same seed same list, another seed another
// list, a longer campaign extends a shorter one), every trial a valid injection descriptor.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "tests/sim/campaign/campaign_fixture.h"
#include "injectors/injector.h"
#include "sim/campaign/campaign_runner.h"
#include "sim/campaign/campaign_trials.h"
#include "sim/scenario/prepared_run.h"

namespace probelab::sim {
namespace {

using test::TempDir;

PreparedRun prepare(const TempDir& dir, const std::string& text) {
  LoadOptions o;
  o.source_root = test::source_root();
  return prepare_run(load_scenario(test::write_campaign(dir, text), o));
}

TrialSpace space_of(const PreparedRun& run, std::uint64_t cycles = 100000) {
  TrialSpace s;
  s.executed = &run.workload.snapshots.fused;
  s.steps = static_cast<std::uint32_t>(run.scenario.steps);
  s.ranks = static_cast<std::uint32_t>(run.scenario.ranks);
  s.cycle_span = cycles;
  return s;
}

std::vector<std::string> dumps(const std::vector<TrialSpec>& ts) {
  std::vector<std::string> out;
  for (const auto& t : ts) out.push_back(t.descriptor_json().dump());
  return out;
}

TEST(CampaignTrials, SameSeedSameListOtherSeedOtherList) {
  TempDir dir;
  const PreparedRun run = prepare(dir, test::campaign_scenario());
  ASSERT_TRUE(run.scenario.campaign.has_value());
  const TrialGenerator gen(*run.scenario.campaign, space_of(run));
  const auto a = dumps(gen.trials(5, 40));
  const auto b = dumps(TrialGenerator(*run.scenario.campaign, space_of(run)).trials(5, 40));
  const auto c = dumps(gen.trials(6, 40));
  EXPECT_EQ(a, b);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != c[i] ? 1 : 0;
  EXPECT_GT(differ, 30u) << "another seed should draw other sites";
  // Prefix-stable, and any single trial is generated alone.
  const auto shorter = dumps(gen.trials(5, 10));
  EXPECT_EQ(shorter, std::vector<std::string>(a.begin(), a.begin() + 10));
  EXPECT_EQ(gen.trial(5, 33).descriptor_json().dump(), a[33]);
  // Distinct trials draw distinct seeds.
  std::set<std::uint64_t> seeds;
  for (const auto& t : gen.trials(5, 40)) seeds.insert(t.descriptor_json()["seed"].get<std::uint64_t>());
  EXPECT_EQ(seeds.size(), 40u);
}

TEST(CampaignTrials, EveryTrialIsAValidDescriptorWithItsGroundTruth) {
  TempDir dir;
  const PreparedRun run = prepare(dir, test::campaign_scenario());
  const graph::Graph& g = run.workload.snapshots.fused;
  const TrialGenerator gen(*run.scenario.campaign, space_of(run, 5000));
  inject::InjectionEnv env;
  env.executed = &g;
  std::set<std::string> targets;
  for (const auto& t : gen.trials(1, 60)) {
    const auto d = t.descriptor_json();
    EXPECT_NO_THROW(inject::InjectorRegistry::instance().create(t.descriptor, "trial", env)) << d.dump();
    ASSERT_FALSE(t.truth_ops.empty()) << d.dump();
    ASSERT_NE(g.find_op(t.op), nullptr) << t.op;
    if (t.kind == "nan") {
      EXPECT_EQ(d["op"], t.op);
      EXPECT_EQ(t.truth_ops, std::vector<std::string>{t.op});
      const auto& tensor = g.tensor(g.find_op(t.op)->outputs[d["index"].get<std::size_t>()]);
      EXPECT_LT(d["element"].get<std::int64_t>(), graph::numel(tensor.desc.shape));
    } else {
      ASSERT_EQ(t.kind, "bitflip");
      targets.insert(d["target"].get<std::string>());
      for (const auto& b : d["bits"]) {
        EXPECT_GE(b.get<int>(), 8);
        EXPECT_LE(b.get<int>(), 15);
      }
      if (d["target"] == "hbm") {
        EXPECT_LT(d["cycle"].get<std::uint64_t>(), 5000u);
        EXPECT_FALSE(d.contains("op"));
        // The producer of the flipped tensor is among the truth.
        const auto* p = g.producer(d["tensor"].get<std::string>());
        ASSERT_NE(p, nullptr);
        EXPECT_NE(std::find(t.truth_ops.begin(), t.truth_ops.end(), p->name), t.truth_ops.end());
      }
    }
  }
  EXPECT_EQ(targets, (std::set<std::string>{"hbm", "l0c"}));
}

TEST(CampaignTrials, StratifiedSamplingCyclesThroughStrata) {
  TempDir dir;
  const PreparedRun run = prepare(dir, test::campaign_scenario());
  FaultModel m = *run.scenario.campaign;
  // per_kind: the sorted kinds in turn.
  const TrialGenerator by_kind(m, space_of(run));
  EXPECT_EQ(by_kind.strata(), (std::vector<std::string>{"bitflip", "nan"}));
  const auto k = by_kind.trials(9, 10);
  for (const auto& t : k) EXPECT_EQ(t.kind, t.index % 2 == 0 ? "bitflip" : "nan");
  // per_op: every op of the executed graph equally often, in name order.
  m.sampling = "per_op";
  const TrialGenerator by_op(m, space_of(run));
  const auto& strata = by_op.strata();
  ASSERT_GE(strata.size(), 3u);
  EXPECT_TRUE(std::is_sorted(strata.begin(), strata.end()));
  std::map<std::string, int> count;
  for (const auto& t : by_op.trials(9, strata.size() * 3)) {
    EXPECT_EQ(t.op, strata[t.index % strata.size()]);
    ++count[t.op];
  }
  for (const auto& [op, n] : count) EXPECT_EQ(n, 3) << op;
  // uniform with weights: the heavier entry is drawn far more often.
  m.sampling = "uniform";
  m.faults[0].weight = 9;
  const TrialGenerator uniform(m, space_of(run));
  int nan = 0;
  for (const auto& t : uniform.trials(9, 400)) nan += t.kind == "nan" ? 1 : 0;
  EXPECT_GT(nan, 320);
  EXPECT_LT(nan, 390);
}

TEST(CampaignTrials, BadFaultModelsAreErrorsNamingFileLineAndKey) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  LoadOptions o;
  o.source_root = test::source_root();
  auto error_of = [&](const std::string& text) -> std::string {
    try {
      const auto path = dir.write("bad.yaml", text);
      Campaign c({path, o, {}, std::nullopt, std::nullopt, 1, dir.path() / "out", false});
      c.prepare();
    } catch (const ScenarioError& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string head = "name: bad\nmodel: tinynet.yaml\nchip: tiny\ncampaign:\n";
  std::string e = error_of(head + "  trails: 3\n  faults: [{kind: nan}]\n");
  EXPECT_NE(e.find("bad.yaml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("trails"), std::string::npos) << e;
  e = error_of(head + "  faults:\n    - {kind: nan, targets: [l0c]}\n");
  EXPECT_NE(e.find("bad.yaml:6:"), std::string::npos) << e;
  EXPECT_NE(e.find("targets"), std::string::npos) << e;
  e = error_of(head + "  faults:\n    - {kind: nann}\n");
  EXPECT_NE(e.find("campaign.faults[0].kind"), std::string::npos) << e;
  e = error_of(head + "  trials: 3\n  faults:\n    - {kind: nan, ops: [\"nosuchop*\"]}\n");
  EXPECT_NE(e.find("bad.yaml:7:"), std::string::npos) << e;
  EXPECT_NE(e.find("nosuchop*"), std::string::npos) << e;
  e = error_of(head + "  trials: 3\n  faults:\n    - {kind: nan, steps: [3]}\n");
  EXPECT_NE(e.find("steps below 1"), std::string::npos) << e;
  e = error_of(head + "  faults:\n    - {kind: nan, set: {colour: red}}\n");
  EXPECT_NE(e.find("colour"), std::string::npos) << e;
  e = error_of(head + "  faults: [{kind: nan}]\n");
  EXPECT_NE(e.find("campaign.trials"), std::string::npos) << e;
  e = error_of(head + "  trials: 3\n  faults: []\n");
  EXPECT_NE(e.find("campaign.faults"), std::string::npos) << e;
}

}  // namespace
}  // namespace probelab::sim
