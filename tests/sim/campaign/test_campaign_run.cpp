// Campaigns that simulate (each trial in a forked worker): the same summary with one or two
// workers, a resumed campaign after a kill that neither loses nor repeats trials, and outcomes
// that make sense for faults with known effects.
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/sim/campaign/campaign_fixture.h"
#include "sim/campaign/campaign_runner.h"
#include "sim/campaign/campaign_store.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::run_campaign;
using test::TempDir;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CampaignRun, OneAndTwoWorkersGiveTheSameSummary) {
  TempDir dir;
  const auto scenario = test::write_campaign(dir);
  const json one = run_campaign(scenario, dir.path() / "one", 1, 6);
  const json two = run_campaign(scenario, dir.path() / "two", 2, 6);
  EXPECT_EQ(one["trials_done"], 6);
  EXPECT_TRUE(one["complete"].get<bool>());
  EXPECT_EQ(slurp(dir.path() / "one" / "summary.json"), slurp(dir.path() / "two" / "summary.json"));
  EXPECT_EQ(slurp(dir.path() / "one" / "trials.csv"), slurp(dir.path() / "two" / "trials.csv"));
  // the trial log ends in trial order, not in the order two workers finished them
  EXPECT_EQ(slurp(dir.path() / "one" / "trials.jsonl"), slurp(dir.path() / "two" / "trials.jsonl"));
  EXPECT_EQ(one, two);
  // The fault-free runs agree with themselves: no false positive from the envelope.
  EXPECT_EQ(one["golden"]["runs"], 2);
  EXPECT_TRUE(one["golden"]["deterministic"].get<bool>());
  // Every trial fired and ran to completion; scratch files are gone.
  const auto& out = one["overall"]["outcomes"];
  EXPECT_EQ(out["crash"], 0) << one.dump(2);
  EXPECT_EQ(out["hang"], 0) << one.dump(2);
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "one"))
    EXPECT_EQ(e.path().filename().string().rfind("work", 0), std::string::npos) << e.path();
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "one" / "summary.txt"));
}

TEST(CampaignRun, ResumeAfterAKillNeitherLosesNorRepeatsTrials) {
  TempDir dir;
  const auto scenario = test::write_campaign(dir);
  const auto out = dir.path() / "camp";
  const json full = run_campaign(scenario, out, 2, 6);
  const std::string reference = slurp(out / "summary.json");
  // Killed after two and a half trials: keep two lines and half of the third.
  const std::string lines = slurp(out / "trials.jsonl");
  std::size_t cut = 0;
  for (int k = 0; k < 2; ++k) cut = lines.find('\n', cut) + 1;
  const std::size_t third = lines.find('\n', cut);
  std::filesystem::remove(out / "summary.json");
  {
    std::ofstream f(out / "trials.jsonl", std::ios::binary | std::ios::trunc);
    f << lines.substr(0, cut + (third - cut) / 2);
  }
  const json resumed = run_campaign(scenario, out, 2, 6, /*resume=*/true);
  EXPECT_EQ(slurp(out / "summary.json"), reference);
  EXPECT_EQ(resumed, full);
  const LoadedTrials l = load_trials(out / "trials.jsonl");
  EXPECT_EQ(l.skipped, 0u);
  std::set<std::uint64_t> idx;
  for (const auto& r : l.records) idx.insert(r.index);
  EXPECT_EQ(l.records.size(), 6u);
  EXPECT_EQ(idx, (std::set<std::uint64_t>{0, 1, 2, 3, 4, 5}));
  // Growing the campaign runs only the new trials; the old ones keep their lines.
  const std::string six = slurp(out / "trials.jsonl");
  const json more = run_campaign(scenario, out, 2, 8, /*resume=*/true);
  EXPECT_EQ(more["trials_done"], 8);
  EXPECT_EQ(load_trials(out / "trials.jsonl").records.size(), 8u);
  EXPECT_EQ(slurp(out / "trials.jsonl").substr(0, six.size()), six);
  // Another seed is another campaign: --resume refuses it.
  CampaignOptions o;
  o.scenario = scenario;
  o.load.source_root = test::source_root();
  o.trials = 8;
  o.seed = 99;
  o.out = out;
  o.resume = true;
  Campaign c(o);
  c.prepare();
  auto comm = make_campaign_comm();
  EXPECT_THROW(c.run(*comm), ScenarioError);
}

TEST(CampaignRun, NanFaultsOnOutputsAreDetectedAndLocalized) {
  TempDir dir;
  const auto scenario = test::write_campaign(
      dir, test::campaign_scenario().substr(0, test::campaign_scenario().find("  faults:")) +
               "  faults:\n    - {kind: nan, ops: [\"fc1*\", \"relu\"]}\n");
  const json s = run_campaign(scenario, dir.path() / "out", 2, 4);
  const auto& o = s["overall"]["outcomes"];
  // A NaN in a hidden activation reaches the output: it is never masked, and the probes see it.
  EXPECT_EQ(o["masked"], 0) << s.dump(2);
  EXPECT_EQ(o["sdc"], 0) << s.dump(2);
  EXPECT_EQ(s["overall"]["probe_coverage"]["k"], 4) << s.dump(2);
  EXPECT_GT(s["overall"]["top3"]["k"].get<int>(), 0) << s.dump(2);
  EXPECT_EQ(s["golden"]["flagged"]["k"], 0) << s.dump(2);
  // NaN written into a result: the replay of the op (full capture) cannot reproduce it, so the
  // expected cause is data corruption; the latch names the injected element
  EXPECT_EQ(s["overall"]["element_exact"]["k"], s["overall"]["element_exact"]["n"]) << s.dump(2);
  EXPECT_EQ(s["overall"]["element_exact"]["n"], 4) << s.dump(2);
  EXPECT_EQ(s["overall"]["cause_correct"]["k"], 4) << s.dump(2);
  EXPECT_EQ(s["overall"]["not_fired_rate"]["k"], 0) << s.dump(2);
}

// The sampler draws only sites the fault-free run reached: an L0C flip lands on ops that use the
// Cube, a UB flip on Vector ops; every trial fires.
TEST(CampaignRun, EveryDrawnSiteFires) {
  TempDir dir;
  const auto scenario = test::write_campaign(
      dir, test::campaign_scenario().substr(0, test::campaign_scenario().find("  faults:")) +
               "  faults:\n    - {kind: bitflip, targets: [l0c, ub, accumulator], bits: [\"0-63\"]}\n");
  const json s = run_campaign(scenario, dir.path() / "out", 2, 8);
  EXPECT_EQ(s["overall"]["outcomes"]["not_fired"], 0) << s.dump(2);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "out" / "golden" / "run-0" / "census.json"));
  std::istringstream lines(slurp(dir.path() / "out" / "trials.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const json r = json::parse(line);
    const std::string op = r["descriptor"]["op"], target = r["descriptor"]["target"];
    // tinynet: fc1 and fc2 are MatMuls (Cube), bias and relu run on the Vector unit
    if (target == "ub") EXPECT_TRUE(op == "fc1_bias" || op == "relu") << line;
    else EXPECT_TRUE(op == "fc1" || op == "fc2") << line;
  }
}

// Clean runs: distinct data seeds are scored for false positives; bit-identical runs count once.
TEST(CampaignRun, CleanRunsAreDistinctAndIdenticalOnesCountOnce) {
  TempDir dir;
  const auto scenario = test::write_campaign(
      dir, test::campaign_scenario("  clean_runs: {runs: 6, vary: {data.seed: [11, 12, 13]}}\n"));
  const json s = run_campaign(scenario, dir.path() / "out", 2, 0);
  EXPECT_EQ(s["trials_done"], 0);
  EXPECT_EQ(s["clean_runs"]["runs"], 6) << s.dump(2);
  // runs with the same data seed have bit-identical outputs: one distinct run per seed drawn
  std::map<std::string, std::set<std::string>> digests_by_seed;
  for (int k = 0; k < 6; ++k) {
    const json r = json::parse(slurp(dir.path() / "out" / "clean" / ("run-" + std::to_string(k)) / "clean.json"));
    ASSERT_EQ(r["status"], "ok") << r.dump();
    digests_by_seed[r["sets"].at(0).get<std::string>()].insert(r["digest"].get<std::string>());
  }
  for (const auto& [seed, d] : digests_by_seed) EXPECT_EQ(d.size(), 1u) << seed;
  EXPECT_GE(digests_by_seed.size(), 2u);
  EXPECT_EQ(s["clean_runs"]["distinct"], digests_by_seed.size()) << s.dump(2);
  EXPECT_EQ(s["clean_runs"]["false_positive_rate"]["k"], 0) << s.dump(2);
  EXPECT_EQ(s["clean_runs"]["false_positive_rate"]["n"], digests_by_seed.size()) << s.dump(2);
}

}  // namespace
}  // namespace probelab::sim
