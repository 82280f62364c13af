#include <array>
// ProbeRuntime end to end on FakeDevice, driven by the minimal executor of probe_test_util.h.
#include <cmath>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "graph/npy.h"
#include "tests/probes/probe_test_util.h"
#include "probes/sampling.h"
#include "probes/tensor_stats.h"

using namespace probe_test;
using probes::ProbeConfig;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::map<std::string, graph::Tensor> feeds(float scale = 0.3f) { return {{"x", f16({2, 8}, ramp(16, scale))}}; }

void set_elem(std::map<std::string, graph::Tensor>& v, const std::string& t, std::size_t i, float x) {
  auto vals = v.at(t).to_f32();
  vals[i] = x;
  v[t] = graph::Tensor::from_f32(v.at(t).shape(), vals, v.at(t).dtype());
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST(Runtime, StatisticsOnEveryOpAreDrainedAccountedAndManifested) {
  auto out = temp_dir("rt_stats");
  MiniExecutor ex(mlp(), ProbeConfig::from_string("watch_points: [\"*\"]\nmode: statistics\n"), out);
  for (std::uint32_t step = 0; step < 3; ++step) {
    ex.place_step(feeds(0.1f * static_cast<float>(step + 1)));
    ex.run_step(step);
  }
  ex.rt->finish();
  auto rep = ex.rt->report();
  // computed by the kernels themselves; no condition or rule: drained when buffers fill and at the
  // end, each step's float status arriving as a step-status record
  EXPECT_EQ(ex.in_kernel, 15u);
  EXPECT_EQ(ex.probe_tasks, 0u);
  EXPECT_EQ(ex.rt->drain_policy(), probes::DrainPolicy::BufferFull);
  EXPECT_EQ(rep.capture.produced, 18u);
  EXPECT_EQ(rep.capture.drained, 18u);
  EXPECT_EQ(rep.capture.dropped, 0u);
  EXPECT_TRUE(rep.capture.balanced());
  EXPECT_TRUE(rep.anomalies.empty());
  EXPECT_TRUE(rep.diagnosis.empty());
  EXPECT_EQ(rep.steps.size(), 3u);
  auto j = read_json(out / "dump" / "rank0" / "dump.json");
  ASSERT_EQ(j["entries"].size(), 15u);
  // the statistics in the manifest are those of the tensor in HBM at that step (last step here)
  auto expect = probes::compute_stats(ex.values.at("relu1:0"));
  bool found = false;
  for (const auto& e : j["entries"])
    if (e["op"] == "relu1" && e["step"] == 2) {
      found = true;
      EXPECT_DOUBLE_EQ(e["statistics"]["mean"].get<double>(), expect.mean);
      EXPECT_EQ(e["statistics"]["zero_count"].get<std::uint64_t>(), expect.zero_count);
      EXPECT_EQ(e["payload"], "statistics");
    }
  EXPECT_TRUE(found);
  auto rj = ex.rt->report_json();
  EXPECT_EQ(rj["capture"]["balanced"], true);
  EXPECT_EQ(rj["rank"], 0);
}

TEST(Runtime, StatisticsAsTasksAndPerStepDrainGiveTheSameStatistics) {
  // The same statistics three ways: in-kernel (default), as Capture tasks, and drained every step.
  auto run = [](const char* name, const char* capture) {
    const auto out = temp_dir(name);
    MiniExecutor ex(mlp(), ProbeConfig::from_string(std::string("watch_points: [\"*\"]\ncapture: ") + capture + "\n"),
                    out);
    for (std::uint32_t step = 0; step < 2; ++step) {
      ex.place_step(feeds(0.2f * static_cast<float>(step + 1)));
      ex.run_step(step);
    }
    ex.rt->finish();
    return std::make_tuple(ex.rt->report(), std::array<std::uint64_t, 2>{ex.probe_tasks, ex.in_kernel},
                           read_json(out / "dump" / "rank0" / "dump.json")["entries"]);
  };
  const auto [kernel, kc, kd] = run("rt_stats_kernel", "{}");
  const auto [tasks, tc, td] = run("rt_stats_tasks", "{in_kernel_statistics: false}");
  const auto [step, sc, sd] = run("rt_stats_step", "{drain: step}");
  EXPECT_EQ(kc, (std::array<std::uint64_t, 2>{0, 10}));
  EXPECT_EQ(tc, (std::array<std::uint64_t, 2>{10, 0}));
  EXPECT_EQ(sc, (std::array<std::uint64_t, 2>{0, 10}));
  EXPECT_EQ(step.capture.produced, 12u);  // 10 statistics + one step-status record per step
  EXPECT_EQ(kernel.capture.produced, 12u);
  EXPECT_EQ(tasks.capture.produced, 12u);
  EXPECT_EQ(step.capture.drained, 12u);
  EXPECT_EQ(kernel.dump_entries, 10u);
  EXPECT_EQ(tasks.dump_entries, 10u);
  EXPECT_EQ(step.dump_entries, 10u);
  ASSERT_EQ(kd.size(), 10u);
  ASSERT_EQ(td.size(), 10u);
  ASSERT_EQ(sd.size(), 10u);
  for (std::size_t i = 0; i < 10; ++i) {
    const auto& k = kd[i];
    const auto& t = td[i];
    EXPECT_EQ(k["op"], t["op"]);
    EXPECT_EQ(k["step"], t["step"]);
    ASSERT_TRUE(k.contains("statistics") && t.contains("statistics") && sd[i].contains("statistics"));
    EXPECT_EQ(k["statistics"]["mean"], t["statistics"]["mean"]);
    EXPECT_EQ(k["statistics"]["l2"], t["statistics"]["l2"]);
    EXPECT_EQ(k["statistics"]["zero_count"], t["statistics"]["zero_count"]);
    EXPECT_EQ(k["statistics"]["mean"], sd[i]["statistics"]["mean"]);
  }
  EXPECT_EQ(kernel.steps.size(), 2u);
}

TEST(Runtime, StepFloatStatusArrivesAsARecordWithoutStepDrains) {
  MiniExecutor ex(mlp(), ProbeConfig::from_string("watch_points: [\"*\"]\n"), temp_dir("rt_status_rec"));
  ASSERT_TRUE(ex.rt->step_status_records());
  ex.place_step(feeds());
  for (std::uint32_t step = 0; step < 3; ++step)
    ex.run_step(step, [&](const graph::Op& op) {
      if (step == 1 && op.name == "fc2")
        ex.dev.latch_exception({.kind = spec::kExcOverflow, .op_id = op.id, .element = 0, .cycle = ex.dev.now()});
    });
  EXPECT_EQ(ex.rt->report().capture.drained, 0u);  // nothing drained between steps
  ex.rt->finish();
  const auto rep = ex.rt->report();
  ASSERT_EQ(rep.steps.size(), 3u);
  EXPECT_EQ(rep.steps[0].float_status, 0u);
  EXPECT_NE(rep.steps[1].float_status & spec::kFsOverflow, 0u);
  EXPECT_EQ(rep.steps[2].float_status, 0u);
  EXPECT_EQ(rep.capture.drained, 15u + 3u);
}

TEST(Runtime, NanBreakpointFiresAtTheSourceAndDownstreamIsPropagation) {
  auto out = temp_dir("rt_nan");
  auto cfg = ProbeConfig::from_string(R"(
watch_points:
  - match: relu1
    conditions: ["nan_count > 0"]
    actions: [break]
  - "*"
)");
  MiniExecutor ex(mlp(), cfg, out);
  for (std::uint32_t step = 0; step < 4; ++step) {
    bool inject = step == 2;
    ex.place_step(feeds(), [&](auto& v) {
      if (!inject) return;
      set_elem(v, "relu1:0", 3, kNaN);
      for (std::size_t i = 0; i < 4; ++i) set_elem(v, "fc2:0", i, kNaN);  // row 0 reads the NaN
      for (std::size_t i = 0; i < 4; ++i) set_elem(v, "probs", i, kNaN);
    });
    ex.run_step(step, [&](const graph::Op& op) {
      if (!inject) return;
      if (op.name == "fc2") ex.dev.latch_exception({.kind = spec::kExcNanInput, .op_id = op.id, .element = 0, .cycle = ex.dev.now()});
      if (op.name == "softmax")
        ex.dev.latch_exception({.kind = spec::kExcNanInput, .op_id = op.id, .element = 0, .cycle = ex.dev.now()});
    });
  }
  ex.rt->finish();
  auto rep = ex.rt->report();
  ASSERT_EQ(rep.breakpoints.size(), 1u);
  const auto& b = rep.breakpoints[0];
  EXPECT_EQ(b.op, "relu1");
  EXPECT_EQ(b.step, 2u);
  EXPECT_TRUE(b.condition_held);
  EXPECT_EQ(b.dumped.size(), 2u);  // input add1:0 and output relu1:0
  EXPECT_FALSE(ex.dev.halted(0));  // resumed
  // the dumped output holds the NaN at element 3
  auto dumped = graph::read_npy((out / "dump" / "rank0" / b.dumped[1]).string());
  EXPECT_TRUE(std::isnan(dumped.to_f32()[3]));
  ASSERT_EQ(rep.anomalies.size(), 2u);
  for (const auto& a : rep.anomalies) {
    EXPECT_EQ(a.kind, probes::AnomalyKind::NanInput);
    EXPECT_EQ(a.step, 2u);
    EXPECT_EQ(a.role, probes::AnomalyRole::Propagation) << a.op;
    EXPECT_EQ(a.source_op, "relu1") << a.op;
    EXPECT_EQ(a.source_step, 2u) << a.op;
  }
  EXPECT_EQ(rep.anomalies[0].op, "fc2");
  EXPECT_EQ(rep.anomalies[0].propagation_path, (std::vector<std::string>{"relu1@2", "fc2@2"}));
  EXPECT_EQ(rep.anomalies[1].propagation_path, (std::vector<std::string>{"relu1@2", "fc2@2", "softmax@2"}));
  ASSERT_FALSE(rep.diagnosis.empty());
  EXPECT_EQ(rep.diagnosis[0].op, "relu1");
  EXPECT_EQ(rep.diagnosis[0].cause, probes::CauseClass::NanSource);
  EXPECT_EQ(rep.diagnosis[0].step, 2u);
  for (const auto& c : rep.diagnosis)
    EXPECT_FALSE(c.cause == probes::CauseClass::NanSource && (c.op == "fc2" || c.op == "softmax"));
  EXPECT_TRUE(rep.capture.balanced());
}

TEST(Runtime, NonCompilableBreakConditionIsRecheckedOnTheHost) {
  auto out = temp_dir("rt_hostcheck");
  auto cfg = ProbeConfig::from_string(R"(
watch_points:
  - match: fc1
    conditions: ["max_abs > 1000 && step >= 1"]
    actions: [break]
)");
  MiniExecutor ex(mlp(), cfg, out);
  for (std::uint32_t step = 0; step < 3; ++step) {
    ex.place_step(feeds(), [&](auto& v) {
      if (step != 0) set_elem(v, "fc1:0", 0, 5000.0f);
    });
    ex.run_step(step);
  }
  auto rep = ex.rt->report();
  ASSERT_EQ(rep.breakpoints.size(), 3u);  // the device halts every time; the host decides
  EXPECT_FALSE(rep.breakpoints[0].condition_held);
  EXPECT_TRUE(rep.breakpoints[1].condition_held);
  EXPECT_TRUE(rep.breakpoints[2].condition_held);
  EXPECT_TRUE(rep.breakpoints[0].dumped.empty());
  EXPECT_EQ(rep.triggers.size(), 2u);
}

TEST(Runtime, OverflowRuleSwitchesCaptureToFullDumps) {
  auto out = temp_dir("rt_rule");
  auto cfg = ProbeConfig::from_string(R"(
watch_points: ["fc1"]
mode: statistics
rules: ["overflow_count > 3 -> enable_verbose"]
)");
  MiniExecutor ex(mlp(), cfg, out);
  for (std::uint32_t step = 0; step < 4; ++step) {
    ex.place_step(feeds());
    ex.run_step(step, [&](const graph::Op& op) {
      if (step == 1 && op.name == "fc1")
        for (int i = 0; i < 4; ++i)
          ex.dev.latch_exception({.kind = spec::kExcOverflow, .op_id = op.id, .element = static_cast<std::uint64_t>(i),
                                  .detail = spec::kExcDetailAccumulator | spec::kExcDetailAccFp16});
    });
  }
  ex.rt->finish();
  auto rep = ex.rt->report();
  ASSERT_EQ(rep.rules_fired.size(), 1u);
  EXPECT_EQ(rep.rules_fired[0].step, 1u);
  EXPECT_EQ(rep.rules_fired[0].ops_switched, std::vector<std::string>{"fc1/probe_capture:out0"});
  EXPECT_EQ(rep.counters.at("overflow_count"), 4u);
  EXPECT_EQ(rep.anomalies.size(), 4u);
  std::map<std::uint32_t, std::string> payload_by_step;
  const auto manifest = read_json(out / "dump" / "rank0" / "dump.json");
  for (const auto& e : manifest["entries"])
    payload_by_step[e["step"].get<std::uint32_t>()] = e["payload"].get<std::string>();
  EXPECT_EQ(payload_by_step[0], "statistics");
  EXPECT_EQ(payload_by_step[1], "statistics");
  EXPECT_EQ(payload_by_step[2], "full");
  EXPECT_EQ(payload_by_step[3], "full");
  EXPECT_EQ(rep.dump_files, 2u);
  ASSERT_FALSE(rep.diagnosis.empty());
  EXPECT_EQ(rep.diagnosis[0].op, "fc1");
  EXPECT_EQ(rep.diagnosis[0].cause, probes::CauseClass::Fp16AccumulationOverflow);
}

TEST(Runtime, SamplingIsDeterministicPerProbeStepAndRank) {
  auto cfg = ProbeConfig::from_string("watch_points: [\"relu1\"]\nsample_rate: 0.3\nseed: 99\n");
  auto run = [&](const char* name) {
    MiniExecutor ex(mlp(), cfg, temp_dir(name), 1, 5);
    std::vector<std::uint32_t> steps;
    ex.place_step(feeds());
    for (std::uint32_t step = 0; step < 60; ++step) {
      auto before = ex.probe_tasks + ex.in_kernel;
      ex.run_step(step);
      if (ex.probe_tasks + ex.in_kernel != before) steps.push_back(step);
    }
    return steps;
  };
  auto a = run("rt_sample_a"), b = run("rt_sample_b");
  EXPECT_EQ(a, b);
  std::vector<std::uint32_t> expect;
  for (std::uint32_t step = 0; step < 60; ++step)
    if (probes::sampled(99, "relu1/probe_capture:out0", step, 1, 0.3)) expect.push_back(step);
  EXPECT_EQ(a, expect);
  EXPECT_GT(a.size(), 8u);
  EXPECT_LT(a.size(), 30u);
}

TEST(Runtime, HostConditionFullDumpsTheVanishingTensor) {
  auto out = temp_dir("rt_vanish");
  auto cfg = ProbeConfig::from_string(R"({"watch_points": ["relu1:0"], "conditions": ["abs_mean < 1e-6"],
                                          "actions": ["full_dump"], "output": {"level": "triggered"}})");
  MiniExecutor ex(mlp(), cfg, out);
  for (std::uint32_t step = 0; step < 4; ++step) {
    ex.place_step(feeds(), [&](auto& v) {
      if (step == 3) v["relu1:0"] = f16({2, 8}, std::vector<float>(16, 1e-9f));
    });
    ex.run_step(step);
  }
  auto rep = ex.rt->report();
  ASSERT_EQ(rep.triggers.size(), 1u);
  EXPECT_EQ(rep.triggers[0].step, 3u);
  EXPECT_EQ(rep.triggers[0].tensor, "relu1:0");
  EXPECT_EQ(rep.triggers[0].origin, "host");
  ASSERT_EQ(rep.triggers[0].dumped.size(), 1u);
  ex.rt->finish();
  EXPECT_EQ(ex.rt->report().dump_entries, 1u);  // level: triggered -> only the triggered dump
  const auto entries = read_json(out / "dump" / "rank0" / "dump.json")["entries"];
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0]["trigger"], "full_dump");
  auto t = graph::read_npy((out / "dump" / "rank0" / rep.triggers[0].dumped[0]).string());
  EXPECT_EQ(t.to_f32(), std::vector<float>(16, 0.0f));  // 1e-9 underflows to zero in FP16
}

TEST(Runtime, ReferenceComparisonFindsTheFirstDivergentOp) {
  auto out = temp_dir("rt_compare");
  auto cfg = ProbeConfig::from_string(R"(
watch_points: ["*"]
mode: full
data_mode: all
compare: {ops: ["*"]}
)");
  MiniExecutor ex(mlp(), cfg, out);
  for (std::uint32_t step = 0; step < 2; ++step) {
    ex.place_step(feeds(), [&](auto& v) {
      if (step != 1) return;
      set_elem(v, "fc2:0", 2, v.at("fc2:0").to_f32()[2] + 1.0f);
      // the device computes softmax from its (wrong) input
      const graph::Tensor* in[] = {&v.at("fc2:0")};
      auto probs = graph::run_reference(*ex.executed.find_op("softmax"), in, graph::RefPrecision::F32)[0].to_f32();
      v["probs"] = f16({2, 4}, probs);
    });
    ex.run_step(step);
  }
  ex.rt->finish();
  auto rep = ex.rt->report();
  ASSERT_EQ(rep.comparisons.size(), 10u);  // 5 ops x 2 steps
  for (const auto& c : rep.comparisons) {
    EXPECT_TRUE(c.skipped.empty()) << c.op << ": " << c.skipped;
    bool should_fail = c.op == "fc2" && c.step == 1;
    EXPECT_EQ(c.pass, !should_fail) << c.op << " step " << c.step << ": " << fmt::format("{}", fmt::join(c.reasons, "; "));
  }
  ASSERT_TRUE(rep.first_divergence);
  EXPECT_EQ(rep.first_divergence->op, "fc2");
  EXPECT_EQ(rep.first_divergence->step, 1u);
  EXPECT_NEAR(rep.first_divergence->metrics.max_abs_err, 1.0, 2e-3);
}

// Three ranks whose all-reduce (FP16 accumulation) gives rank 2 a result `shift` * step away from
// the others' from step 1 on.
probes::JobReport allreduce_shifted_on_rank_2(float shift) {
  ensure_allreduce();
  graph::Graph g = mlp();
  graph::Op ar = make_op("grad_allreduce", "AllReduce", {"fc2:0"}, {"fc2:0/reduced"});
  ar.attrs["accumulation"] = std::string("fp16");
  g.add_op(ar);
  auto cfg = ProbeConfig::from_string("consistency: {reference_rank: 0, mode: full, tolerance: 1e-4}\n");
  std::vector<std::unique_ptr<MiniExecutor>> ranks;
  for (std::uint32_t r = 0; r < 3; ++r) ranks.push_back(std::make_unique<MiniExecutor>(g, cfg, temp_dir("rt_cons"), r));
  for (std::uint32_t step = 0; step < 4; ++step)
    for (std::uint32_t r = 0; r < 3; ++r) {
      ranks[r]->place_step(feeds(), [&](auto& v) {
        if (r == 2 && step >= 1) set_elem(v, "fc2:0/reduced", 0, v.at("fc2:0/reduced").to_f32()[0] + shift * static_cast<float>(step));
      });
      ranks[r]->run_step(step);
    }
  std::vector<const probes::ProbeRuntime*> rts;
  for (auto& r : ranks) {
    r->rt->finish();
    rts.push_back(r->rt.get());
  }
  return probes::combine_ranks(rts);
}

// A difference of a few FP16 ulps at the collective (its results are about 0.15: an ulp is
// 1.2e-4), within what an order of additions changes there (2 n u S = 1.3e-3): a reduction order on
// rank 2.
TEST(Runtime, CrossRankConsistencyAtTheCollective) {
  auto job = allreduce_shifted_on_rank_2(2e-4f);
  ASSERT_TRUE(job.consistency.first);
  EXPECT_EQ(job.consistency.first->op, "grad_allreduce");
  EXPECT_EQ(job.consistency.first->step, 1u);
  EXPECT_EQ(job.consistency.first->ranks, std::vector<std::uint32_t>{2});
  EXPECT_GT(job.consistency.first->max_abs_diff, 1e-4);
  EXPECT_TRUE(job.consistency.growing);
  ASSERT_FALSE(job.diagnosis.empty());
  EXPECT_EQ(job.diagnosis[0].op, "grad_allreduce");
  EXPECT_EQ(job.diagnosis[0].cause, probes::CauseClass::CollectiveOrder);
  auto j = job.to_json();
  EXPECT_EQ(j["consistency"]["first_divergence"]["op"], "grad_allreduce");
  EXPECT_EQ(j["ranks"].size(), 3u);
}

// A difference far beyond what any order of additions changes in the result (2 n u S): rank 2's
// result was corrupted, not reordered.
TEST(Runtime, CrossRankDivergenceBeyondAnyOrderIsCorruption) {
  auto job = allreduce_shifted_on_rank_2(50.0f);
  ASSERT_TRUE(job.consistency.first);
  EXPECT_EQ(job.consistency.first->ranks, std::vector<std::uint32_t>{2});
  ASSERT_FALSE(job.diagnosis.empty());
  EXPECT_EQ(job.diagnosis[0].op, "grad_allreduce");
  EXPECT_EQ(job.diagnosis[0].cause, probes::CauseClass::DataCorruption);
  EXPECT_EQ(job.diagnosis[0].rank, 2u);
  for (const auto& c : job.diagnosis) EXPECT_NE(c.cause, probes::CauseClass::CollectiveOrder);
}

TEST(Runtime, StopRuleRequestsTheExecutorToStop) {
  auto cfg = ProbeConfig::from_string("rules: [\"nan_input_count > 0 -> stop\"]\nwatch_points: [\"fc1\"]\n");
  MiniExecutor ex(mlp(), cfg, temp_dir("rt_stop"));
  ex.place_step(feeds());
  ex.run_step(0);
  EXPECT_FALSE(ex.rt->stop_requested());
  ex.run_step(1, [&](const graph::Op& op) {
    if (op.name == "add1") ex.dev.latch_exception({.kind = spec::kExcNanInput, .op_id = op.id});
  });
  EXPECT_TRUE(ex.rt->stop_requested());
  EXPECT_TRUE(ex.rt->report().stop_requested);
}

namespace {

TEST(Runtime, RewindRuleRequestsTheStepAndStops) {
  auto out = temp_dir("rt_rewind_rule");
  auto cfg = ProbeConfig::from_string(R"y(
watch_points: ["fc1"]
rules: ["overflow_count > 0 -> rewind(all, continue)"]
)y");
  MiniExecutor ex(mlp(), cfg, out);
  for (std::uint32_t step = 0; step < 3 && !ex.rt->stop_requested(); ++step) {
    ex.place_step(feeds());
    ex.run_step(step, [&](const graph::Op& op) {
      if (step == 1 && op.name == "fc1") ex.dev.latch_exception({.kind = spec::kExcOverflow, .op_id = op.id, .element = 2});
    });
  }
  EXPECT_TRUE(ex.rt->stop_requested());
  const auto rep = ex.rt->report();
  ASSERT_EQ(rep.rewinds.size(), 1u);
  const probes::RewindRequest& r = rep.rewinds[0];
  EXPECT_EQ(r.step, 1u);
  EXPECT_EQ(r.by, "rule");
  EXPECT_EQ(r.op, "fc1");  // the op that latched this step
  EXPECT_TRUE(r.all_ops);
  EXPECT_TRUE(r.then_continue);
  EXPECT_TRUE(r.ops.empty());
  EXPECT_EQ(rep.steps.size(), 2u);  // stopped after step 1
}

TEST(Runtime, RewindConditionImplicatesTheOpAndItsInputsWritersOnce) {
  auto out = temp_dir("rt_rewind_cond");
  auto cfg = ProbeConfig::from_string(R"y(
watch_points:
  - {match: ["fc2", "softmax"], conditions: [{when: "nan_count > 0", actions: [stats_dump, "rewind(stats_dump)"]}]}
)y");
  MiniExecutor ex(mlp(), cfg, out);
  for (std::uint32_t step = 0; step < 3 && !ex.rt->stop_requested(); ++step) {
    ex.place_step(feeds(), [&](auto& v) {
      if (step == 2) {
        set_elem(v, "fc2:0", 1, kNaN);
        set_elem(v, "probs", 1, kNaN);
      }
    });
    ex.run_step(step);
  }
  const auto rep = ex.rt->report();
  ASSERT_EQ(rep.rewinds.size(), 1u);  // both conditions held; the first asks
  const probes::RewindRequest& r = rep.rewinds[0];
  EXPECT_EQ(r.step, 2u);
  EXPECT_EQ(r.by, "condition");
  EXPECT_EQ(r.op, "fc2");
  EXPECT_EQ(r.tensor, "fc2:0");
  EXPECT_FALSE(r.full);
  EXPECT_FALSE(r.then_continue);
  EXPECT_EQ(r.ops, (std::vector<std::string>{"fc2", "relu1"}));
  EXPECT_EQ(rep.triggers.size(), 2u);
}

TEST(Runtime, QuantizationSaturationIsItsOwnOriginAndCause) {
  auto out = temp_dir("rt_quant_overflow");
  auto cfg = ProbeConfig::from_string("watch_points: [\"*\"]\n");
  MiniExecutor ex(mlp(), cfg, out);
  for (std::uint32_t step = 0; step < 2; ++step) {
    ex.place_step(feeds());
    ex.run_step(step, [&](const graph::Op& op) {
      if (step == 1 && op.name == "fc2")
        ex.dev.latch_exception({.kind = spec::kExcOverflow, .op_id = op.id, .output = 0, .element = 7, .value = 900.0f,
                                .detail = spec::kExcDetailQuantize, .count = 3});
    });
  }
  ex.rt->finish();
  const auto rep = ex.rt->report();
  ASSERT_EQ(rep.anomalies.size(), 1u);
  EXPECT_TRUE(rep.anomalies[0].on_input);
  EXPECT_EQ(rep.anomalies[0].tensor, "relu1:0");
  ASSERT_FALSE(rep.diagnosis.empty());
  EXPECT_EQ(rep.diagnosis[0].op, "fc2");
  EXPECT_EQ(rep.diagnosis[0].cause, probes::CauseClass::QuantizationOverflow);
  EXPECT_EQ(rep.diagnosis[0].tensor, "relu1:0");
  EXPECT_NE(rep.diagnosis[0].suggestion.find("clipped 3"), std::string::npos) << rep.diagnosis[0].suggestion;
}

}  // namespace
