// Scoring a campaign without simulating: Wilson intervals against known values, percentiles,
// outcome classification of hand-made observations, the golden envelope, the summary as a pure
// function of the records, and trials.jsonl surviving a truncated last line.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "sim/campaign/campaign_stats.h"
#include "sim/campaign/campaign_store.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

TEST(CampaignScoring, WilsonIntervalMatchesKnownValues) {
  Interval i = wilson_interval(50, 100);
  EXPECT_NEAR(i.lo, 0.4038, 5e-5);
  EXPECT_NEAR(i.hi, 0.5962, 5e-5);
  i = wilson_interval(0, 10);
  EXPECT_DOUBLE_EQ(i.lo, 0.0);
  EXPECT_NEAR(i.hi, 0.2775, 5e-5);
  i = wilson_interval(10, 10);
  EXPECT_NEAR(i.lo, 0.7225, 5e-5);
  EXPECT_DOUBLE_EQ(i.hi, 1.0);
  // 384 trials at p = 0.5 give about +-5% (the bundled campaign's size).
  i = wilson_interval(192, 384);
  EXPECT_NEAR(i.hi - i.lo, 0.0996, 1e-3);
  // 0 of n: the upper bound is about 3/n (rule of three) for large n.
  i = wilson_interval(0, 1000);
  EXPECT_NEAR(i.hi, 0.00383, 5e-5);
  const auto r = rate_json(3, 0);
  EXPECT_TRUE(r["rate"].is_null());
  EXPECT_EQ(rate_json(1, 4)["rate"].get<double>(), 0.25);
}

TEST(CampaignScoring, NearestRankPercentiles) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = 100; i >= 1; --i) v.push_back(i * 10);
  EXPECT_EQ(percentile(v, 50), 500u);
  EXPECT_EQ(percentile(v, 90), 900u);
  EXPECT_EQ(percentile(v, 99), 990u);
  EXPECT_EQ(percentile(v, 100), 1000u);
  EXPECT_EQ(percentile({7}, 50), 7u);
  EXPECT_EQ(percentile({1, 2, 3}, 50), 2u);
}

TrialObservation seen(std::vector<std::vector<std::string>> suspects, bool within = true) {
  TrialObservation o;
  o.fired = true;
  o.inject_cycle = 100;
  o.detected = !suspects.empty();
  o.exceptions = suspects.empty() ? 0 : 1;
  o.detection_cycle = suspects.empty() ? std::nullopt : std::optional<std::uint64_t>(160);
  o.suspects = std::move(suspects);
  o.output.checked = true;
  o.output.within = within;
  o.output.identical = within;
  if (!within) o.output.max_ulp = 100;
  return o;
}

TEST(CampaignScoring, OutcomesOfHandMadeTrials) {
  const std::vector<std::string> truth = {"fc1", "fc1_orig"};
  EXPECT_EQ(classify(seen({{"fc1"}, {"relu"}}), truth), Outcome::Top1);
  EXPECT_EQ(classify(seen({{"fused", "fc1_orig"}}), truth), Outcome::Top1);  // any name of the suspect
  EXPECT_EQ(classify(seen({{"relu"}, {"fc2"}, {"fc1"}}), truth), Outcome::Top3);
  EXPECT_EQ(classify(seen({{"relu"}, {"fc2"}, {"x"}, {"fc1"}}), truth), Outcome::Mislocalized);
  EXPECT_EQ(classify(seen({{"relu"}}, false), truth), Outcome::Mislocalized);
  EXPECT_EQ(classify(seen({{"relu"}}), {}), Outcome::Detected);
  EXPECT_EQ(classify(seen({}, true), truth), Outcome::Masked);
  EXPECT_EQ(classify(seen({}, false), truth), Outcome::Sdc);
  {
    TrialObservation t = seen({}, false);
    t.output.max_ulp = 3;  // a few ULP off: tolerated, not SDC
    EXPECT_EQ(classify(t, truth), Outcome::Tolerated);
    EXPECT_EQ(classify(t, truth, {2, 0.0}), Outcome::Sdc);
    t.output.max_rel = 1e-4;
    EXPECT_EQ(classify(t, truth, {2, 1e-3}), Outcome::Tolerated);
    EXPECT_EQ(sdc_severity(t.output), "low");
    t.output.max_ulp = 5000;
    EXPECT_EQ(sdc_severity(t.output), "high");
    t.output.max_ulp = UINT64_MAX;
    EXPECT_EQ(sdc_severity(t.output), "nonfinite");
    EXPECT_EQ(classify(t, truth, {UINT64_MAX - 1, 1.0}), Outcome::Sdc) << "NaN where numbers were: never tolerated";
  }
  TrialObservation o = seen({}, false);
  o.fired = false;
  EXPECT_EQ(classify(o, truth), Outcome::NotFired);
  o.status = "error";
  EXPECT_EQ(classify(o, truth), Outcome::Crash);
  o.status = "crash";
  EXPECT_EQ(classify(o, truth), Outcome::Crash);
  o.status = "hang";
  EXPECT_EQ(classify(o, truth), Outcome::Hang);

  // A detection counts conditions and failing comparisons too; the latency needs an exception.
  const json sim = {{"status", "ok"},
                    {"injections", {{{"fired", true}, {"proof", {{{"cycle", 1000}}, {{"cycle", 900}}}}}}},
                    {"anomalies",
                     {{{"kind", "nan_input"}, {"op", "relu"}, {"source_op", "fc1"}, {"role", "propagation"},
                       {"cycle", 1200}, {"latency_cycles", 50}, {"fused_from", json::array()}},
                      {{"kind", "invalid"}, {"op", "fc1"}, {"source_op", "fc1"}, {"role", "source"},
                       {"cycle", 1100}, {"latency_cycles", 40}, {"fused_from", {"a", "b"}}},
                      {{"kind", "condition"}, {"op", "fc2"}}}},
                    {"comparisons", {{{"passed", false}}, {{"passed", true}}}},
                    {"diagnosis", json::array()},
                    {"first_failing_op", "fc2"}};
  const TrialObservation ob = observe(sim, OutputCheck{});
  EXPECT_TRUE(ob.fired);
  EXPECT_EQ(ob.inject_cycle, 900u);
  EXPECT_EQ(ob.exceptions, 2u);
  EXPECT_EQ(ob.conditions, 1u);
  EXPECT_EQ(ob.failing_comparisons, 1u);
  EXPECT_EQ(ob.detection_cycle, 1140u);
  ASSERT_EQ(ob.suspects.size(), 2u);  // fc1 (source, with its fused names), then fc2
  EXPECT_EQ(ob.suspects[0], (std::vector<std::string>{"fc1", "a", "b"}));
  EXPECT_EQ(ob.suspects[1], (std::vector<std::string>{"fc2"}));
  TrialSpec spec;
  spec.index = 4;
  spec.kind = "nan";
  spec.op = "fc1";
  spec.truth_ops = {"fc1"};
  const TrialRecord rec = make_record(spec, ob);
  EXPECT_EQ(rec.outcome, Outcome::Top1);
  EXPECT_EQ(rec.latency_cycles, 240u);
  // A diagnosis, when present, is the ranking.
  json with_diag = sim;
  with_diag["diagnosis"] = {{{"op", "fc2"}, {"inner_op", ""}, {"forward_op", ""}},
                            {{"op", "fc1"}, {"inner_op", ""}, {"forward_op", ""}}};
  EXPECT_EQ(make_record(spec, observe(with_diag, OutputCheck{})).outcome, Outcome::Top3);
  // Round trip through JSON.
  const TrialRecord back = TrialRecord::from_json(json::parse(rec.to_json().dump()));
  EXPECT_EQ(back.to_json(), rec.to_json());
}

TEST(CampaignScoring, CauseAndElementAreScoredAgainstTheTruth) {
  TrialSpec spec;
  spec.kind = "nan";
  spec.op = "fc1";
  spec.truth_ops = {"fc1"};
  spec.nonfinite = true;
  spec.truth_cause = "nan_source";
  spec.truth_cause_replayed = "data_corruption";
  spec.element = 17;
  spec.side = "output";
  spec.tensor_name = "fc1:0";
  spec.step = 2;
  spec.rank = 1;
  TrialObservation o = seen({{"fc1"}});
  o.suspect_causes = {"nan_source"};
  o.latched = {{"relu", "nan_input", "fc1:0", 2, 1, 17, true},   // another op
               {"fc1", "invalid", "fc1:0", 1, 1, 3, false},      // another step
               {"fc1", "invalid", "fc1:0", 2, 1, 17, false}};
  TrialRecord r = make_record(spec, o);
  EXPECT_EQ(r.cause_correct, true);
  EXPECT_EQ(r.element_exact, true);
  EXPECT_EQ(r.truth_cause, "nan_source");
  // the run replayed fc1 at step 2 on rank 1: an injected NaN is then a corruption
  o.replayed = {{"fc1", 2, 1}};
  r = make_record(spec, o);
  EXPECT_EQ(r.truth_cause, "data_corruption");
  EXPECT_EQ(r.cause_correct, false);
  o.replayed.clear();
  o.latched.back().element = 18;
  r = make_record(spec, o);
  EXPECT_EQ(r.element_exact, false);
  o.latched.pop_back();
  r = make_record(spec, o);
  EXPECT_FALSE(r.element_exact.has_value()) << "no latch at the injected site: not scored";
  o.detected = false;
  r = make_record(spec, o);
  EXPECT_FALSE(r.cause_correct.has_value()) << "undetected: no cause to score";
}

graph::Tensor f32(std::vector<float> v) { return graph::Tensor::from_f32({static_cast<std::int64_t>(v.size())}, v); }

TEST(CampaignScoring, GoldenEnvelopeToleratesOnlyFaultFreeVariation) {
  GoldenEnvelope env;
  env.add_run({{"rank0/y", f32({1.0f, 2.0f, NAN})}});
  EXPECT_TRUE(env.deterministic());
  env.add_run({{"rank0/y", f32({1.5f, 2.0f, NAN})}});
  EXPECT_FALSE(env.deterministic());
  OutputCheck c = env.check({{"rank0/y", f32({1.0f, 2.0f, NAN})}});
  EXPECT_TRUE(c.identical);
  EXPECT_TRUE(c.within);
  c = env.check({{"rank0/y", f32({1.25f, 2.0f, NAN})}});
  EXPECT_FALSE(c.identical);
  EXPECT_TRUE(c.within);
  c = env.check({{"rank0/y", f32({1.75f, 2.0f, NAN})}});
  EXPECT_FALSE(c.within);
  EXPECT_EQ(c.outside, 1u);
  EXPECT_DOUBLE_EQ(c.max_deviation, 0.25);
  c = env.check({{"rank0/y", f32({1.0f, NAN, 3.0f})}});
  EXPECT_EQ(c.outside, 2u);  // NaN where none was, a number where NaN always was
  EXPECT_TRUE(std::isinf(c.max_deviation));
  c = env.check({});
  EXPECT_FALSE(c.within);
  // Slack widens it; CBOR keeps everything.
  GoldenEnvelope loose(0.5, 0.0);
  loose.add_run({{"rank0/y", f32({1.0f, 2.0f, NAN})}});
  const GoldenEnvelope copy = GoldenEnvelope::from_cbor(loose.to_cbor());
  EXPECT_TRUE(copy.check({{"rank0/y", f32({1.4f, 2.5f, NAN})}}).within);
  EXPECT_FALSE(copy.check({{"rank0/y", f32({1.6f, 2.0f, NAN})}}).within);
  EXPECT_TRUE(copy.check({{"rank0/y", f32({1.0f, 2.0f, NAN})}}).identical);
}

std::vector<TrialRecord> hand_made() {
  std::vector<TrialRecord> rs;
  const std::vector<std::pair<Outcome, const char*>> mix = {
      {Outcome::Top1, "nan"},   {Outcome::Top1, "nan"},         {Outcome::Top3, "nan"},
      {Outcome::Sdc, "bitflip"}, {Outcome::Masked, "bitflip"},   {Outcome::Mislocalized, "bitflip"},
      {Outcome::Crash, "nan"},  {Outcome::NotFired, "bitflip"}, {Outcome::Masked, "bitflip"}};
  for (std::size_t i = 0; i < mix.size(); ++i) {
    TrialRecord r;
    r.index = i;
    r.kind = mix[i].second;
    r.op = i % 2 ? "fc1" : "fc2";
    r.outcome = mix[i].first;
    r.descriptor = {{"kind", r.kind}};
    r.nonfinite = r.kind == "nan";
    if (r.outcome == Outcome::Sdc) r.severity = "medium";
    if (r.outcome == Outcome::Top1 || r.outcome == Outcome::Top3) r.latency_cycles = 100 * (i + 1);
    rs.push_back(r);
  }
  return rs;
}

TEST(CampaignScoring, SummaryIsAPureFunctionOfTheRecords) {
  CampaignInfo info;
  info.scenario = "s";
  info.seed = 1;
  info.trials = 9;
  info.sampling = "uniform";
  info.golden.resize(2);
  info.golden[1].detected = true;  // flagged
  for (std::uint64_t k = 0; k < 4; ++k) {
    CleanRun c;
    c.index = k;
    c.digest = k == 3 ? 1 : k + 1;  // runs 0 and 3 are bit-identical
    c.flagged = k == 1;
    info.clean.push_back(c);
  }
  auto rs = hand_made();
  const json s = campaign_summary(info, rs);
  std::mt19937_64 g(3);
  std::shuffle(rs.begin(), rs.end(), g);
  EXPECT_EQ(campaign_summary(info, rs).dump(), s.dump());
  EXPECT_EQ(trials_csv(rs), trials_csv(hand_made()));
  const json& m = s["overall"];
  EXPECT_EQ(m["outcomes"]["top1"], 2);
  EXPECT_EQ(m["coverage"]["k"], 5);  // 2 top1 + top3 + mislocalized + crash
  EXPECT_EQ(m["coverage"]["n"], 6);  // ... + 1 sdc
  EXPECT_EQ(m["probe_coverage"]["n"], 5);
  EXPECT_EQ(m["top1"]["k"], 2);
  EXPECT_EQ(m["top1"]["n"], 4);
  EXPECT_EQ(m["top3"]["k"], 3);
  EXPECT_EQ(m["sdc_rate"]["n"], 8);  // fired trials
  EXPECT_EQ(m["latency_cycles"]["n"], 3);
  EXPECT_EQ(m["latency_cycles"]["p50"], 200);
  EXPECT_EQ(m["latency_cycles"]["max"], 300);
  EXPECT_EQ(s["golden"]["flagged"]["k"], 1);
  EXPECT_EQ(s["golden"]["flagged"]["n"], 2);
  EXPECT_EQ(s["clean_runs"]["false_positive_rate"]["k"], 1);
  EXPECT_EQ(s["clean_runs"]["false_positive_rate"]["n"], 3) << "4 clean runs, two of them bit-identical";
  EXPECT_EQ(s["clean_runs"]["distinct"], 3);
  EXPECT_EQ(m["source_top1"]["n"], 3) << "the localized NaN trials";
  EXPECT_EQ(m["source_top1"]["k"], 2);
  EXPECT_EQ(m["not_fired_rate"]["k"], 1);
  EXPECT_EQ(m["not_fired_rate"]["n"], 9);
  EXPECT_EQ(m["sdc_by_severity"]["medium"], 1);
  EXPECT_EQ(s["by_kind"]["nan"]["trials"], 4);
  EXPECT_EQ(s["by_op"]["fc1"]["trials"], 4);
  EXPECT_TRUE(s["complete"].get<bool>());
  const auto ci = s["overall"]["coverage"]["ci95"];
  const Interval w = wilson_interval(5, 6);
  EXPECT_DOUBLE_EQ(ci[0].get<double>(), w.lo);
  EXPECT_NE(campaign_summary_text(s).find("coverage"), std::string::npos);
  info.trials = 12;
  EXPECT_FALSE(campaign_summary(info, rs)["complete"].get<bool>());
}

TEST(CampaignScoring, TrialLogSurvivesATruncatedLastLine) {
  TempDir dir;
  const auto file = dir.path() / "trials.jsonl";
  const auto rs = hand_made();
  {
    TrialLog log(file, 0);
    for (std::size_t i = 0; i < 4; ++i) log.append(rs[i]);
  }
  const auto full = std::filesystem::file_size(file);
  const std::string line4 = rs[4].to_json().dump();
  {
    std::ofstream out(file, std::ios::app | std::ios::binary);
    out << line4.substr(0, line4.size() / 2);  // killed mid-line
  }
  LoadedTrials l = load_trials(file);
  ASSERT_EQ(l.records.size(), 4u);
  EXPECT_EQ(l.skipped, 1u);
  EXPECT_EQ(l.valid_bytes, full);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(l.records[i].to_json(), rs[i].to_json());
  {
    TrialLog log(file, l.valid_bytes);  // resume: cut the partial line, then append
    for (std::size_t i = 4; i < rs.size(); ++i) log.append(rs[i]);
  }
  l = load_trials(file);
  ASSERT_EQ(l.records.size(), rs.size());
  EXPECT_EQ(l.skipped, 0u);
  for (std::size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(l.records[i].index, i);
  EXPECT_TRUE(load_trials(dir.path() / "missing.jsonl").records.empty());
}

}  // namespace
}  // namespace probelab::sim
